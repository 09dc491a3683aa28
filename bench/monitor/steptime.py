#!/usr/bin/python3
"""Times the training steps of a real model under AdamW (not a test), for
bench/monitor/side.sh: a nanoGPT-style GPT (token and position embeddings,
pre-norm blocks of causal self-attention and a GELU MLP, weight-tied head) or
torchvision's resnet18.

Prints one JSON line: median step time in ms over the timed steps, the
median CPU time of a step (all threads) and of the training thread alone,
the number of parameters and the last loss. --device cuda trains on the GPU
(each step ends with a synchronize, so its time is the device's too).
--copies FILE (on a GPU) runs the timed steps under torch.profiler, writes
its trace to FILE and adds the device-to-host copies a step (their number
and bytes) to the JSON line: what a monitor's statistics take off the device.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(b, t, d))


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab, block, d, layers, heads):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.h:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


def device_to_host(trace, steps):
    """The device-to-host copies a step in a torch.profiler chrome trace: the
    GPU's memcpy events named DtoH, with their bytes where the trace has them."""
    with open(trace) as f:
        events = json.load(f)
    events = events.get("traceEvents", events) if isinstance(events, dict) else events
    n = nbytes = 0
    for e in events:
        if e.get("ph") == "X" and "DtoH" in str(e.get("name", "")) \
                and "memcpy" in str(e.get("cat", "")).lower():
            n += 1
            nbytes += int((e.get("args") or {}).get("bytes", 0))
    return {"d2h_copies_per_step": n / steps, "d2h_bytes_per_step": nbytes / steps}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["gpt", "resnet18"], default="gpt")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--image", type=int, default=64)  # resnet18's image side
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--copies", metavar="TRACE")
    a = ap.parse_args()
    dev = torch.device(a.device)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    if a.model == "gpt":
        # sized for a CPU with a generic BLAS (a few GFLOP/s): 2 M parameters
        vocab, block = 1024, 64
        model = GPT(vocab, block, d=192, layers=4, heads=6)
        xs = torch.randint(0, vocab, (a.batch, block), generator=gen)
        ys = torch.randint(0, vocab, (a.batch, block), generator=gen)
        loss_of = lambda out: F.cross_entropy(out.view(-1, vocab), ys.view(-1))  # noqa: E731
    else:
        import torchvision
        model = torchvision.models.resnet18(num_classes=100)
        xs = torch.randn(a.batch, 3, a.image, a.image, generator=gen)
        ys = torch.randint(0, 100, (a.batch,), generator=gen)
        loss_of = lambda out: F.cross_entropy(out, ys)  # noqa: E731
    model, xs, ys = model.to(dev), xs.to(dev), ys.to(dev)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times, cpu, tcpu = [], [], []
    prof = None
    for step in range(a.warmup + a.steps):
        if step == a.warmup and a.copies:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                      torch.profiler.ProfilerActivity.CUDA])
            prof.__enter__()
        t0, c0, tc0 = time.perf_counter(), time.process_time(), time.thread_time()
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model(xs))
        loss.backward()
        opt.step()
        sync()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            tcpu.append(time.thread_time() - tc0)
    copies = {}
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(a.copies)
        copies = device_to_host(a.copies, a.steps)
    print(json.dumps({**copies, "median_ms": 1e3 * statistics.median(times),
                      "cpu_ms": 1e3 * statistics.median(cpu),
                      "thread_cpu_ms": 1e3 * statistics.median(tcpu),
                      "steps_ms": [round(1e3 * t, 3) for t in times],
                      "steps_thread_cpu_ms": [round(1e3 * t, 3) for t in tcpu],
                      "first_step": a.warmup,
                      "params": sum(p.numel() for p in model.parameters()),
                      "loss": loss.item()}))


if __name__ == "__main__":
    main()
