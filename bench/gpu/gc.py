"""Helpers for gpu_check.sh: training scripts run with and without the msprobe
shim, and independent checks of what the shim wrote (h5py/numpy/openpyxl only).

    gc.py resnet  --device D --steps N --batch B --size S [--warmup W] [--save-input F]
    gc.py check   --dump DIR --task T --input F.npy --device D [--tensor-dump DIR]
    gc.py lm      --device D --dtype fp32|bf16 --model llama|encoder --steps N
    gc.py compile --device D --backend B --steps N
    gc.py xlsx    FILE
Training commands print "LOSS <step> <float.hex>" lines (and "TIMES [...]").
check/xlsx print findings and exit 0 (ok) or 1 (a check failed)."""
import argparse
import glob
import json
import os
import sys
import time
import zlib


def _sync(dev):
    import torch
    if dev.startswith("cuda"):
        torch.cuda.synchronize()


def _determinism(torch):
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


def cmd_resnet(a):
    import numpy as np
    import torch
    import torch.nn.functional as F
    import torchvision
    _determinism(torch)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).to(a.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    times = []
    for i in range(a.warmup + a.steps):
        x = torch.randn(a.batch, 3, a.size, a.size, generator=g)
        y = torch.randint(0, 10, (a.batch,), generator=g)
        if i == 0 and a.save_input:
            np.save(a.save_input, x.numpy())
        x, y = x.to(a.device), y.to(a.device)
        _sync(a.device)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        lv = loss.item()
        _sync(a.device)
        dt = time.perf_counter() - t0
        if i >= a.warmup:
            times.append(dt)
        print("LOSS", i, float(lv).hex(), lv, flush=True)
    print("TIMES", json.dumps(times), flush=True)


def _rows(f):
    import numpy as np
    idx = f["index"][()]
    return idx, [(r["record"].decode(), r["role"].decode()) for r in idx]


def cmd_check(a):
    """Independent checks of a resnet dump against the batch the script saved."""
    import h5py
    import numpy as np
    ok = True

    def bad(msg):
        nonlocal ok
        ok = False
        print("FAIL:", msg)

    x = np.load(a.input).astype(np.float64)
    files = sorted(glob.glob(os.path.join(a.dump, "step*", "rank*", "dump.h5")))
    print("files:", files)
    if len(files) < a.min_files:
        bad(f"{len(files)} step files, expected >= {a.min_files}")
    conv1 = None
    for p in files:
        try:
            with h5py.File(p, "r") as f:
                attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
                idx, names = _rows(f)
                devs = {}
                for r in idx:
                    if r["role"]:
                        d = r["device"].decode()
                        devs[d] = devs.get(d, 0) + 1
                recs = len({n for n, _ in names})
                print(f"{p}: attrs={attrs} records={recs} tensors={len(idx)} devices={devs}")
                unexpected = set(devs) - {a.device, "cpu"}
                if unexpected:
                    bad(f"{p}: unexpected devices {unexpected}")
                if devs.get(a.device, 0) == 0:
                    bad(f"{p}: no tensor recorded on {a.device}")
                if "step0" in p:
                    conv1 = _first_conv(f, idx, a, x, bad)
                    if a.task == "tensor":
                        _bn_relu(f, idx, bad)
        except Exception as e:  # noqa: BLE001
            bad(f"{p}: {type(e).__name__}: {e}")
    if conv1 is None:
        bad("no Functional.conv2d input.0 found in step 0")
    if a.tensor_dump and conv1 is not None:
        # statistics of this (statistics-task) run vs the data of the tensor-task run
        p = glob.glob(os.path.join(a.tensor_dump, "step0", "rank*", "dump.h5"))
        with h5py.File(p[0], "r") as f:
            out = f[conv1["record"]]["output.0"][()].astype(np.float64)
        st = conv1["out_stats"]
        want = (out.max(), out.min(), out.mean(), np.sqrt((out * out).sum()))
        print("conv1 output.0 stats (stats run):", st, " from tensor run data:", want)
        if st[0] != want[0] or st[1] != want[1]:
            bad("conv1 output max/min of the statistics run differ from the tensor run's data")
        # documented (accel_copy.py): float32 within a window's row, float64 across
        if abs(st[2] - want[2]) > 1e-6 * np.abs(out).mean():
            bad(f"conv1 output mean: {st[2]!r} vs {want[2]!r}")
        if abs(st[3] - want[3]) > 1e-6 * want[3]:
            bad(f"conv1 output norm: {st[3]!r} vs {want[3]!r}")
    print("RESULT", "ok" if ok else "failed")
    sys.exit(0 if ok else 1)


def _first_conv(f, idx, a, x, bad):
    import numpy as np
    cands = [r for r in idx if r["record"].decode().startswith("Functional.conv2d.")
             and r["role"].decode() == "input.0"]
    if not cands:
        return None
    r = min(cands, key=lambda r: r["order"])
    rec = r["record"].decode()
    print("first conv record:", rec, "device", r["device"].decode(), "dtype", r["dtype"].decode(),
          "shape", list(r["shape"]), "has_data", r["has_data"])
    if r["device"].decode() != a.device:
        bad(f"{rec} input.0 device {r['device'].decode()!r}, expected {a.device!r}")
    if list(r["shape"]) != list(x.shape):
        bad(f"{rec} input.0 shape {list(r['shape'])} != fed batch {list(x.shape)}")
        return None
    want = (x.max(), x.min(), x.mean(), np.sqrt((x * x).sum()))
    got = (r["max"], r["min"], r["mean"], r["norm"])
    print("input.0 stats dumped:", got, " numpy:", want)
    if got[0] != want[0] or got[1] != want[1]:
        bad("input.0 max/min differ from the fed batch")
    tol = 1e-6 if a.task == "statistics" else 1e-9  # device statistics: accel_copy.py
    if abs(got[2] - want[2]) > tol * max(np.abs(x).mean(), 1e-300):
        bad(f"input.0 mean: {got[2]!r} vs numpy {want[2]!r}")
    if abs(got[3] - want[3]) > tol * want[3]:
        bad(f"input.0 norm: {got[3]!r} vs numpy {want[3]!r}")
    x32 = x.astype(np.float32)
    crc = zlib.crc32(x32.tobytes())
    if a.task == "statistics" and int(r["crc32"]) == 0:
        print("input.0 crc32 0: not known (statistics computed on the device)")
    elif int(r["crc32"]) != crc:
        bad(f"input.0 crc32 {int(r['crc32']):#x} != zlib of the fed batch {crc:#x}")
    else:
        print("input.0 crc32 matches the fed batch")
    orow = [q for q in idx if q["record"].decode() == rec and q["role"].decode() == "output.0"]
    out_stats = None
    if orow:
        q = orow[0]
        out_stats = (q["max"], q["min"], q["mean"], q["norm"])
        if q["device"].decode() != a.device:
            bad(f"{rec} output.0 device {q['device'].decode()!r}")
    if r["has_data"]:
        d = f[rec]["input.0"][()]
        if d.dtype != np.float32 or not np.array_equal(d, x32):
            bad(f"{rec} input.0 data differ from the fed batch")
        else:
            print("input.0 data bit-identical to the fed batch")
        # recompute conv1 (resnet18: 7x7, stride 2, padding 3, no bias) in float64
        import torch
        import torch.nn.functional as F
        w = f[rec]["input.1"][()]
        out = f[rec]["output.0"][()]
        ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w.astype(np.float64)),
                       stride=2, padding=3).numpy()
        err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
        print(f"conv1 output.0 vs float64 recomputation: rel L2 err {err:.3g}")
        if not err < 1e-5:
            bad(f"conv1 output rel err {err:.3g} (expected < 1e-5 with TF32 off)")
    return {"record": rec, "out_stats": out_stats}


