"""Writes the committed seed corpora under tests/fuzz/seeds/ (run by hand when
a fuzz target's input format changes; the files are committed so that
libFuzzer starts from inputs that reach the parsers' deeper paths and ctest
replays them on every build). One directory per fuzz target:

  config/   msprobe.json texts          -> tests/common/cfg_fuzz.c
  mapping/  compare --mapping files     -> tests/compare/cmp_mapping_fuzz.c
  cc_pack/  whole packs ("PK...") and   -> tests/configcheck/fuzz_cc_pack.c
            item byte + two JSON documents split by a NUL
  reader_wire/ msprobe-catalogue's      -> tests/format/fmt_wire_fuzz.c
            answers for the committed fixtures (needs a build: MSPROBE_CATALOGUE
            names the helper, default build/src/cli/msprobe-catalogue)

Other files there, named for what they broke, are inputs libFuzzer found
(e.g. cc_pack/pip_without_packages_or_python.bin: qsort of a NULL array);
this script leaves them alone.
"""
import glob
import io
import json
import os
import subprocess
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDS = os.path.join(HERE, "seeds")

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
    helper = os.environ.get("MSPROBE_CATALOGUE",
                            os.path.join(HERE, "..", "..", "build", "src", "cli",
                                         "msprobe-catalogue"))
    root = os.path.join(HERE, "..", "..", "fixtures")
    for path in sorted(glob.glob(os.path.join(root, "*", "step*", "rank0", "dump.h5"))):
        side, step = path.split(os.sep)[-4:-2]
        out = subprocess.run([helper, "--", path], capture_output=True, check=True).stdout
        write("reader_wire", f"{side}_{step}.bin", out)
    write("reader_wire", "error.bin", b"MSPE" + (4).to_bytes(8, "little")
          + (5).to_bytes(4, "little") + b"oops!")


if __name__ == "__main__":
    main()
