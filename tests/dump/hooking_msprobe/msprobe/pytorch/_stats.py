"""What msprobe's data processor does with each tensor it sees: statistics
through torch's own (wrapped) APIs and a copy, inside this package."""
import torch

_on = [False]
_busy = [False]
_data = {}


def collecting():
    return _on[0] and not _busy[0]


def start():
    _on[0] = True


def stop():
    _on[0] = False


def take():
    out = dict(_data)
    _data.clear()
    return out


def _tensor_stats(t):
    data = t.detach()
    if not data.is_floating_point() or not data.numel():
        return None
    copy = data.clone()
    return [float(torch.max(copy)), float(torch.min(copy)), float(torch.mean(copy)),
            float(torch.norm(copy))]


def collect(name, out):
    _busy[0] = True  # msprobe's own calls are not its records either
    try:
        outs = out if isinstance(out, (tuple, list)) else (out,)
        key = "%s.%d" % (name, len(_data))
        _data[key] = [_tensor_stats(t) for t in outs if isinstance(t, torch.Tensor)]
    finally:
        _busy[0] = False


def module_hook(module, args, out):
    if collecting():
        collect("Module." + type(module).__name__, out)
