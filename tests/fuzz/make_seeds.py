"""Writes the committed seed corpora under tests/fuzz/seeds/ (run by hand when
a fuzz target's input format changes; the files are committed so that
libFuzzer starts from inputs that reach the parsers' deeper paths and ctest
replays them on every build). One directory per fuzz target:

  config/   msprobe.json texts          -> tests/common/cfg_fuzz.c
  mapping/  compare --mapping files     -> tests/compare/cmp_mapping_fuzz.c
  cc_pack/  whole packs ("PK...") and   -> tests/configcheck/fuzz_cc_pack.c
            item byte + two JSON documents split by a NUL
  reader_wire/ msprobe-catalogue's      -> tests/format/fmt_wire_fuzz.c
            answers for the committed fixtures and for a compact statistics
            dump of msprobe-gen (needs a build: MSPROBE_CATALOGUE names the
            helper, default build/src/cli/msprobe-catalogue; MSPROBE_GEN
            msprobe-gen); reader_wire_seeds() alone when only it changed
  npy/      numpy.save files (v1/v2/v3  -> tests/format/fmt_npy_fuzz.c
            headers, Fortran order, 0-d, empty) and broken headers
  pt/       torch.save files ("PK...")   -> tests/format/fmt_pt_fuzz.c
            and data.pkl alone (*.pkl: the target zips it with a 4 KiB
            storage), broken zips and pickles
  msprobe_json/ dump.json texts in        -> tests/format/fmt_msprobe_fuzz.c
            msprobe's layout (tests/lib/msprobe_layout.py and by hand), some
            followed by NUL + stack.json + NUL + construct.json; data_name
            points at the files that target makes (f32.npy, i64.npy,
            short.npy, f32.pt)

npy/, pt/ and msprobe_json/ need numpy and torch: run this with the Python
that has them (/usr/bin/python3 here).

Other files there, named for what they broke, are inputs libFuzzer found
(e.g. cc_pack/pip_without_packages_or_python.bin: qsort of a NULL array);
this script leaves them alone.
"""
import glob
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "seeds")
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

CONFIG = {
    "seed_format.json": """{
  "dump": {
    "common_dump_settings": {
      "dump_mode": "api",            // "api" | "module" | "mix"
      "dump_path": "./msprobe_dump_data",
      "dump_iter": "10|20",          /* steps */
      "task": "tensor"
    },
    "api_list": [
      { "name": "torch.nn.functional.conv2d", "api_type": "forward" },
      { "name": "my_model.layer1.0.conv1",   "api_type": "backward" }
    ]
  },
  "config_check": { "output_zip_path": "./gpu_config_pack.zip" }
}
""",
    "statistics_manual.json": '{"dump": {"common_dump_settings": {"dump_mode": "mix", "dump_iter": [1, 5, 9],'
                              ' "step_trigger": "manual", "task": "statistics"}, "api_list": []},'
                              ' "config_check": {"write_at_step": 0, "dataset_batches": 3}}',
    "step_ranges.json": '{"dump": {"common_dump_settings": {"dump_iter": "1|3-5| 7 - 9"}}}',
    "all_steps.json": '{"dump": {"common_dump_settings": {"dump_iter": "all", "dump_mode": "module"}}}',
    "unknown_key.json": '{"dump": {"common_dump_settings": {"dump_itr": "1"}}}',
}

MAPPING = {
    "one_pair.txt": "Functional.gelu.0.forward NPU.fast_gelu.0.forward\n",
    "comments_crlf_tabs.txt": "# header\n\nA.a.0.forward   B.b.0.forward  # trailing\r\n"
                              "C.c.1.backward\tD.d.1.backward\n",
    "three_names.txt": "a b c\n",
    "data_mapping.yaml": "# msprobe's data_mapping.yaml\n"
                         "NPU.fast_gelu.0.forward.input.0: Functional.gelu.0.forward.input.0\n"
                         "'NPU.fast_gelu.0.forward.output.0': \"Functional.gelu.0.forward.output.0\"\n"
                         "Torch.matmul.0.forward: {a: [b]}\n",
    "mixed_kinds.txt": "A.a.0.forward B.b.0.forward\nC.c.0.forward: D.d.0.forward\n",
}

