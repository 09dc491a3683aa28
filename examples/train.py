#!/usr/bin/python3
"""A small conv/linear classifier trained on synthetic, seeded data (CPU).

This is the script msprobe's examples, man pages and tests run, unchanged,
under the dump shim:

    msprobe dump -- python3 examples/train.py --steps 4

It knows nothing about msprobe. With --record DIR it also saves, through a
path that does not involve the shim, what the tests need to check a dump:
module outputs and output gradients (captured by hooks this script registers
itself), layer parameters and their gradients, the input batch and the loss
of every step, into DIR/record.npz. Recording uses only calls the shim does
not dump (detach, numpy, tolist, register_hook), so a dump taken with
--record names the same records as one taken without.
"""
import argparse
import ctypes
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, width=8, image=16, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(width, 2 * width, 3, padding=1, stride=2)
        self.relu2 = nn.ReLU()
        self.fc1 = nn.Linear(2 * width * (image // 2) ** 2, 64)
        self.relu3 = nn.ReLU()
        self.fc2 = nn.Linear(64, classes)

    def forward(self, x):
        x = self.relu1(self.conv1(x))
        x = self.relu2(self.conv2(x))
        x = torch.flatten(x, 1)
        x = self.relu3(self.fc1(x))
        return self.fc2(x)


def as_numpy(t):
    """Exact copy of a tensor's values, without a call the shim records.
    bfloat16 has no numpy type: its values go through Python floats (exact)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return np.array(t.tolist(), dtype=np.float64)
    return t.numpy().copy()


class Recorder:
    LAYERS = ("conv1", "relu1", "conv2", "relu2", "fc1", "relu3", "fc2")

    def __init__(self, model):
        self.arrays = {}
        self.step = 0
        for name in self.LAYERS:
            getattr(model, name).register_forward_hook(self._forward_hook(name))
        self.model = model

    def _forward_hook(self, name):
        def hook(module, inputs, output):
            key = "step%d/%s" % (self.step, name)
            self.arrays[key + ".out"] = as_numpy(output)
            for pname, p in module.named_parameters(recurse=False):
                self.arrays["%s.%s" % (key, pname)] = as_numpy(p)
            if output.requires_grad:
                def grad_hook(g):
                    self.arrays[key + ".grad_out"] = as_numpy(g)
                output.register_hook(grad_hook)
        return hook

    def after_backward(self):
        for name in self.LAYERS:
            for pname, p in getattr(self.model, name).named_parameters(recurse=False):
                if p.grad is not None:
                    self.arrays["step%d/%s.%s.grad" % (self.step, name, pname)] = as_numpy(p.grad)

    def save(self, directory, losses):
        os.makedirs(directory, exist_ok=True)
        self.arrays["losses"] = np.array(losses, dtype=np.float64)
        np.savez(os.path.join(directory, "record.npz"), **self.arrays)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=4, help="optimizer steps (default 4)")
    ap.add_argument("--batch", type=int, default=16, help="batch size (default 16)")
    ap.add_argument("--width", type=int, default=8, help="channels of the first conv (default 8)")
    ap.add_argument("--image", type=int, default=16, help="image side in pixels (default 16)")
    ap.add_argument("--bf16", action="store_true",
                    help="run forward and loss under torch.autocast('cpu', torch.bfloat16)")
    ap.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    ap.add_argument("--spawn-workers", action="store_true",
                    help="start DataLoader workers with spawn instead of fork")
    ap.add_argument("--manual-step", action="store_true",
                    help="also call the shim's exported msprobe_step() after each step")
    ap.add_argument("--record", metavar="DIR", help="save reference values to DIR/record.npz")
    ap.add_argument("--print-losses", action="store_true", help="print each loss as float.hex")
    args = ap.parse_args(argv)

    torch.manual_seed(0)
    model = Net(args.width, args.image)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    gen = torch.Generator().manual_seed(1)
    n = args.steps * args.batch
    xs = torch.randn(n, 3, args.image, args.image, generator=gen)
    ys = torch.randint(0, 10, (n,), generator=gen)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs, ys),
                                         batch_size=args.batch, shuffle=False,
                                         num_workers=args.workers,
                                         multiprocessing_context="spawn" if args.spawn_workers
                                         and args.workers else None)
    recorder = Recorder(model) if args.record else None
    losses = []
    step_fn = ctypes.CDLL(None).msprobe_step if args.manual_step else None

    for step, (x, y) in enumerate(loader):
        if recorder:
            recorder.step = step
            recorder.arrays["step%d/input" % step] = as_numpy(x)
        opt.zero_grad(set_to_none=True)
        if args.bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = model(x)
                loss = F.cross_entropy(logits, y)
        else:
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        if recorder:
            recorder.arrays["step%d/loss" % step] = as_numpy(loss)
        loss.backward()
        if recorder:
            recorder.after_backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if args.print_losses:
            print("step %d loss %s" % (step, float(losses[-1]).hex()))
        if step_fn:
            step_fn()
    if recorder:
        recorder.save(args.record, losses)
    return 0


if __name__ == "__main__":
    sys.exit(main())
