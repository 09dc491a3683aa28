#!/usr/bin/python3
"""A small seeded conv/linear training run for the config_check tests.

It knows nothing about msprobe. Knobs come from the environment so that two
runs can differ in exactly one thing without changing argv (argv is itself
part of the hyperparameters item):

  CCT_PY_SEED     value given to random.seed (default 7)
  CCT_PERTURB     "1": add 1e-3 to fc2.bias[0] before the first forward
  CCT_STEPS       optimizer steps (default 3)
  CCT_SAVE        save the initial parameters and the inputs of the first
                  forwards to this .npz (what the tests check the pack against)
  CCT_HARD_EXIT   "1": die by SIGKILL, as in a crash: no exit handler runs
                  (os._exit is no crash: the shim writes the pack then)
"""
import os
import signal
import random
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc1 = nn.Linear(4 * 8 * 8, 16)
        self.fc2 = nn.Linear(16, 5)

    def forward(self, x):
        x = F.relu(self.conv(x))
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


def main():
    random.seed(int(os.environ.get("CCT_PY_SEED", "7")))
    np.random.seed(np.int64(3))  # recorded as "3", like a Python int
    torch.manual_seed(0)
    torch.cuda.manual_seed_all(11)  # queued on a CPU-only torch; still a seed call
    model = Net()
    if os.environ.get("CCT_PERTURB") == "1":
        with torch.no_grad():
            model.fc2.bias[0] += 1e-3
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()  # a root module without parameters
    gen = torch.Generator().manual_seed(1)
    steps = int(os.environ.get("CCT_STEPS", "3"))
    saved = {}
    if os.environ.get("CCT_SAVE"):
        for name, p in model.named_parameters():
            saved["param/" + name] = p.detach().numpy().copy()
    for step in range(steps):
        x = torch.randn(4, 3, 8, 8, generator=gen)
        y = torch.randint(0, 5, (4,), generator=gen)
        if os.environ.get("CCT_SAVE"):
            saved["input/%d" % step] = x.numpy().copy()
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        print("step %d loss %s" % (step, float(loss.item()).hex()))  # exact, for bit-identity checks
    if os.environ.get("CCT_SAVE"):
        np.savez(os.environ["CCT_SAVE"], **saved)
    if os.environ.get("CCT_HARD_EXIT") == "1":
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
