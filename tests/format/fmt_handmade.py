"""A dump written with h5py alone, following msprobe-dump(5): no /index,
some attributes left out, a big-endian float, a chunked+gzip dataset, a
bfloat16 dataset built from raw bits, bool both as h5py's enum and as uint8,
a statistics-only dataset. EXPECT describes what a reader must report."""
import os
import sys

import h5py
import numpy as np

# tests/lib is on PYTHONPATH under ctest; this keeps a run by hand working too
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
from msp_h5dump import bf16_type  # noqa: E402


def arrays():
    rng = np.random.default_rng(7)
    return {
        ("Functional.linear.0.forward", "input.0"): rng.standard_normal((3, 4)).astype(">f4"),
        ("Functional.linear.0.forward", "input.1"): rng.standard_normal(100).astype("<f4"),
        ("Functional.linear.0.forward", "kwarg.weight"):
            rng.integers(0x3000, 0x4400, (2, 5), dtype=np.uint16),  # bf16 bits
        ("Functional.linear.0.forward", "output.0"): rng.standard_normal(6).astype("<f2"),
        ("Torch.sum.0.forward", "input.0"): np.array([True, False, True, True]),
        ("Torch.sum.0.forward", "output.0"): np.array(42, dtype="<i8"),
        ("Tensor.mul.2.forward", "input.0"): np.array([[1, 0], [0, 1]], dtype=np.uint8),
        ("Tensor.mul.2.forward", "input.10"): np.arange(-3, 9, dtype=">i4"),
        ("Tensor.mul.2.forward", "input.2"): np.arange(5, dtype="<i2"),
    }


def write(path):
    a = arrays()
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "msprobe-dump"
        f.attrs["format_version"] = np.int64(1)
        f.attrs["framework"] = "pytorch"
        f.attrs["task"] = "tensor"
        f.attrs["step"] = np.int64(4)       # rank, world_size, dump_mode left out
        g = f.create_group("Functional.linear.0.forward")
        g.attrs["order"] = np.int64(0)
        d = g.create_dataset("input.0", data=a[(g.name[1:], "input.0")])  # big-endian
        d.attrs["dtype"] = "torch.float32"
        g.create_dataset("input.1", data=a[(g.name[1:], "input.1")], chunks=(10,),
                         compression="gzip")
        bits = a[(g.name[1:], "kwarg.weight")]
        sid = h5py.h5s.create_simple(bits.shape)
        did = h5py.h5d.create(g.id, b"kwarg.weight", bf16_type(), sid)
        did.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=bf16_type())
        g["kwarg.weight"].attrs["dtype"] = "torch.bfloat16"
        d = g.create_dataset("output.0", data=a[(g.name[1:], "output.0")])
        x = d[()].astype(np.float64)
        d.attrs.update(dict(dtype="torch.float16", max=x.max(), min=x.min(), mean=x.mean(),
                            norm=np.sqrt((x * x).sum()), nan_count=np.int64(0),
                            inf_count=np.int64(0), device="cuda:0",
                            requires_grad=np.bool_(True)))
        g.attrs["kwarg.bias"] = "None"
        g = f.create_group("Torch.sum.0.forward")  # no order: its place by name
        g.create_dataset("input.0", data=a[(g.name[1:], "input.0")])  # h5py bool enum
        g.create_dataset("output.0", data=a[(g.name[1:], "output.0")])  # 0-d
        d = g.create_dataset("output.1", data=h5py.Empty("<f4"))  # statistics only
        d.attrs.update(dict(dtype="torch.float32", shape=np.array([7, 3], np.int64),
                            max=1.5, min=-2.0, mean=0.25, norm=9.0))
        g = f.create_group("Tensor.mul.2.forward")
        g.attrs["order"] = np.int64(5)
        d = g.create_dataset("input.0", data=a[(g.name[1:], "input.0")])
        d.attrs["dtype"] = "torch.bool"  # bool stored as uint8 0/1
        g.create_dataset("input.10", data=a[(g.name[1:], "input.10")])  # big-endian int32
        g.create_dataset("input.2", data=a[(g.name[1:], "input.2")])
        g.attrs["kwarg.other"] = np.int64(3)


# record -> (order, [(role, dtype, shape, has_data, direct offset expected)]),
# in the order a reader lists them.
EXPECT = [
    ("Functional.linear.0.forward", 0, [
        ("input.0", "torch.float32", (3, 4), True, False),
        ("input.1", "torch.float32", (100,), True, False),
        ("kwarg.weight", "torch.bfloat16", (2, 5), True, True),
        ("output.0", "torch.float16", (6,), True, True),
    ]),
    # no order attribute: position among the records in name order
    # (Functional.linear < Tensor.mul < Torch.sum), so 2
    ("Torch.sum.0.forward", 2, [
        ("input.0", "torch.bool", (4,), True, True),
        ("output.0", "torch.int64", (), True, True),
        ("output.1", "torch.float32", (7, 3), False, False),
    ]),
    ("Tensor.mul.2.forward", 5, [
        ("input.0", "torch.bool", (2, 2), True, True),
        ("input.2", "torch.int16", (5,), True, True),
        ("input.10", "torch.int32", (12,), True, False),
    ]),
]


def native_bytes(record, role):
    """The native little-endian bytes msprobe must return for a tensor."""
    a = arrays()[(record, role)]
    if a.dtype.kind == "f":
        a = a.astype(a.dtype.newbyteorder("<"))
    elif a.dtype.kind in "iu":
        a = a.astype(a.dtype.newbyteorder("<"))
    elif a.dtype == np.bool_:
        a = a.astype(np.uint8)
    return a.tobytes()