MANIFEST = {"format": "msprobe-config-check", "format_version": 1, "tool": "msprobe",
            "tool_version": "0", "kind": "run", "host": "h", "time": "2026-01-01T00:00:00Z",
            "rank": 0, "world_size": 1}
TENSOR = {"name": "fc.weight", "shape": [2, 3], "dtype": "torch.float32", "hash": "ab" * 32,
          "max": 1.5, "min": -1.0, "mean": 0.25, "norm": "nan"}
ITEMS = {
    "env": {"salt": "s", "vars": {"HOME": "/root", "NCCL_ALGO": "Ring", "API_TOKEN": "sha256:00"}},
    "pip": {"python": "3.11.2", "packages": [{"name": "torch", "version": "1.13.1"},
                                             {"name": "numpy", "version": "1.24.2"}]},
    "dataset": {"tensors": [dict(TENSOR, name="batch0.input.0")]},
    "weights": {"tensors": [TENSOR, dict(TENSOR, name="fc.bias", shape=[3])]},
    "random": {"calls": [{"api": "torch.manual_seed", "value": "0", "file": "/t/train.py",
                          "line": 7}]},
    "hyperparameters": {"optimizers": [{"class": "SGD", "param_groups": [{"lr": 0.1}]}],
                        "args": ["--epochs", "1"]},
}
ITEM_ORDER = ["env", "pip", "dataset", "weights", "random", "hyperparameters"]


def pack(items):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(MANIFEST))
        for name, obj in items.items():
            z.writestr(f"{name}.json", json.dumps(obj))
    return buf.getvalue()


def write(sub, name, data):
    d = os.path.join(SEEDS, sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)


def with_defaults(answer):
    """A catalogue answer whose /defaults rows (its last section: u64 count,
    then api, key, value strings) are two of F.gelu's, as the shim writes
    them (msprobe-dump(5)); the fixtures predate the table."""
    assert answer[-8:] == bytes(8), "a fixture with /defaults rows"

    def s(t):  # common's wire codec: u64 length + 1, then the bytes
        return (len(t) + 1).to_bytes(8, "little") + t

    rows = [(b"Functional.gelu", b"#0", b"input"), (b"Functional.gelu", b"approximate", b"'none'")]
    return answer[:-8] + len(rows).to_bytes(8, "little") + b"".join(
        s(a) + s(k) + s(v) for a, k, v in rows)


def reader_wire_seeds():
    """The helper's answers for the committed fixtures (catalogues, "MSPC"),
    for a small statistics dump in the compact layout that msprobe-gen writes
    (its tables, "MSPT"; MSPROBE_GEN names msprobe-gen, default
    build/bench/compare/msprobe-gen) and an error answer."""
    build = os.path.join(HERE, "..", "..", "build")
    helper = os.environ.get("MSPROBE_CATALOGUE",
                            os.path.join(build, "src", "cli", "msprobe-catalogue"))
    root = os.path.join(HERE, "..", "..", "fixtures")
    for path in sorted(glob.glob(os.path.join(root, "*", "step*", "rank0", "dump.h5"))):
        side, step = path.split(os.sep)[-4:-2]
        out = subprocess.run([helper, "--", path], capture_output=True, check=True).stdout
        write("reader_wire", f"{side}_{step}.bin", out)
        if (side, step) == ("npu", "step0"):
            write("reader_wire", "npu_step0_with_defaults.bin", with_defaults(out))
    gen = os.environ.get("MSPROBE_GEN", os.path.join(build, "bench", "compare", "msprobe-gen"))
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([gen, "--out", tmp, "--steps", "1", "--ranks", "1", "--layers", "3",
                        "--numel", "16", "--task", "statistics", "--seed", "3"], check=True,
                       capture_output=True)
        path = os.path.join(tmp, "bench", "step0", "rank0", "dump.h5")
        out = subprocess.run([helper, "--", path], capture_output=True, check=True).stdout
        assert out[:4] == b"MSPT", out[:4]
        write("reader_wire", "stats_compact.bin", out)
    write("reader_wire", "error.bin", b"MSPE" + (4).to_bytes(8, "little")
          + (6).to_bytes(8, "little") + b"oops!")


