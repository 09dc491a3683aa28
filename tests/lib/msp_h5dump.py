"""Write msprobe dump files with h5py alone, following msprobe-dump(5) and the
header comment of include/msprobe/format.h. The compare and CLI tests feed
msprobe files from here so that what they check does not pass through our own
C writer: keep this module free of any msprobe code.

Tensors given to write_dump may be
  * a numpy array (bool is stored as uint8 0/1, as torch's bool is);
  * BF16(values): bfloat16, stored with the 2-byte HDF5 float type bf16_type();
  * Stored(array, gzip=, big_endian=): data that has no plain file offset;
  * Stats(dtype, shape, max, min, mean, norm): a statistics-only dataset.
Statistics are computed here with numpy, as torch computes them (NaN poisons).
"""
import os
import zlib

import h5py
import numpy as np

TORCH_NAME = {"float32": "torch.float32", "float16": "torch.float16", "bfloat16": "torch.bfloat16",
              "float64": "torch.float64", "int32": "torch.int32", "int64": "torch.int64",
              "int8": "torch.int8", "uint8": "torch.uint8", "bool": "torch.bool",
              "int16": "torch.int16"}


def bf16_type():
    """bfloat16 as HDF5 sees it: float32 with the low 16 mantissa bits dropped."""
    tid = h5py.h5t.IEEE_F32LE.copy()
    tid.set_fields(15, 7, 8, 0, 7)
    tid.set_size(2)
    tid.set_precision(16)
    tid.set_ebias(127)
    return tid