def _bn_relu(f, idx, bad):
    """resnet18's bn1 (training mode, batch statistics) and the in-place ReLU
    after it: bn's output and relu's input must be the pre-ReLU values (the
    device copy taken before relu_ overwrote the storage)."""
    import numpy as np
    recs = {}
    for r in idx:
        n = r["record"].decode()
        for k in ("Functional.batch_norm.", "Functional.relu."):
            if n.startswith(k) and (k not in recs or r["order"] < recs[k][1]):
                recs[k] = (n, r["order"])
    if len(recs) < 2:
        bad("no batch_norm/relu records in step 0")
        return
    bn, relu = f[recs["Functional.batch_norm."][0]], f[recs["Functional.relu."][0]]
    x = bn["input.0"][()].astype(np.float64)
    w = bn["input.3"][()].astype(np.float64)
    b = bn["input.4"][()].astype(np.float64)
    y = bn["output.0"][()]
    mu = x.mean(axis=(0, 2, 3), keepdims=True)
    var = x.var(axis=(0, 2, 3), keepdims=True)
    ref = (x - mu) / np.sqrt(var + 1e-5) * w.reshape(1, -1, 1, 1) + b.reshape(1, -1, 1, 1)
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    print(f"{recs['Functional.batch_norm.'][0]} output.0 vs numpy batch norm: rel L2 err {err:.3g};"
          f" min {y.min():.4g}")
    if not err < 1e-5:
        bad(f"batch_norm output rel err {err:.3g}")
    if not y.min() < 0:
        bad("batch_norm output has no negative value: overwritten by the in-place relu?")
    ri, ro = relu["input.0"][()], relu["output.0"][()]
    if not np.array_equal(ri, y):
        bad("relu input.0 differs from batch_norm output.0 (in-place relu)")
    if not np.array_equal(ro, np.maximum(y, 0)):
        bad("relu output.0 != max(batch_norm output, 0)")
    else:
        print("in-place relu: input.0 = bn output (pre-ReLU), output.0 = max(bn, 0): ok")


