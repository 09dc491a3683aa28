#!/usr/bin/python3
"""Bytes per statistics record on disk (not a test): task "statistics" dumps of
small real models under the shim, file size / records, for one or more
preload libraries side by side (e.g. today's main against a branch).

    bench/dump/stats_size.py [--lib NAME=PRELOAD_LIB ...] [--steps N]

Without --lib the build next to this script is used. Models: a small
transformer (nanoGPT-like blocks written in torch.nn; gpt: 2 blocks, gpt12:
12), a 24-block LayerNorm MLP and torchvision's resnet18, each in api,
module and mix modes. For each
file it prints the records, the file size and bytes a record, and which
objects of the file hold the bytes (storage of each table)."""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LIB = os.path.join(HERE, "..", "..", "build", "src", "dump", "libmsprobe_preload.so")

MODELS = r"""
import sys, torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
which, steps = sys.argv[1], int(sys.argv[2])

class Block(nn.Module):
    def __init__(self, d=64, heads=4):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.attn(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        a = (q @ k.transpose(-2, -1)) * (1.0 / (C // self.heads) ** 0.5)
        a = F.softmax(a, dim=-1)
        y = (a @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))

class GPT(nn.Module):
    def __init__(self, vocab=128, d=64, n=2, T=16):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)
    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))

if which.startswith("gpt"):  # gpt: 2 blocks; gptN: N blocks (gpt12: nanoGPT's depth)
    model = GPT(n=int(which[3:] or 2))
    data = lambda: torch.randint(0, 128, (4, 16))
    loss_of = lambda out, x: F.cross_entropy(out.view(-1, 128), x.view(-1))
elif which == "mlp":
    layers = []
    for _ in range(24):
        layers += [nn.Linear(32, 32), nn.LayerNorm(32), nn.ReLU()]
    model = nn.Sequential(*layers)
    data = lambda: torch.randn(8, 32)
    loss_of = lambda out, x: (out * out).mean()
else:
    import torchvision
    model = torchvision.models.resnet18(num_classes=10)
    data = lambda: torch.randn(2, 3, 32, 32)
    loss_of = lambda out, x: out.square().mean()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for s in range(steps):
    x = data()
    loss = loss_of(model(x), x)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def records_of(path):
    """Records and where the bytes are, read with h5py."""
    import h5py
    import numpy as np
    with h5py.File(path, "r") as f:
        names = set()
        if "records" in f:  # the compact layout
            names.update(range(f["records"].shape[0]))
        if "index" in f:
            names.update(r.decode() if isinstance(r, bytes) else r
                         for r in f["index"]["record"][()])
        parts = {}
        for k, o in f.items():
            if isinstance(o, h5py.Dataset):
                parts[k] = o.id.get_storage_size()
        return len(names), parts, int(f.attrs.get("format_version", 1))


def run(lib, model, mode, steps, work):
    out = os.path.join(work, "out")
    shutil.rmtree(out, ignore_errors=True)
    cfg = os.path.join(work, "msprobe.json")
    with open(cfg, "w") as f:
        json.dump({"dump": {"common_dump_settings": {
            "dump_mode": mode, "dump_path": out, "dump_iter": "all",
            "task": "statistics"}, "api_list": []}}, f)
    script = os.path.join(work, "models.py")
    with open(script, "w") as f:
        f.write(MODELS)
    env = dict(os.environ, LD_PRELOAD=os.path.realpath(lib), MSPROBE_PATH=cfg)
    p = subprocess.run([sys.executable, script, model, str(steps)], env=env, cwd=work,
                       capture_output=True, text=True)
    if p.returncode:
        sys.exit("stats_size.py: %s %s failed:\n%s" % (model, mode, p.stderr[-2000:]))
    size = recs = 0
    parts = {}
    version = 0
    for path in sorted(glob.glob(os.path.join(out, "step*", "rank*", "dump.h5"))):
        n, p_parts, version = records_of(path)
        recs += n
        size += os.path.getsize(path)
        for k, v in p_parts.items():
            parts[k] = parts.get(k, 0) + v
    return recs, size, parts, version


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", action="append", default=[],
                    help="NAME=PATH of a libmsprobe_preload.so (repeatable)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--models", default="gpt,gpt12,mlp,resnet18")
    ap.add_argument("--modes", default="api,module,mix")
    a = ap.parse_args()
    libs = [tuple(x.split("=", 1)) for x in a.lib] or [("this", DEFAULT_LIB)]
    work = tempfile.mkdtemp(prefix="msp-stats-size-")
    try:
        print("%-9s %-7s" % ("model", "mode") +
              "".join("%30s" % ("%s: recs bytes B/rec" % n) for n, _ in libs))
        for model in a.models.split(","):
            for mode in a.modes.split(","):
                line = "%-9s %-7s" % (model, mode)
                detail = []
                for name, lib in libs:
                    recs, size, parts, ver = run(lib, model, mode, a.steps, work)
                    line += "%30s" % ("v%d %6d %9d %6.0f" % (ver, recs, size,
                                                               size / max(recs, 1)))
                    detail.append("    %s: %s" % (name, ", ".join(
                        "/%s %d" % kv for kv in sorted(parts.items()))))
                print(line)
                for d in detail:
                    print(d)
                sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
