"""Runs Huawei msprobe's own monitor (TrainerMon) on this machine's torch 1.13,
to make fixtures/monitor/ (see its README): not used by the tests.

MSPROBE_REFERENCE_TREE names a directory holding msprobe's python/ tree (git
archive of its repository); what torch 1.13 on Python 3.11 lacks is stubbed
here, in memory, and nothing of msprobe is changed."""
import os
import sys
import types

sys.path.insert(0, os.path.join(os.environ.get("MSPROBE_REFERENCE_TREE", "/tmp/msmon"), "python"))
for _name in ("einops", "tqdm"):
    _m = types.ModuleType(_name)
    _m.rearrange = lambda *a, **k: None
    _m.tqdm = lambda x=None, *a, **k: x if x is not None else []
    sys.modules[_name] = _m
import concurrent.futures  # noqa: E402,F401  (msprobe's json_writer uses it unimported)
import torch  # noqa: E402

torch.Tensor.untyped_storage = torch.Tensor.storage
_fs = types.ModuleType("torch.distributed.fsdp")
_fs.FullyShardedDataParallel = type("FullyShardedDataParallel", (), {})
sys.modules["torch.distributed.fsdp"] = _fs
import torch.utils.checkpoint as _ck  # noqa: E402

_ck._StopRecomputationError = type("_StopRecomputationError", (Exception,), {})
import torch.optim.optimizer as _oo  # noqa: E402

_oo.register_optimizer_step_pre_hook = lambda h: None
_oo.register_optimizer_step_post_hook = lambda h: None
for _n in ("torch._dynamo", "torch._dynamo.convert_frame"):
    sys.modules[_n] = types.ModuleType(_n)
sys.modules["torch._dynamo.convert_frame"].convert_frame = lambda *a, **k: None
sys.modules["torch._dynamo.convert_frame"].Hooks = object
_tb = types.ModuleType("torch.utils.tensorboard")
_tb.SummaryWriter = type("SummaryWriter", (), {"__init__": lambda self, *a, **k: None})
sys.modules["torch.utils.tensorboard"] = _tb
_rfh = torch.nn.Module.register_forward_hook


def _register_forward_hook(self, hook, with_kwargs=False, **k):
    if with_kwargs:
        return _rfh(self, lambda m, a, o: hook(m, a, {}, o))
    return _rfh(self, hook)


torch.nn.Module.register_forward_hook = _register_forward_hook
_ng = torch.no_grad


def _no_grad(f=None):
    return _ng()(f) if callable(f) else _ng()


torch.no_grad = _no_grad
_v = torch.__version__
torch.__version__ = "2.0.1"
from msprobe.pytorch.monitor.module_hook import TrainerMon  # noqa: E402,F401

torch.__version__ = _v