def main():
    for name, text in CONFIG.items():
        write("config", name, text)
    for name, text in MAPPING.items():
        write("mapping", name, text)
    write("cc_pack", "full_pack.zip", pack(ITEMS))
    write("cc_pack", "manifest_only.zip", pack({}))
    for k, item in enumerate(ITEM_ORDER):
        bench = ITEMS[item]
        cmp = json.loads(json.dumps(bench).replace("1.13.1", "2.0.0").replace("Ring", "Tree")
                         .replace('"0"', '"1"').replace("0.1", "0.2"))
        write("cc_pack", f"item_{item}.bin", bytes([k]) + json.dumps(bench).encode() + b"\0"
              + json.dumps(cmp).encode())
    reader_wire_seeds()
    npy_seeds()
    pt_seeds()
    msprobe_seeds()



def npy_bytes(a, version=None):
    import numpy as np
    buf = io.BytesIO()
    if version is None:
        np.save(buf, a)
    else:
        np.lib.format.write_array(buf, a, version=version)
    return buf.getvalue()


def npy_header(header, body=b"", version=1):
    """A .npy with a hand-written header dict (padded as numpy pads it)."""
    h = header.encode()
    hl = 2 if version == 1 else 4
    pad = (-(6 + 2 + hl + len(h) + 1)) % 64
    h += b" " * pad + b"\n"
    return (b"\x93NUMPY" + bytes([version, 0]) + len(h).to_bytes(hl, "little") + h + body)


def npy_seeds():
    import numpy as np
    r = np.random.default_rng(3)
    f32 = r.standard_normal((2, 3)).astype(np.float32)
    write("npy", "f32_2x3.npy", npy_bytes(f32))
    write("npy", "f16_vector.npy", npy_bytes(r.standard_normal(7).astype(np.float16)))
    write("npy", "f64_fortran.npy", npy_bytes(np.asfortranarray(r.standard_normal((3, 4)))))
    write("npy", "i32_3d.npy", npy_bytes(np.arange(24, dtype=np.int32).reshape(2, 3, 4)))
    write("npy", "i8_signed.npy", npy_bytes(np.array([-128, -1, 0, 127], dtype=np.int8)))
    write("npy", "i16_fortran_3d.npy",
          npy_bytes(np.asfortranarray(np.arange(24, dtype=np.int16).reshape(2, 3, 4))))
    write("npy", "i64_scalar_0d.npy", npy_bytes(np.array(-(1 << 40), dtype=np.int64)))
    write("npy", "u8_empty.npy", npy_bytes(np.zeros((0, 3), dtype=np.uint8)))
    write("npy", "bool_mask.npy", npy_bytes(np.array([[True, False], [False, True]])))
    write("npy", "v2_header.npy", npy_bytes(f32, version=(2, 0)))
    write("npy", "v3_header.npy", npy_bytes(np.arange(5, dtype=np.float64), version=(3, 0)))
    write("npy", "big_endian_refused.npy", npy_bytes(np.arange(4, dtype=">f4")))
    write("npy", "complex_refused.npy", npy_bytes(np.zeros(2, dtype=np.complex64)))
    good = npy_bytes(f32)
    # hand-made: every one must be refused naming the file
    write("npy", "truncated_header.npy", good[:40])
    write("npy", "truncated_data.npy", good[:-5])
    write("npy", "bad_magic.npy", b"\x93NUMPX" + good[6:])
    write("npy", "version9.npy", good[:6] + b"\x09" + good[7:])
    write("npy", "header_len_past_end.npy", good[:8] + b"\xff\xff" + good[10:])
    write("npy", "huge_shape.npy",
          npy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }",
                     b"\0" * 8))
    write("npy", "shape_overflow.npy",
          npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
                     b"\0" * 16))
    write("npy", "shape_bytes_overflow.npy",
          npy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }",
                     b"\0" * 16))
    write("npy", "fortran_shape_overflow.npy",
          npy_header("{'descr': '<f4', 'fortran_order': True, 'shape': (1099511627776, "
                     "1099511627776, 0), }"))
    write("npy", "negative_shape.npy",
          npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 2), }", b"\0" * 8))
    write("npy", "no_shape.npy", npy_header("{'descr': '<f4', 'fortran_order': False, }"))
    write("npy", "fortran_maybe.npy",
          npy_header("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", b"\0" * 4))
    write("npy", "too_many_dims.npy",
          npy_header("{'descr': '|u1', 'fortran_order': False, 'shape': (%s), }"
                     % ("1, " * 40), b"\0"))


