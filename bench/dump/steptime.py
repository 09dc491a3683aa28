#!/usr/bin/python3
"""Times the training steps of examples/train.py's network, or (--model
lstmcell) of a hand-written LSTM cell unrolled over --seq time steps: a loop
of many small ops, the worst case for a per-call overhead (not a test).

Prints one JSON line: median and mean step time in ms over the timed steps,
the median CPU time of a step (all threads of the process: on a loaded machine
it is steadier than the wall clock) and of the training thread alone (what the
shim costs the training thread itself, apart from its writer threads),
and the wall-clock time (time.time()) when the first timed step started, so
the caller can measure until the process (and the shim's writer) has finished.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
from train import Net  # noqa: E402


class LSTMCellLoop(torch.nn.Module):
    """An LSTM cell written out in small ops (linear, sigmoid, tanh, mul, add,
    chunk), unrolled over the sequence: about 12 API calls per time step."""

    def __init__(self, hidden, seq):
        super().__init__()
        self.ih = torch.nn.Linear(hidden, 4 * hidden)
        self.hh = torch.nn.Linear(hidden, 4 * hidden)
        self.out = torch.nn.Linear(hidden, 10)
        self.hidden = hidden

    def forward(self, xs):
        h = torch.zeros(xs.shape[1], self.hidden)
        c = torch.zeros(xs.shape[1], self.hidden)
        for x in xs:
            gates = F.linear(x, self.ih.weight, self.ih.bias) + F.linear(h, self.hh.weight, self.hh.bias)
            i, f, g, o = gates.chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return self.out(h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--image", type=int, default=32)
    ap.add_argument("--model", choices=["cnn", "lstmcell"], default="cnn")
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=64)
    a = ap.parse_args()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    if a.model == "cnn":
        model = Net(a.width, a.image)
        xs = torch.randn(a.batch, 3, a.image, a.image, generator=gen)
        ys = torch.randint(0, 10, (a.batch,), generator=gen)
    else:
        model = LSTMCellLoop(a.hidden, a.seq)
        xs = torch.randn(a.seq, 16, a.hidden, generator=gen)
        ys = torch.randint(0, 10, (16,), generator=gen)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    times, cpu, tcpu = [], [], []
    start = None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            start = time.time()
        t0 = time.perf_counter()
        c0 = time.process_time()
        tc0 = time.thread_time()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xs), ys)
        loss.backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            tcpu.append(time.thread_time() - tc0)
    print(json.dumps({"median_ms": 1e3 * statistics.median(times),
                      "cpu_ms": 1e3 * statistics.median(cpu),
                      "thread_cpu_ms": 1e3 * statistics.median(tcpu),
                      "mean_ms": 1e3 * statistics.mean(times), "start": start,
                      "steps": a.steps, "loss": loss.item()}))


if __name__ == "__main__":
    main()
