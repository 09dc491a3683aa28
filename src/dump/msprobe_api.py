# msprobe's own script API (from msprobe.pytorch import PrecisionDebugger,
# seed_all) for scripts written against Huawei's msprobe, run under the shim
# while that package is absent: the modules "msprobe" and "msprobe.pytorch"
# come from a finder placed last on sys.meta_path, so a real msprobe found on
# sys.path is always imported instead. Compiled into libmsprobe_py.so
# (msp_embed) and run once at boot by py_debugger.c, which puts the C
# functions that drive the dump into this namespace as _shim_*:
#   _shim_configure(config_path, args_json, arg_keys)  the config; may raise
#   _shim_start(model), _shim_stop(), _shim_step()     recording and steps
#   _shim_quiet(fn)                                    fn() with nothing recorded
#   _shim_warn(text)                                   one "msprobe:" line
import sys


class PrecisionDebugger:
    """msprobe's PrecisionDebugger: drives the shim's dump (one per process)."""

    _instance = None

    def __new__(cls, *args, **kwargs):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __init__(self, config_path=None, task=None, dump_path=None, level=None, model=None,
                 step=None, **kwargs):
        if getattr(self, "_configured", False):
            return
        self._configured = True
        self.model = model
        for k in sorted(kwargs):
            _shim_warn("PrecisionDebugger(%s=...): not applicable to msprobe-c, ignored" % k)
        given = {k: v for k, v in (("task", task), ("dump_path", dump_path), ("level", level),
                                   ("step", step)) if v is not None}
        if isinstance(given.get("step"), (tuple, range)):
            given["step"] = list(given["step"])
        text = None
        if given:
            import json
            try:
                text = json.dumps(given)
            except (TypeError, ValueError) as e:
                raise ValueError("PrecisionDebugger(): %s" % e) from None
        _shim_configure(None if config_path is None else str(config_path), text,
                        ",".join(sorted(given)))

    def start(self, model=None, token_range=None):
        _shim_start(model if model is not None else self.model)

    def stop(self):
        _shim_stop()

    def forward_backward_dump_end(self):
        _shim_stop()

    def step(self):
        _shim_step()


def seed_all(seed=1234, mode=False, rm_dropout=False):
    """msprobe's seed_all: the same seeds and deterministic switches."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= 2**32 - 1:
        raise ValueError("seed_all(seed=%r): expected an integer in [0, 4294967295]" % (seed,))
    if not isinstance(mode, bool):
        raise ValueError("seed_all(mode=%r): expected True or False" % (mode,))
    if rm_dropout:
        _shim_warn("seed_all(rm_dropout=True): not supported by msprobe-c; dropout stays on")

    def run():
        import os
        import random
        random.seed(seed)
        os.environ["PYTHONHASHSEED"] = str(seed)
        try:
            import numpy
            numpy.random.seed(seed)
        except ImportError:
            pass
        import torch
        torch.manual_seed(seed)
        cuda = getattr(torch.version, "cuda", None)
        if cuda is not None:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        torch.use_deterministic_algorithms(mode)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
            torch.backends.cudnn.deterministic = True
            torch.backends.cudnn.enabled = False
            torch.backends.cudnn.benchmark = False

    _shim_quiet(run)


class _Loader:
    @staticmethod
    def create_module(spec):
        return None

    @staticmethod
    def exec_module(module):
        if module.__name__ == "msprobe.pytorch":
            module.PrecisionDebugger = PrecisionDebugger
            module.seed_all = seed_all


class _Finder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "msprobe.pytorch":
            parent = sys.modules.get("msprobe")
            spec = getattr(parent, "__spec__", None)
            if spec is None or not isinstance(spec.loader, _Loader):
                return None  # a real msprobe without its pytorch part: not ours to fill
        elif name != "msprobe":
            return None
        import importlib.machinery
        return importlib.machinery.ModuleSpec(name, _Loader(), origin="msprobe-c",
                                              is_package=True)

    @staticmethod
    def invalidate_caches():
        pass


sys.meta_path.append(_Finder)
