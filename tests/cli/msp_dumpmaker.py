"""The dumps the CLI and report tests compare, written with h5py alone by
tests/lib/msp_h5dump.py (no /index table: the reader must then walk the
groups, which is the documented path for hand-made files): a small forward
chain that agrees on both sides, and the same chain with an error planted in
one op. Values come from closed formulas (no RNG) so expected files stay valid
across numpy versions.
"""
import os
import sys

import numpy as np

# tests/lib is on PYTHONPATH under ctest; this keeps a run by hand working too
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
import msp_h5dump  # noqa: E402


def stats(a):
    """max, min, mean, l2 norm as torch computes them (NaN poisons), in float64."""
    st = msp_h5dump.torch_stats(a)
    return st["max"], st["min"], st["mean"], st["norm"]


def write_dump(path, records, step=0, rank=0, task="tensor", world_size=1):
    """records: list of (name, order, {role: ndarray}) in any order. A
    statistics dump keeps each tensor's statistics but not its data."""
    msp_h5dump.write_dump(path, records, task=task, step=step, rank=rank,
                          world_size=world_size, dump_mode="api",
                          stats_only=task == "statistics")


# ---- the chains ---------------------------------------------------------

RELU_ROOT = "Functional.relu.0.forward"
RELU_RENAMED = "Functional.relu_renamed.0.forward"   # for --mapping tests


def chain(planted):
    """A forward chain of five ops plus one backward record, float32.

    planted=False: the bench side. planted=True: the compare side, where
      * Functional.relu.0.forward adds +2 to output.0[0, :3]   -> introduced (root cause)
      * Tensor.mul.0.forward consumes it                        -> inherited
      * Tensor.add.0.forward has an input off by 1e-4 and an output
        off by 1e-2 (100x amplified, verdict still Yes)         -> inherited, yellow
      * Functional.softmax.0.forward has NaN in the same place on
        both sides                                              -> agrees, red (NaN)
    """
    i = np.arange(32, dtype=np.float64).reshape(4, 8)
    x = np.sin(i * 0.7).astype(np.float32)
    w = np.cos(np.arange(64, dtype=np.float64).reshape(8, 8) * 0.3).astype(np.float32) * 0.5
    bias = np.linspace(-0.2, 0.3, 8).astype(np.float32)
    y0 = (x @ w.T + bias).astype(np.float32)
    r = np.maximum(y0, 0).astype(np.float32)
    r_c = r.copy()
    if planted:
        r_c[0, :3] += 2.0
    half = np.full((4, 8), 0.5, dtype=np.float32)
    m = (r_c * half).astype(np.float32)
    z = (1.0 + 0.1 * np.cos(i)).astype(np.float32)
    z_c = (z + np.float32(1e-4)).astype(np.float32) if planted else z
    s = (z * 2.0).astype(np.float32)
    s_c = (s + np.float32(1e-2)).astype(np.float32) if planted else s
    sm = (np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)).astype(np.float32)
    sm[1, 2] = np.nan
    g = (0.01 * np.cos(i)).astype(np.float32)
    return [
        ("Functional.linear.0.forward", 0, {"input.0": x, "input.1": w, "input.2": bias,
                                            "output.0": y0}),
        (RELU_ROOT, 1, {"input.0": y0, "output.0": r_c}),
        ("Tensor.mul.0.forward", 2, {"input.0": r_c, "input.1": half, "output.0": m}),
        ("Tensor.add.0.forward", 3, {"input.0": z_c, "input.1": z_c, "output.0": s_c}),
        ("Functional.softmax.0.forward", 4, {"input.0": x, "output.0": sm}),
        ("Functional.relu.0.backward", 5, {"input.0": g, "output.0": g}),
    ]


def make_pair(root, planted, task="tensor"):
    """root/bench/dump.h5 and root/cmp/dump.h5; returns the two paths."""
    b = os.path.join(root, "bench", "dump.h5")
    c = os.path.join(root, "cmp", "dump.h5")
    write_dump(b, chain(False), task=task)
    write_dump(c, chain(planted), task=task)
    return b, c
