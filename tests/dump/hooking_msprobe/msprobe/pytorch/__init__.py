"""msprobe.pytorch's PrecisionDebugger and seed_all, hooking as msprobe 26
does (a stand-in: no data of its own is compared by the tests)."""
import json
import os
import random

import torch

from msprobe.pytorch import _stats

# (owner, attribute, name) of the APIs it wraps: ones the test script calls
# and ones its own statistics call.
_APIS = ([(torch.nn.functional, n, "Functional." + n)
          for n in ("conv2d", "batch_norm", "relu", "linear", "cross_entropy", "max_pool2d",
                    "adaptive_avg_pool2d")] +
         [(torch, n, "Torch." + n) for n in ("max", "min", "mean", "norm", "tanh", "mul",
                                            "flatten")] +
         [(torch.Tensor, n, "Tensor." + n) for n in ("clone", "add_", "__iadd__")])


class _Template:
    """msprobe's ApiTemplate: the call passes through its frames."""

    def __init__(self, name, api_func):
        self.name, self.api_func = name, api_func

    def __call__(self, *args, **kwargs):
        return self._call_func(*args, **kwargs)

    def _call_func(self, *args, **kwargs):
        out = self.forward(*args, **kwargs)
        if _stats.collecting():
            _stats.collect(self.name, out)
        return out

    def forward(self, *args, **kwargs):
        exec_func = self.api_func
        return exec_func(*args, **kwargs)


def _wrap(name, api_func):
    template = _Template(name, api_func)

    def api_function(*args, **kwargs):
        return template(*args, **kwargs)

    return api_function


class PrecisionDebugger:
    _instance = None

    def __new__(cls, *args, **kwargs):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __init__(self, config_path=None, task=None, dump_path=None, level=None, model=None,
                 step=None):
        if getattr(self, "_made", False):
            return
        self._made = True
        cfg = {}
        if config_path:
            with open(config_path) as f:
                cfg = json.load(f)
        self.dump_path = dump_path or cfg.get("dump_path", "./dump")
        self.step_no = 0
        self.model = model
        self.hooked = set()
        for owner, attr, name in _APIS:
            setattr(owner, attr, _wrap(name, getattr(owner, attr)))

    def start(self, model=None):
        model = model if model is not None else self.model
        for m in (model.modules() if model is not None else ()):
            if id(m) not in self.hooked:
                self.hooked.add(id(m))
                m.register_forward_hook(_stats.module_hook)
        _stats.start()

    def stop(self):
        _stats.stop()

    def forward_backward_dump_end(self):
        _stats.stop()

    def step(self):
        d = os.path.join(self.dump_path, "step%d" % self.step_no, "proc%d" % os.getpid())
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "dump.json"), "w") as f:
            json.dump({"task": "statistics", "level": "mix", "framework": "pytorch",
                       "dump_data_dir": None, "data": _stats.take()}, f)
        self.step_no += 1


def seed_all(seed=1234, mode=False, rm_dropout=False):
    import numpy
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(mode)
