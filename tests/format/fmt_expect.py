"""Expected contents of the sample dump written by fmt_write_sample.c,
recomputed independently with numpy from the same formula."""
import math
import zlib

import numpy as np

ROOT_ATTRS = {"format": "msprobe-dump", "format_version": 2, "framework": "pytorch",
              "framework_version": "1.13.1", "task": "tensor", "dump_mode": "mix",
              "step": 7, "rank": 3, "world_size": 8}

# (record, order, [(role, torch dtype, shape, salt, special)]) in writer order
RECORDS = [
    ("Functional.conv2d.0.forward", 0, [
        ("input.0", "torch.float32", (2, 3, 4, 5), 1, False),
        ("input.1", "torch.float16", (37,), 2, True),
        ("kwarg.weight", "torch.bfloat16", (4, 9), 3, True),
        ("output.0", "torch.float64", (3, 7), 4, False),
    ]),
    ("Torch.matmul.3.backward", 2, [
        ("input.0", "torch.int16", (5, 5), 5, False),
        ("input.1", "torch.int32", (17,), 6, False),
        ("input.2", "torch.int8", (300,), 7, False),
        ("output.0", "torch.int64", (2, 2, 2), 8, False),
        ("output.1", "torch.uint8", (256,), 9, False),
        ("output.10", "torch.bool", (3, 11), 10, False),
        ("output.2", "torch.bool", (), 11, False),
    ]),
    ("Tensor.__add__.1.forward", 1, [
        ("input.0", "torch.float32", (), 12, False),
        ("input.1", "torch.float32", (1,), 13, False),
        ("input.2", "torch.float32", (0, 3), 14, False),
        ("input.10", "torch.float16", (6,), 15, True),
    ]),
    ("Functional.linear.5.forward", 4, [
        ("input.0", "torch.float32", (3001,), 17, 1),   # +inf at 0, -inf at 5
        ("input.1", "torch.float32", (1003,), 18, 2),   # NaN at 777
        ("output.0", "torch.float32", (512, 1024), 16, False),  # 2 MiB: stats on a thread
    ]),
]
STATS_ONLY = ("Tensor.__add__.1.forward", "output.0", "torch.float32", (1000, 1000),
              dict(max=2.5, min=-1.25, mean=0.125, norm=1000.5, nan_count=3, inf_count=4,
                   crc32=0xDEADBEEF), "npu:0", True)
EMPTY_RECORD = ("Module.layer1.0.conv1.Conv2d.forward.0", 3)
RECORD_ATTRS = {"Tensor.__add__.1.forward": {"kwarg.alpha": "2", "input.3": "None"},
                "Module.layer1.0.conv1.Conv2d.forward.0": {"kwarg.note": "no tensors"}}

NATIVE = {"torch.float32": "<f4", "torch.float16": "<f2", "torch.bfloat16": "<u2",
          "torch.float64": "<f8", "torch.int8": "i1", "torch.int16": "<i2",
          "torch.int32": "<i4", "torch.int64": "<i8", "torch.uint8": "u1", "torch.bool": "u1"}


def device_of(salt):
    return "cpu" if salt % 2 else "cuda:1"


def requires_grad_of(salt):
    return salt % 3 == 0


def formula_u(n, salt):
    i = np.arange(n, dtype=np.uint64)
    return (((i + np.uint64(1)) * np.uint64(2654435761) + np.uint64(salt * 40503))
            & np.uint64(0xFFFFFF)).astype(np.int64)


def bf16_bits(x32):
    """Round float32 values to bfloat16 bits, nearest even; NaN -> 0x7fc0."""
    b = np.asarray(x32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + np.uint64(0x7FFF) + ((b >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16))
    r = r.astype(np.uint16)
    nan = np.isnan(np.asarray(x32, dtype=np.float32))
    r[nan] = np.uint16(0x7FC0) | (r[nan] & np.uint16(0x8000))
    return r


def bf16_value(bits):
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


H_SPECIAL = [math.inf, -math.inf, math.nan, 65504.0, 65520.0, 3.0 / 16777216.0]
B_SPECIAL = [math.nan, -math.inf, 1.00390625, 1.01171875, 3.4028234663852886e38]


def native(dtype, shape, salt, special):
    """The tensor's native bytes as a numpy array of NATIVE[dtype] (bf16 as
    uint16 bits)."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    u = formula_u(n, salt)
    v = (u.astype(np.float64) - 8388608.0) / 65536.0
    if dtype == "torch.float32":
        a = v.astype(np.float32)
        if special == 1:
            a[0], a[5] = np.inf, -np.inf
        elif special == 2:
            a[777] = np.nan
    elif dtype == "torch.float64":
        a = v / 3.0
    elif dtype == "torch.float16":
        a = (v / 4.0).astype(np.float16)
        if special:
            with np.errstate(over="ignore"):  # 65520 rounds to inf on purpose
                a[:len(H_SPECIAL)] = np.array(H_SPECIAL[:n], np.float64).astype(np.float16)
    elif dtype == "torch.bfloat16":
        a = bf16_bits(v.astype(np.float32))
        if special:
            a[:len(B_SPECIAL)] = bf16_bits(np.array(B_SPECIAL[:n], dtype=np.float32))
    elif dtype == "torch.int8":
        a = (u % 256 - 128).astype(np.int8)
    elif dtype == "torch.int16":
        a = (u % 65536 - 32768).astype(np.int16)
    elif dtype == "torch.int32":
        a = (u * 97 - (1 << 30)).astype(np.int32)
    elif dtype == "torch.int64":
        a = (u * 1000003 - (1 << 40)).astype(np.int64)
    elif dtype == "torch.uint8":
        a = (u % 256).astype(np.uint8)
    elif dtype == "torch.bool":
        a = ((u >> 3) & 1).astype(np.uint8)
    else:
        raise ValueError(dtype)
    return a.astype(NATIVE[dtype]).reshape(shape)


def values(dtype, arr):
    """float64 values of a native array."""
    if dtype == "torch.bfloat16":
        return bf16_value(arr.reshape(-1)).astype(np.float64).reshape(arr.shape)
    return arr.astype(np.float64)


def stats(dtype, arr):
    """Statistics with torch semantics: any NaN makes max/min/mean/norm NaN;
    empty: NaN, NaN, NaN, 0."""
    x = values(dtype, arr).reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        return _stats(x, arr)


def _stats(x, arr):
    nan = int(np.isnan(x).sum())
    inf = int(np.isinf(x).sum())
    if x.size == 0:
        mx = mn = mean = math.nan
        norm = 0.0
    elif nan:
        mx = mn = mean = norm = math.nan
    else:
        mx, mn, mean = float(x.max()), float(x.min()), float(x.mean())
        norm = float(np.sqrt(np.sum(x * x)))
    return dict(max=mx, min=mn, mean=mean, norm=norm, nan_count=nan, inf_count=inf,
                crc32=zlib.crc32(arr.tobytes()))


def close(a, b, rel=1e-12):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


def all_tensors():
    """Yield (record, order, role, dtype, shape, salt, native array)."""
    for rec, order, ts in RECORDS:
        for role, dtype, shape, salt, special in ts:
            yield rec, order, role, dtype, shape, salt, native(dtype, shape, salt, special)