class BF16:
    """A bfloat16 tensor: bits (uint16 array) plus its exact float64 values."""

    def __init__(self, values):
        f = np.array(values, dtype=np.float32, order="C")  # keeps 0-d arrays 0-d
        u = f.view(np.uint32).astype(np.uint64)
        # round to nearest even on the 16 dropped bits; NaN stays NaN
        rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
        nan = np.isnan(f)
        rounded[nan] = 0x7FC0
        self.bits = rounded.reshape(f.shape)
        self.shape = f.shape

    def values(self):
        return (self.bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


class Stats:
    """A statistics-only tensor (null dataspace)."""

    def __init__(self, dtype, shape, mx, mn, mean, norm):
        self.dtype, self.shape = dtype, tuple(shape)
        self.stats = dict(max=mx, min=mn, mean=mean, norm=norm, nan=0, inf=0)


class Stored:
    """A tensor stored so that it has no plain file offset: chunked+gzip, or
    big-endian, so the reader must go through H5Dread."""

    def __init__(self, array, gzip=False, big_endian=False):
        self.array, self.gzip, self.big_endian = np.asarray(array), gzip, big_endian


def as_f64(t):
    """Exact float64 values of a test tensor (ndarray, Stored or BF16)."""
    if isinstance(t, BF16):
        return t.values()
    if isinstance(t, Stored):
        return t.array.astype(np.float64)
    return np.asarray(t).astype(np.float64)


def dtype_key(t):
    if isinstance(t, BF16):
        return "bfloat16"
    if isinstance(t, Stored):
        return t.array.dtype.name
    return np.asarray(t).dtype.name


def torch_stats(t):
    """max, min, mean, l2 norm, NaN and Inf counts in float64, as torch computes them."""
    v = as_f64(t).ravel()
    if v.size == 0:
        return dict(max=np.nan, min=np.nan, mean=np.nan, norm=0.0, nan=0, inf=0)
    with np.errstate(all="ignore"):
        return dict(max=float(np.max(v)), min=float(np.min(v)), mean=float(np.mean(v)),
                    norm=float(np.sqrt(np.sum(v * v))), nan=int(np.isnan(v).sum()),
                    inf=int(np.isinf(v).sum()))


def write_tensor_attrs(ds, dtype_name, shape, st, raw, with_stats=True):
    """The per-tensor attributes of msprobe-dump(5); st as torch_stats returns it,
    raw the bytes crc32 covers. with_stats=False writes dtype and shape only."""
    ds.attrs["dtype"] = TORCH_NAME.get(dtype_name, dtype_name)
    ds.attrs["shape"] = np.array(shape, dtype=np.int64)
    if not with_stats:
        return
    for k in ("max", "min", "mean", "norm"):
        ds.attrs[k] = np.float64(st[k])
    ds.attrs["nan_count"] = np.int64(st["nan"])
    ds.attrs["inf_count"] = np.int64(st["inf"])
    ds.attrs["crc32"] = np.uint32(zlib.crc32(raw))
    ds.attrs["device"] = "cpu"
    ds.attrs["requires_grad"] = np.int8(0)


def write_tensor(g, role, t, with_stats=True, stats_only=False):
    """One tensor dataset in group g. stats_only=True writes an array's dataset
    with a null dataspace (a statistics dump) but its statistics and crc32 from
    the array."""
    if isinstance(t, Stored):
        a = t.array
        data = a.astype(a.dtype.newbyteorder(">")) if t.big_endian else a
        ds = g.create_dataset(role, data=data, compression="gzip" if t.gzip else None,
                              chunks=(max(1, a.size // 3),) if t.gzip else None)
        dt_name, shape, st, raw = a.dtype.name, a.shape, torch_stats(a), a.tobytes()
    elif isinstance(t, Stats):
        short = t.dtype.replace("torch.", "")
        tid = bf16_type() if short == "bfloat16" else h5py.h5t.py_create(np.dtype(short))
        h5py.h5d.create(g.id, role.encode(), tid, h5py.h5s.create(h5py.h5s.NULL))
        ds = g[role]
        dt_name, shape, st = t.dtype, t.shape, t.stats
        raw = b""
    elif isinstance(t, BF16):
        tid = bf16_type()
        space = h5py.h5s.create_simple(t.shape) if t.shape else h5py.h5s.create(h5py.h5s.SCALAR)
        did = h5py.h5d.create(g.id, role.encode(), tid, space)
        did.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array(t.bits, order="C"), mtype=tid)
        ds = g[role]
        dt_name, shape, st = "bfloat16", t.shape, torch_stats(t)
        raw = t.bits.tobytes()
    else:
        a = np.array(t, order="C")  # ascontiguousarray would turn 0-d into 1-d
        if stats_only:
            ds = g.create_dataset(role, data=h5py.Empty(a.dtype))
        elif a.dtype == np.bool_:
            ds = g.create_dataset(role, data=a.view(np.uint8))
        else:
            ds = g.create_dataset(role, data=a)
        dt_name, shape, st = a.dtype.name, a.shape, torch_stats(a)
        raw = a.tobytes()
    write_tensor_attrs(ds, dt_name, shape, st, raw, with_stats)


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def _attrs_table(f):
    return (int(f.attrs.get("format_version", 1)) >= 2 and "attrs" in f
            and isinstance(f["attrs"], h5py.Dataset))


def is_compact(f):
    """Whether an open dump file is in the compact layout of statistics dumps
    (msprobe-dump(5), STATISTICS DUMPS: format_version 3 with /records)."""
    return int(f.attrs.get("format_version", 1)) >= 3 and "records" in f


def strings(f):
    """A compact file's /strings: every string of the file by its number,
    each NUL-ended in one byte array."""
    return [s.decode() for s in f["strings"][()].tobytes().split(b"\0")[:-1]]


def stats_rows(f):
    """One dict a tensor row (record, role, order, dtype, shape, max, min,
    mean, norm, nan_count, inf_count, crc32, device, requires_grad, producer)
    of an open dump file, read as msprobe-dump(5) says: /index (and in a
    compact file /stats, its numbers looked up in /strings, /records and /values), in
    file order, the statistics of a /stats row from its /values row; a record
    without tensors is one row with role ""."""
    out = []
    if "index" in f and isinstance(f["index"], h5py.Dataset):
        for r in f["index"][()]:
            out.append(dict(record=_text(r["record"]), role=_text(r["role"]),
                            order=int(r["order"]), dtype=_text(r["dtype"]),
                            shape=tuple(int(x) for x in r["shape"]), max=float(r["max"]),
                            min=float(r["min"]), mean=float(r["mean"]), norm=float(r["norm"]),
                            nan_count=int(r["nan_count"]), inf_count=int(r["inf_count"]),
                            crc32=int(r["crc32"]), device=_text(r["device"]),
                            requires_grad=bool(r["requires_grad"]),
                            producer=_text(r["producer"]) if "producer" in r.dtype.names
                            else ""))
    if not is_compact(f):
        return out
    s = strings(f)
    order = {s[r["name"]]: int(r["order"]) for r in f["records"][()]}
    seen = {r["record"] for r in out}
    rows = f["stats"][()]
    values = f["values"][()]
    for r in rows:
        v = values[r["values"]]
        out.append(dict(record=s[r["record"]], role=s[r["role"]], order=order[s[r["record"]]],
                        dtype=s[r["dtype"]], shape=tuple(int(x) for x in r["shape"][:r["ndim"]]),
                        max=float(v["max"]), min=float(v["min"]), mean=float(v["mean"]),
                        norm=float(v["norm"]), nan_count=int(v["nan_count"]),
                        inf_count=int(v["inf_count"]), crc32=int(v["crc32"]),
                        device=s[r["device"]], requires_grad=bool(r["requires_grad"]),
                        producer=s[r["producer"]]))
    seen.update(s[r["record"]] for r in rows)
    for name, o in order.items():
        if name not in seen:
            out.append(dict(record=name, role="", order=o))
    return out


def record_attrs(f):
    """{record: {key: value}} of an open dump file, read as msprobe-dump(5)
    says: the rows of /attrs (format_version 2; in the compact layout of
    version 3 their numbers looked up in /strings), else the attributes of
    each record group (version 1); "order" left out."""
    out = {}
    if is_compact(f):
        s = strings(f)
        for row in f["attrs"][()]:
            out.setdefault(s[row["record"]], {})[s[row["key"]]] = s[row["value"]]
        return out
    if _attrs_table(f):
        for row in f["attrs"][()]:
            out.setdefault(_text(row["record"]), {})[_text(row["key"])] = _text(row["value"])
        return out
    for name, g in f.items():
        if isinstance(g, h5py.Group):
            a = {k: _text(v) for k, v in g.attrs.items() if k != "order"}
            if a:
                out[name] = a
    return out


def write_index(f, producers):
    """/index as msprobe-dump(5) describes it, one row per tensor dataset, with
    the 'producer' column ("" when unknown). Data offsets come from h5py."""
    vstr = h5py.string_dtype("utf-8")
    dt = np.dtype([("record", vstr), ("role", vstr), ("order", "<i8"), ("dtype", vstr),
                   ("ndim", "<i4"), ("shape", h5py.vlen_dtype(np.dtype("<i8"))),
                   ("has_data", "?"), ("max", "<f8"), ("min", "<f8"), ("mean", "<f8"),
                   ("norm", "<f8"), ("nan_count", "<i8"), ("inf_count", "<i8"),
                   ("crc32", "<u4"), ("offset", "<i8"), ("nbytes", "<i8"), ("device", vstr),
                   ("requires_grad", "?"), ("producer", vstr)])
    rows = []
    for name, g in f.items():
        if not isinstance(g, h5py.Group):
            continue
        for role, ds in g.items():
            a = ds.attrs
            shape = np.array(a["shape"], dtype=np.int64)
            has = ds.shape is not None
            off = ds.id.get_offset() if has else None
            rows.append((name, role, int(g.attrs["order"]), str(a["dtype"]), len(shape), shape,
                         bool(has), float(a["max"]), float(a["min"]), float(a["mean"]),
                         float(a["norm"]), int(a["nan_count"]), int(a["inf_count"]),
                         int(a["crc32"]), -1 if off is None else int(off),
                         int(ds.id.get_storage_size()) if has else 0, str(a["device"]),
                         bool(a["requires_grad"]), producers.get((name, role), "")))
    arr = np.empty(len(rows), dtype=dt)
    for i, r in enumerate(rows):
        arr[i] = r
    f.create_dataset("index", data=arr)


def write_dump(path, records, task="tensor", step=0, rank=0, world_size=1, dump_mode="mix",
               with_stats=True, stats_only=False, producers=None, index=False, userblock=b""):
    """records: list of (name, order, {role: tensor}), written in list order.
    with_stats=False leaves out the max/min/mean/norm/nan_count/inf_count/crc32
    attributes; stats_only: see write_tensor. producers: {(record, role):
    "RECORD/ROLE"} written as the tensor's 'producer' attribute, or, with
    index=True, only as the /index column (the reader takes /index first).
    userblock: bytes put in an HDF5 user block (h5py's userblock_size, the
    next power of two from 512 that holds them) at the start of the file;
    every HDF5 address then counts from its end."""
    producers = producers or {}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    ub = 0
    if userblock:
        ub = 512
        while ub < len(userblock):
            ub *= 2
    with h5py.File(path, "w", **({"userblock_size": ub} if ub else {})) as f:
        f.attrs["format"] = "msprobe-dump"
        f.attrs["format_version"] = np.int64(1)
        f.attrs["framework"] = "pytorch"
        f.attrs["framework_version"] = "1.13.1"
        f.attrs["task"] = task
        f.attrs["dump_mode"] = dump_mode
        f.attrs["step"] = np.int64(step)
        f.attrs["rank"] = np.int64(rank)
        f.attrs["world_size"] = np.int64(world_size)
        for name, order, tensors in records:
            g = f.create_group(name)
            g.attrs["order"] = np.int64(order)
            for role, t in tensors.items():
                write_tensor(g, role, t, with_stats, stats_only)
                if (name, role) in producers and not index:
                    g[role].attrs["producer"] = producers[(name, role)]
        if index:
            write_index(f, producers)
    if ub:
        with open(path, "r+b") as fh:
            fh.write(userblock)
