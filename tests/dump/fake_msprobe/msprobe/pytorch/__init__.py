"""A no-op PrecisionDebugger and msprobe's seed_all seeds (random,
PYTHONHASHSEED, numpy, torch, deterministic algorithms), so a script run
with it computes what the same script computes under msprobe."""
import os
import random


class PrecisionDebugger:
    def __init__(self, config_path=None, task=None, dump_path=None, level=None, model=None,
                 step=None):
        pass

    def start(self, model=None):
        pass

    def stop(self):
        pass

    def step(self):
        pass

    def forward_backward_dump_end(self):
        pass


def seed_all(seed=1234, mode=False, rm_dropout=False):
    import numpy
    import torch
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(mode)