def pt_bytes(obj):
    import torch
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def pkl_of(pt):
    with zipfile.ZipFile(io.BytesIO(pt)) as z:
        return z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))


def pk_str(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def pk_int(v):
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if -(1 << 31) <= v < (1 << 31):
        return b"J" + struct.pack("<i", v)
    return b"\x8a\x08" + struct.pack("<q", v)


def pk_tensor(storage="FloatStorage", numel=6, offset=0, size=(2, 3), stride=(3, 1), key="0"):
    """The pickle torch.save writes for one tensor, by hand (values chosen to
    break the reader's arithmetic)."""
    tup = lambda vs: b"(" + b"".join(pk_int(v) for v in vs) + b"t"
    return (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(("
            + pk_str("storage") + b"ctorch\n" + storage.encode() + b"\n" + pk_str(key)
            + pk_str("cpu") + pk_int(numel) + b"tQ" + pk_int(offset) + tup(size) + tup(stride)
            + b"\x89ccollections\nOrderedDict\n)RtR.")


def zip_size_lie(data, member, size, comp_size=None):
    """data with the central directory's sizes of member overwritten."""
    d = bytearray(data)
    i = d.find(b"PK\x01\x02")
    while i >= 0:
        nl = struct.unpack_from("<H", d, i + 28)[0]
        if bytes(d[i + 46:i + 46 + nl]).endswith(member):
            struct.pack_into("<I", d, i + 24, size)
            if comp_size is not None:
                struct.pack_into("<I", d, i + 20, comp_size)
        i = d.find(b"PK\x01\x02", i + 4)
    return bytes(d)


def pt_seeds():
    import torch
    g = torch.Generator().manual_seed(5)
    a = torch.randn(2, 3, generator=g)
    big = torch.randn(6, 8, generator=g, dtype=torch.float64)
    files = {
        "f32_2x3.pt": a,
        "bf16.pt": a.to(torch.bfloat16),
        "f16_scalar_0d.pt": torch.tensor(1.5, dtype=torch.float16),
        "transposed.pt": torch.randn(4, 3, generator=g).t(),
        "slice_of_storage.pt": big[2:5, 1:7:2],
        "i64_vector.pt": torch.arange(-3, 5, dtype=torch.int64),
        "bool.pt": torch.tensor([True, False, True]),
        "u8_empty.pt": torch.zeros(0, 4, dtype=torch.uint8),
        "dict_refused.pt": {"w": a},
        "list_refused.pt": [a, a],
    }
    for name, obj in files.items():
        data = pt_bytes(obj)
        write("pt", name, data)
        if name in ("f32_2x3.pt", "transposed.pt", "slice_of_storage.pt", "bf16.pt"):
            write("pt", name[:-3] + ".pkl", pkl_of(data))
    good = pt_bytes(a)
    write("pt", "truncated_zip.pt", good[:len(good) // 2])
    write("pt", "zip_member_size_lie.pt", zip_size_lie(good, b"data/0", 0xF0000000))
    write("pt", "zip_member_comp_size_lie.pt",
          zip_size_lie(good, b"data/0", 0xF0000000, 0xF0000000))
    write("pt", "bad_zip.pt", b"PK\x03\x04" + b"\xff" * 60)
    write("pt", "hand_f32.pkl", pk_tensor())
    write("pt", "negative_offset.pkl", pk_tensor(offset=-1))
    write("pt", "negative_stride.pkl", pk_tensor(stride=(-3, 1)))
    write("pt", "offset_past_storage.pkl", pk_tensor(offset=4090))
    write("pt", "huge_offset.pkl", pk_tensor(offset=(1 << 62) + 1000, size=(1,), stride=(1,)))
    write("pt", "stride_overflow.pkl", pk_tensor(size=(4, 1), stride=(1 << 62, 1)))
    write("pt", "numel_overflow.pkl", pk_tensor(size=(1 << 32, 1 << 32), stride=(0, 0)))
    write("pt", "view_bytes_overflow.pkl", pk_tensor(size=(1 << 31, 1 << 31), stride=(0, 0)))
    write("pt", "empty_dim_overflow.pkl",
          pk_tensor(size=(0, 1 << 40, 1 << 40), stride=(0, 0, 0)))
    write("pt", "huge_broadcast_view.pkl", pk_tensor(size=(1 << 20, 1 << 20), stride=(0, 0)))
    write("pt", "unknown_storage.pkl", pk_tensor(storage="ComplexFloatStorage"))
    write("pt", "missing_storage_key.pkl", pk_tensor(key="7"))
    write("pt", "calls_os_system.pkl", b"\x80\x02cos\nsystem\n" + pk_str("true") + b"\x85R.")
    write("pt", "empty_tuple_on_empty_stack.pkl", b"\x80\x02).")
    write("pt", "memo_get_unset.pkl", b"\x80\x02h\x05.")
    write("pt", "unknown_opcode.pkl", b"\x80\x02]q\x00.")


def layout_jsons(task, fmt="npy", summary_mode="statistics", **kw):
    """dump.json (and stack.json, construct.json) as msprobe_layout writes them."""
    import msprobe_layout as ML
    import torch
    g = torch.Generator().manual_seed(11)
    x = torch.randn(2, 3, generator=g)
    w = torch.randn(2, 3, generator=g)
    recs = [("Functional.linear.0.forward",
             {"input_args": [x, w, None], "input_kwargs": {"bias": None, "scale": 0.5},
              "output": [x + w]}),
            ("Tensor.to.0.forward", {"input_args": [x], "output": [x.to(torch.bfloat16)]}),
            ("Torch.cat.0.forward", {"input_args": [[x, w], 0], "output": [torch.cat([x, w])]}),
            ("Torch.arange.0.forward", {"input_args": [4], "output": [torch.arange(4)]}),
            ("Functional.linear.0.backward", {"input": [x], "output": [w, None]})]
    with tempfile.TemporaryDirectory() as d:
        rdir = ML.write(d, recs, task=task, fmt=fmt, summary_mode=summary_mode,
                        stacks=[(["File \"t.py\", line 3, in f", "y = linear(x)"],
                                 ["Functional.linear.0.forward"])],
                        construct={"Functional.linear.0.forward": "Module.fc.Linear.forward.0"},
                        **kw)
        out = []
        for name in ("dump.json", "stack.json", "construct.json"):
            with open(os.path.join(rdir, name)) as fh:
                out.append(fh.read())
    return out


def point_data_names(text, ext):
    """data_name of each tensor -> a file the fuzz target makes, by shape."""
    doc = json.loads(text)

    def walk(v):
        if isinstance(v, list):
            for e in v:
                walk(e)
        elif isinstance(v, dict):
            if "data_name" in v:
                v["data_name"] = ("i64" if v["shape"] == [4] else "f32") + ext
                if v["shape"] not in ([4], [2, 3]):
                    v["data_name"] = "short.npy"
            for e in v.values():
                walk(e)
    walk(doc["data"])
    # msprobe writes the absolute path; the seed must not change per run
    doc["dump_data_dir"] = "/data/msprobe_dump/step0/rank0/dump_tensor_data"
    return json.dumps(doc, indent=1)


MS_RECORD = {"input_args": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3],
                             "Max": 2.0, "Min": -1.0, "Mean": 0.5, "Norm": 3.0,
                             "requires_grad": False, "data_name": "f32.npy"}],
             "output": [{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3],
                         "Max": 5.0, "Min": -4.0, "Mean": 0.9, "Norm": 8.0,
                         "requires_grad": True, "data_name": "f32.pt"}]}


def ms_doc(data, task="tensor", level="L1"):
    return json.dumps({"task": task, "level": level, "framework": "pytorch", "data": data},
                      indent=1)


def msprobe_seeds():
    dump, stack, construct = layout_jsons("tensor", fmt="npy")
    write("msprobe_json", "tensor_npy_with_stack_construct.json",
          point_data_names(dump, ".npy") + "\0" + stack + "\0" + construct)
    dump, stack, construct = layout_jsons("tensor", fmt="pt", level="module")
    write("msprobe_json", "tensor_pt_level_l0.json", point_data_names(dump, ".pt"))
    dump, stack, _ = layout_jsons("statistics")
    write("msprobe_json", "statistics_stack.json", dump + "\0" + stack)
    dump, _, _ = layout_jsons("statistics", summary_mode="md5")
    write("msprobe_json", "statistics_md5.json", dump)
    dump, _, _ = layout_jsons("statistics", summary_mode="md5-only", level="api")
    write("msprobe_json", "md5_only.json", dump)
    write("msprobe_json", "hand_npy_pt.json", ms_doc({"Functional.relu.0.forward": MS_RECORD}))
    specials = ms_doc({"Functional.exp.0.forward": {"input_args": [
        {"type": "torch.Tensor", "dtype": "torch.float16", "shape": [3], "Max": "__inf",
         "Min": "__ninf", "Mean": "__nan", "Norm": "__inf", "requires_grad": False}]}},
        task="statistics", level="mix")
    specials = (specials.replace('"__inf"', "Infinity").replace('"__ninf"', "-Infinity")
                .replace('"__nan"', "NaN"))
    write("msprobe_json", "nan_infinity_bare.json", specials)
    nested = {"input_args": [[[dict(MS_RECORD["input_args"][0], data_name="i64.npy",
                                    dtype="torch.int64", shape=[4])], None],
                             {"type": "int", "value": 3}, {"type": "slice", "value": [0, 2, None]},
                             None],
              "input_kwargs": {"dim": {"type": "int", "value": -1},
                               "weight": dict(MS_RECORD["input_args"][0], dtype="torch.bfloat16"),
                               "out": None, "flag": {"type": "bool"}},
              "parameters": {"weight": MS_RECORD["input_args"][0]},
              "output": MS_RECORD["output"][0]}
    old_stack = json.dumps({"Torch.nested.0.forward": ["File \"a.py\", line 1", "f()"]})
    write("msprobe_json", "nested_kwargs_nulls_old_stack.json",
          ms_doc({"Torch.nested.0.forward": nested}) + "\0" + old_stack)
    # hand-made: each must be refused, or read without crashing
    write("msprobe_json", "invalid_json.json", '{"data": {"a": ')
    write("msprobe_json", "no_data.json", '{"task": "tensor", "level": "L1"}')
    write("msprobe_json", "record_not_object.json", ms_doc({"r": [1, 2]}))
    write("msprobe_json", "bad_md5.json", ms_doc({"r": {"output": [dict(
        MS_RECORD["output"][0], md5="xyz")]}}))
    write("msprobe_json", "negative_shape.json", ms_doc({"r": {"output": [dict(
        MS_RECORD["output"][0], shape=[-2, 3])]}}))
    write("msprobe_json", "huge_shape.json", ms_doc({"r": {"output": [dict(
        MS_RECORD["output"][0], shape=[1 << 40, 1 << 40, 1 << 40])]}}))
    write("msprobe_json", "shape_1e300.json", ms_doc({"r": {"output": [dict(
        MS_RECORD["output"][0], shape=[1e300])]}}))
    write("msprobe_json", "shape_mismatch_and_short_npy.json", ms_doc({"r": {"input_args": [
        dict(MS_RECORD["input_args"][0], shape=[4, 4]),
        dict(MS_RECORD["input_args"][0], shape=[3], dtype="torch.float64", data_name="short.npy"),
        dict(MS_RECORD["input_args"][0], data_name="../dump.json"),
        dict(MS_RECORD["input_args"][0], data_name="missing.npy")]}}))
    write("msprobe_json", "stack_json_array.json",
          ms_doc({"r": MS_RECORD}) + "\0" + '[["x"], "y"]' + "\0" + '["r"]')


if __name__ == "__main__":
    main()