def _encoder_model(torch, vocab, dim):
    import torch.nn as nn

    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            layer = nn.TransformerEncoderLayer(dim, 4, 2 * dim, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2)
            self.head = nn.Linear(dim, vocab)

        def forward(self, ids):
            return self.head(self.enc(self.emb(ids)))
    return Enc()


def cmd_lm(a):
    import torch
    import torch.nn.functional as F
    _determinism(torch)
    torch.manual_seed(0)
    vocab, dim, seq, batch = 256, 64, 32, 4
    if a.model == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        kw = dict(vocab_size=vocab, hidden_size=dim, intermediate_size=2 * dim,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=seq)
        try:
            cfg = LlamaConfig(attn_implementation="sdpa", **kw)
        except Exception:  # noqa: BLE001
            cfg = LlamaConfig(**kw)
        model = LlamaForCausalLM(cfg)
        print("attn_implementation:", getattr(model.config, "_attn_implementation", "?"))
    else:
        model = _encoder_model(torch, vocab, dim)
    model = model.to(a.device)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(3)
    bf16 = a.dtype == "bf16"
    for i in range(a.steps):
        ids = torch.randint(0, vocab, (batch, seq), generator=g).to(a.device)
        opt.zero_grad()
        with torch.autocast(device_type=a.device.split(":")[0], dtype=torch.bfloat16,
                            enabled=bf16):
            if a.model == "llama":
                loss = model(input_ids=ids, labels=ids).loss
            else:
                logits = model(ids)
                loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab).float(),
                                       ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        lv = loss.item()
        print("LOSS", i, float(lv).hex(), lv, flush=True)


def cmd_compile(a):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    _determinism(torch)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64),
                          nn.Linear(64, 10)).to(a.device)
    cmodel = torch.compile(model, backend=a.backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(5)
    for i in range(a.steps):
        x = torch.randn(16, 32, generator=g).to(a.device)
        y = torch.randint(0, 10, (16,), generator=g).to(a.device)
        opt.zero_grad()
        loss = F.cross_entropy(cmodel(x), y)
        loss.backward()
        opt.step()
        lv = loss.item()
        print("LOSS", i, float(lv).hex(), lv, flush=True)


def cmd_xlsx(a):
    import openpyxl
    print("openpyxl", openpyxl.__version__, "from", os.path.dirname(openpyxl.__file__))
    wb = openpyxl.load_workbook(a.file, read_only=True)
    total = 0
    for ws in wb.worksheets:
        rows = list(ws.iter_rows(values_only=True))
        total += len(rows)
        print(f"sheet {ws.title!r}: {len(rows)} rows (header included)")
        for r in rows[:3]:
            print("   ", [c for c in r][:12])
    print("ROWS", total)
    sys.exit(0 if total > 1 else 1)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("resnet")
    r.add_argument("--device", default="cuda")
    r.add_argument("--steps", type=int, default=2)
    r.add_argument("--warmup", type=int, default=0)
    r.add_argument("--batch", type=int, default=4)
    r.add_argument("--size", type=int, default=64)
    r.add_argument("--save-input")
    c = sub.add_parser("check")
    c.add_argument("--dump", required=True)
    c.add_argument("--task", required=True)
    c.add_argument("--input", required=True)
    c.add_argument("--device", required=True)
    c.add_argument("--min-files", type=int, default=2)
    c.add_argument("--tensor-dump")
    m = sub.add_parser("lm")
    m.add_argument("--device", default="cuda")
    m.add_argument("--dtype", choices=("fp32", "bf16"), required=True)
    m.add_argument("--model", choices=("llama", "encoder"), default="encoder")
    m.add_argument("--steps", type=int, default=2)
    k = sub.add_parser("compile")
    k.add_argument("--device", default="cuda")
    k.add_argument("--backend", default="inductor")
    k.add_argument("--steps", type=int, default=3)
    x = sub.add_parser("xlsx")
    x.add_argument("file")
    a = p.parse_args()
    {"resnet": cmd_resnet, "check": cmd_check, "lm": cmd_lm, "compile": cmd_compile,
     "xlsx": cmd_xlsx}[a.cmd](a)


if __name__ == "__main__":
    main()
