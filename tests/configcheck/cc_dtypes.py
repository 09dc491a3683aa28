#!/usr/bin/python3
"""One root-module forward whose inputs span the dtypes and shapes the
config_check collector reads: half, bfloat16, integers, bool, a transposed
(non-contiguous) tensor, a nested dict, and plain values. Saves the raw
bytes and the values of each input to the .npz named by CCT_SAVE."""
import os
import sys

import numpy as np
import torch
import torch.nn as nn


class Sink(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))  # roots without parameters are not recorded

    def forward(self, *args):
        return torch.zeros(1)


def main():
    g = torch.Generator().manual_seed(4)
    base = torch.randn(6, 5, generator=g)
    inputs = [
        base.half(),
        base.bfloat16(),
        torch.randint(-50, 50, (7,), generator=g),
        torch.randint(0, 2, (9,), generator=g).bool(),
        base.t(),                                  # non-contiguous view
        {"mask": torch.arange(4, dtype=torch.int32)},
        3,
        "text",
    ]
    saved = {}
    tensors = {"0": inputs[0], "1": inputs[1], "2": inputs[2], "3": inputs[3], "4": inputs[4],
               "5.mask": inputs[5]["mask"]}
    for k, t in tensors.items():
        c = t.contiguous()
        raw = c.view(torch.int16) if c.dtype == torch.bfloat16 else c
        saved["raw/" + k] = raw.numpy().copy()
        saved["val/" + k] = c.float().numpy().astype(np.float64) if c.dtype == torch.bfloat16 else \
            c.numpy().astype(np.float64)
    Sink()(*inputs)
    np.savez(os.environ["CCT_SAVE"], **saved)
    return 0


if __name__ == "__main__":
    sys.exit(main())
