"""Write msprobe dump files with h5py alone, following msprobe-dump(5) and the
header comment of include/msprobe/format.h, so the compare tests do not depend
on our own writer. No /index table is written: the reader must then walk the
groups, which is the documented path for hand-made files.

Also the two chains the CLI and report tests compare: a small forward chain
that agrees on both sides, and the same chain with an error planted in one op.
Values come from closed formulas (no RNG) so expected files stay valid across
numpy versions.
"""
import os
import zlib

import h5py
import numpy as np

TORCH_DTYPE = {
    np.dtype("float32"): "torch.float32",
    np.dtype("float64"): "torch.float64",
    np.dtype("float16"): "torch.float16",
    np.dtype("int64"): "torch.int64",
    np.dtype("int32"): "torch.int32",
    np.dtype("bool"): "torch.bool",
}


def stats(a):
    """max, min, mean, l2 norm as torch computes them (NaN poisons), in float64."""
    d = np.asarray(a, dtype=np.float64).ravel()
    if d.size == 0:
        return float("nan"), float("nan"), float("nan"), 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        if np.isnan(d).any():
            return (float("nan"),) * 4
        return float(d.max()), float(d.min()), float(d.mean()), float(np.sqrt(np.sum(d * d)))


def _tensor_attrs(ds, arr, dtype_name):
    mx, mn, mean, norm = stats(arr)
    d = np.asarray(arr, dtype=np.float64)
    ds.attrs["dtype"] = dtype_name
    ds.attrs["shape"] = np.array(arr.shape, dtype=np.int64)
    ds.attrs["max"] = mx
    ds.attrs["min"] = mn
    ds.attrs["mean"] = mean
    ds.attrs["norm"] = norm
    ds.attrs["nan_count"] = np.int64(np.isnan(d).sum())
    ds.attrs["inf_count"] = np.int64(np.isinf(d).sum())
    ds.attrs["crc32"] = np.uint32(zlib.crc32(np.ascontiguousarray(arr).tobytes()))
    ds.attrs["device"] = "cpu"
    ds.attrs["requires_grad"] = np.int8(0)


def write_dump(path, records, step=0, rank=0, task="tensor", world_size=1):
    """records: list of (name, order, {role: ndarray}) in any order."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "msprobe-dump"
        f.attrs["format_version"] = np.int64(1)
        f.attrs["framework"] = "pytorch"
        f.attrs["framework_version"] = "1.13.1"
        f.attrs["task"] = task
        f.attrs["dump_mode"] = "api"
        f.attrs["step"] = np.int64(step)
        f.attrs["rank"] = np.int64(rank)
        f.attrs["world_size"] = np.int64(world_size)
        for name, order, tensors in records:
            g = f.create_group(name)
            g.attrs["order"] = np.int64(order)
            for role, arr in tensors.items():
                arr = np.ascontiguousarray(arr)
                if task == "statistics":
                    ds = g.create_dataset(role, data=h5py.Empty(arr.dtype))
                else:
                    ds = g.create_dataset(role, data=arr)
                _tensor_attrs(ds, arr, TORCH_DTYPE[arr.dtype])


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
