"""numpy implementation of the compare metrics, timed over the same dump roots
as cmp_bench (bench/compare/run.sh). Reads tensor bytes with np.fromfile at the
dataset offsets (h5py for the catalogue), computes in float64 exactly the
columns msp_compare_run computes (cosine, euclidean distance, max abs/rel
error with msprobe's eps rule, the two error ratios, side max/min/mean/norm,
allclose). Prints "numpy seconds=.. bytes=.. gbps=..". A benchmark, not a test."""
import glob
import os
import sys
import time

import h5py
import numpy as np

EPS = np.finfo(np.float64).eps
TOL = {"torch.bfloat16": (1.6e-2, 1e-5), "torch.float16": (1e-3, 1e-5),
       "torch.float32": (1.3e-6, 1e-5), "torch.float64": (1e-7, 1e-7)}
NP = {"torch.float32": np.float32, "torch.float16": np.float16, "torch.float64": np.float64,
      "torch.bfloat16": np.uint16}


def load(path, ds):
    dt = ds.attrs["dtype"]
    if isinstance(dt, bytes):
        dt = dt.decode()
    n = int(np.prod(ds.shape)) if ds.shape else 1
    a = np.fromfile(path, dtype=NP[dt], count=n, offset=ds.id.get_offset())
    if dt == "torch.bfloat16":
        a = (a.astype(np.uint32) << 16).view(np.float32)
    return dt, a.astype(np.float64), a.nbytes if dt != "torch.bfloat16" else n * 2


def metrics(n, b, rtol, atol):
    bad = ~np.isfinite(n) | ~np.isfinite(b)
    if bad.any():
        n, b = n.copy(), b.copy()
        n[bad] = 0
        b[bad] = 0
    diff = n - b
    d = np.abs(diff)
    z = b == 0
    nb, bb = n + z * EPS, b + z * EPS
    rel = np.abs(nb - bb) / np.abs(bb)
    nn, bn = np.linalg.norm(n), np.linalg.norm(b)
    return dict(cos=np.dot(n, b) / (nn * bn), euc=np.linalg.norm(diff), mabs=d.max(),
                mrel=rel.max(), r1=(rel < 0.001).mean(), r5=(rel < 0.005).mean(),
                nmax=n.max(), nmin=n.min(), nmean=n.mean(), bmax=b.max(), bmin=b.min(),
                bmean=b.mean(), agree=bool(np.all(d <= atol + rtol * np.abs(b))))


def main():
    broot, croot = sys.argv[1], sys.argv[2]
    total = 0
    t0 = time.perf_counter()
    for bpath in sorted(glob.glob(os.path.join(broot, "step*", "rank*", "dump.h5"))):
        cpath = os.path.join(croot, os.path.relpath(bpath, broot))
        if not os.path.exists(cpath):
            continue
        with h5py.File(bpath, "r") as bf, h5py.File(cpath, "r") as cf:
            for rec in bf:
                if rec == "index" or rec not in cf:
                    continue
                for role in bf[rec]:
                    if role not in cf[rec]:
                        continue
                    bdt, b, bbytes = load(bpath, bf[rec][role])
                    cdt, n, cbytes = load(cpath, cf[rec][role])
                    rtol, atol = max(TOL[bdt], TOL[cdt])
                    metrics(n, b, rtol, atol)
                    total += bbytes + cbytes
    dt = time.perf_counter() - t0
    print(f"numpy seconds={dt:.4f} bytes={total} gbps={total / dt / 1e9:.3f}")


if __name__ == "__main__":
    main()
