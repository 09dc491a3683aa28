#!/usr/bin/env python3
"""config_check pairing benchmark (not a test). Builds pairs of packs holding
N entries of one item each (env, pip, random, weights, hyperparameters), the
two sides differing in a handful of entries, and times
`msprobe config_check -c A B -o OUT --env-keys '*'` with the new build and,
side by side in the same run, with an older build (e.g. 4e9a63e, whose pairing
was quadratic). An old run past --old-timeout seconds is stopped and printed
as "> T s".

  bench/configcheck/pairing.py NEW_MSPROBE [OLD_MSPROBE] [--n 200000] [--items env,pip,...]
                                [--old-timeout 300] [--keep DIR]

Build the old binary with:
  git archive 4e9a63e | tar -x -C /tmp/old-cc && cmake -S /tmp/old-cc -B /tmp/old-cc/build \
      -DMSPROBE_BENCH=OFF && cmake --build /tmp/old-cc/build --target msprobe
Only the standard library is needed.
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
import zipfile

MANIFEST = {"format": "msprobe-config-check", "format_version": 1, "tool": "msprobe", "tool_version": "bench",
            "kind": "run", "host": "bench", "time": "2026-01-01T00:00:00Z", "rank": 0, "world_size": 1}


def members(item, n, side):
    """The member of `item` with n entries; side 1 differs in 5 entries."""
    def val(i):
        return "v%d" % i + ("x" if side and i % (n // 5 or 1) == 0 else "")
    if item == "env":
        return "env.json", {"salt": "default", "hashed_keys": [],
                            "vars": {"BENCH_VAR_%07d" % ((i * 7919) % n): val(i) for i in range(n)}}
    if item == "pip":
        return "pip.json", {"python": "3.11.2", "packages": [{"name": "pkg-%07d" % ((i * 7919) % n),
                                                              "version": "1.%s" % val(i)} for i in range(n)]}
    if item == "random":
        # n calls over n/4 call sites, four calls each (a seed per sample).
        return "random.json", {"calls": [{"api": "random.seed", "value": val(i), "file": "/w/data%d.py" % (i % 97),
                                          "line": (i // 4) % 100003, "order": i} for i in range(n)]}
    if item == "weights":
        return "weights.json", {"tensors": [{"name": "Net.layer%07d.weight" % ((i * 7919) % n), "shape": [4],
                                             "dtype": "torch.float32", "max": 1.0, "min": 0.0, "mean": 0.5,
                                             "norm": 1.0, "hash": "%064x" % (i + (1 if side and i % (n // 5 or 1) == 0
                                                                                   else 0))}
                                            for i in range(n)]}
    if item == "hyperparameters":
        # half on the command line, half as optimizer param_group values
        args = []
        for i in range(n // 2):
            args += ["--opt_%07d" % ((i * 7919) % n), val(i)]
        group = {"key_%07d" % ((i * 7919) % n): val(i) for i in range(n // 2, n)}
        return "hyperparameters.json", {"script": "train.py", "args": args,
                                        "optimizers": [{"class": "SGD", "param_groups": [group]}]}
    raise SystemExit("unknown item " + item)


def make(path, item, n, side):
    name, obj = members(item, n, side)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(MANIFEST))
        z.writestr(name, json.dumps(obj))


def timed(binary, a, b, out, timeout):
    t0 = time.perf_counter()
    try:
        r = subprocess.run([binary, "-q", "config_check", "-c", a, b, "-o", out, "--env-keys", "*"],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    dt = time.perf_counter() - t0
    if r.returncode not in (0, 1):
        return None, "exit %d: %s" % (r.returncode, r.stderr.strip()[:200])
    return dt, "exit %d" % r.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("new")
    ap.add_argument("old", nargs="?")
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--items", default="env,pip,random,weights,hyperparameters")
    ap.add_argument("--old-timeout", type=float, default=300)
    ap.add_argument("--keep")
    o = ap.parse_args()
    work = o.keep or tempfile.mkdtemp(prefix="msprobe-cc-bench.")
    os.makedirs(work, exist_ok=True)
    print("config_check pairing, %d entries per pack, one item per pack pair" % o.n)
    print("%-16s %12s %12s %10s" % ("item", "new s", "old s", "old/new"))
    try:
        for item in o.items.split(","):
            a, b = os.path.join(work, item + "_a.zip"), os.path.join(work, item + "_b.zip")
            make(a, item, o.n, 0)
            make(b, item, o.n, 1)
            tn, sn = timed(o.new, a, b, os.path.join(work, "out_new"), None)
            if tn is None:
                print("%-16s new failed: %s" % (item, sn))
                continue
            old_txt, ratio = "-", "-"
            if o.old:
                to, so = timed(o.old, a, b, os.path.join(work, "out_old"), o.old_timeout)
                if to is not None:
                    old_txt, ratio = "%.2f" % to, "%.1f" % (to / tn)
                elif so == "timeout":
                    old_txt, ratio = "> %.0f" % o.old_timeout, "> %.0f" % (o.old_timeout / tn)
                else:
                    old_txt = so
            print("%-16s %12.2f %12s %10s" % (item, tn, old_txt, ratio), flush=True)
    finally:
        if not o.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
