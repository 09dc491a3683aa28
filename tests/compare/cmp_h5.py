"""Helpers for the compare tests: write msprobe dump files with h5py alone
(tests/lib/msp_h5dump.py, independent of our writer), run the
cmp_dump_metrics driver, and reference metrics computed with numpy."""
import json
import os
import subprocess
import sys

import numpy as np

# tests/lib is on PYTHONPATH under ctest; this keeps a run by hand working too
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
import msp_h5dump  # noqa: E402
# the tensor kinds and statistics the tests use through this module
from msp_h5dump import BF16, Stats, Stored, as_f64, bf16_type, dtype_key, torch_stats  # noqa: E402,F401

DRIVER = os.environ.get("CMP_DUMP_METRICS")
if not DRIVER:
    DRIVER = os.path.join(os.environ.get("MSPROBE_BUILD_DIR", "build"),
                          "tests", "compare", "cmp_dump_metrics")


def write_dump(path, records, task="tensor", step=0, rank=0, with_stats=True, producers=None,
               index=False, stats_only=False):
    """records: list of (name, {role: tensor}) in execution order. with_stats=False
    leaves out the max/min/mean/norm/nan_count/inf_count/crc32 attributes;
    producers/index/stats_only: see msp_h5dump.write_dump."""
    ordered = [(name, order, tensors) for order, (name, tensors) in enumerate(records)]
    msp_h5dump.write_dump(path, ordered, task=task, step=step, rank=rank, dump_mode="mix",
                          with_stats=with_stats, producers=producers, index=index,
                          stats_only=stats_only)


def run_driver(bench, cmp, *args, expect_ok=True):
    p = subprocess.run([DRIVER, *map(str, args), str(bench), str(cmp)], capture_output=True,
                       text=True)
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    if expect_ok:
        if p.returncode != 0:
            raise AssertionError(f"driver failed ({p.returncode}): {p.stdout} {p.stderr}")
        return [x for x in lines if "summary" not in x], lines[-1], p.stderr
    return p.returncode, lines, p.stderr


def ref_metrics(n, b):
    """msprobe's metrics in float64 with numpy (NaN/Inf already equal-placed or absent).
    At bench zeros msprobe 26 adds numpy's eps of result_type(n, b, float32), integers
    having become float64: float32's eps for two 16/32-bit floats, else float64's."""
    small = ("float16", "bfloat16", "float32")
    eps_zero = (np.finfo(np.float32).eps if dtype_key(n) in small and dtype_key(b) in small
                else np.finfo(np.float64).eps)
    n = as_f64(n).ravel().copy()
    b = as_f64(b).ravel().copy()
    bad = ~np.isfinite(n) | ~np.isfinite(b)
    n[bad] = 0
    b[bad] = 0
    d = np.abs(n - b)
    nb, bb = n.copy(), b.copy()
    z = bb == 0
    nb[z] += eps_zero
    bb[z] += eps_zero
    rel = np.abs((nb - bb) / bb)
    nn, bn = np.linalg.norm(n), np.linalg.norm(b)
    eps = np.finfo(np.float64).eps
    if nn <= eps and bn <= eps:
        cos = 1.0
    elif nn <= eps or bn <= eps:
        cos = None
    else:
        cos = float(np.dot(n, b) / (nn * bn))
    return dict(cosine=cos, euc_dist=float(np.linalg.norm(n - b)), max_abs_err=float(d.max()),
                max_rel_err=float(rel.max()), one_thousandth_ratio=float((rel < 0.001).mean()),
                five_thousandths_ratio=float((rel < 0.005).mean()))


def allclose(n, b, rtol, atol):
    n, b = as_f64(n).ravel(), as_f64(b).ravel()
    fin = np.isfinite(n) & np.isfinite(b)
    if not np.array_equal(np.isnan(n), np.isnan(b)):
        return False
    inf = np.isinf(n) | np.isinf(b)
    if not np.array_equal(n[inf], b[inf]):
        return False
    return bool(np.all(np.abs(n[fin] - b[fin]) <= atol + rtol * np.abs(b[fin])))
