"""Write a dump the way Huawei's Python msprobe lays it out (its published
pytorch_data_dump_instruct "dump.json Description"): stepN/rankN/dump.json,
stack.json, construct.json and dump_tensor_data/<record>.<input|output>.<i>.pt
(torch.save) or .npy (numpy.save). Statistics are computed here with torch in
float64; md5 is zlib's CRC-32 of the tensor bytes in 8 hex digits, as msprobe
writes it. Nothing here uses msprobe-c code."""
import json
import os
import zlib

import numpy as np


def _stats(t):
    import torch
    x = t.detach().to(torch.float64)
    return {"Max": x.max().item(), "Min": x.min().item(), "Mean": x.mean().item(),
            "Norm": x.norm().item()}


def _entry(t, data_name, summary_mode, save, tdir, fmt):
    import torch
    e = {"type": "torch.Tensor", "dtype": str(t.dtype), "shape": list(t.shape)}
    if summary_mode != "md5-only":
        e.update(_stats(t))
    e["requires_grad"] = bool(t.requires_grad)
    if summary_mode in ("md5", "md5-only"):
        raw = t.detach().contiguous().view(torch.uint8) if t.dtype == torch.bfloat16 else t.detach()
        e["md5"] = "%08x" % zlib.crc32(raw.contiguous().numpy().tobytes())
    if save:
        if fmt == "npy":
            name = data_name + ".npy"
            # numpy has no bfloat16: such a tensor goes out as float32 values
            a = t.detach().float().numpy() if t.dtype == torch.bfloat16 else t.detach().numpy()
            np.save(os.path.join(tdir, name), a)
        else:
            name = data_name + ".pt"
            torch.save(t.detach().clone(), os.path.join(tdir, name))
        e["data_name"] = name
    return e


def write(root, records, step=0, rank=0, task="tensor", level="mix", fmt="pt",
          summary_mode="statistics", stacks=None, construct=None):
    """records: list of (name, {"input_args": [tensor|scalar|list], "input_kwargs": {k: ...},
    "output": [...]}) in execution order (backward records: "input"/"output").
    Returns the rank directory."""
    rdir = os.path.join(root, "step%d" % step, "rank%d" % rank)
    tdir = os.path.join(rdir, "dump_tensor_data")
    save = task == "tensor"
    os.makedirs(tdir if save else rdir, exist_ok=True)
    import torch

    def conv(v, prefix):
        if isinstance(v, torch.Tensor):
            return _entry(v, prefix, summary_mode, save, tdir, fmt)
        if isinstance(v, (list, tuple)):
            return [conv(x, "%s.%d" % (prefix, i)) for i, x in enumerate(v)]
        if v is None:
            return None
        return {"type": type(v).__name__, "value": v}

    data = {}
    for name, parts in records:
        rec = {}
        for key, val in parts.items():
            io = "input" if key in ("input_args", "input") else "output"
            if key == "input_kwargs":
                rec[key] = {k: conv(v, "%s.%s.%s" % (name, "input", k)) for k, v in val.items()}
            else:
                rec[key] = [conv(v, "%s.%s.%d" % (name, io, i)) for i, v in enumerate(val)]
        data[name] = rec
    with open(os.path.join(rdir, "dump.json"), "w") as f:
        json.dump({"task": task, "level": {"api": "L1", "module": "L0"}.get(level, level),
                   "framework": "pytorch", "dump_data_dir": tdir if save else None,
                   "data": data}, f, indent=1)
    st = {}
    for i, (frames, names) in enumerate(stacks or []):
        st[str(i)] = [names, frames]
    with open(os.path.join(rdir, "stack.json"), "w") as f:
        json.dump(st, f, indent=1)
    with open(os.path.join(rdir, "construct.json"), "w") as f:
        json.dump(construct or {}, f, indent=1)
    return rdir
