"""A tiny GPT trained for the monitor compare and locate tests (issue 41).

Two blocks of pre-norm attention and MLP over a 24-token vocabulary, trained
with AdamW to continue a fixed family of sequences (next token = previous + a
per-sequence stride, mod 24), batches drawn from a seeded generator, so that
two runs are bit for bit the same unless told otherwise:

  GPT_STEPS=N        steps (default 300)
  GPT_EPS_STEP=S     from step S on, block 1's ln_2 uses eps GPT_EPS (0.5)
                     instead of 1e-5: the planted bug
  GPT_AUTOCAST=bf16  forward under CPU bf16 autocast: numerics differ from the
                     first step on, and nothing is wrong
  GPT_DATA_SEED=K    another data order (a run that is not reproducible)
  GPT_SEED=K         other initial weights (default 0)
  GPT_NAN_STEP=S     at step S, block 1's attention output goes through
                     torch.sqrt of a negative shift: NaN made from finite inputs
  GPT_ATTACH=FILE    a Python file whose attach(model, optimizer) is called
                     before training (how fixtures/monitor/compare/ was made
                     with msprobe's own monitor)

Prints one line per 50 steps and the last loss.
"""
import math
import os
import runpy

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, CTX, DIM, HEADS = 24, 12, 32, 2


class Block(nn.Module):
    nan_now = False

    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(DIM)
        self.attn = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.ln_2 = nn.LayerNorm(DIM)
        self.fc = nn.Linear(DIM, 4 * DIM)
        self.out = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn(self.ln_1(x)).split(DIM, dim=2)
        q = q.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        k = k.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        v = v.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // HEADS)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        if self.nan_now:
            y = torch.sqrt(y - 1.0)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(CTX, DIM)
        self.h = nn.ModuleList([Block() for _ in range(2)])
        self.ln_f = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for blk in self.h:
            x = blk(x)
        return self.head(self.ln_f(x))


def batch(gen, n=16):
    start = torch.randint(0, VOCAB, (n, 1), generator=gen)
    stride = torch.randint(1, 4, (n, 1), generator=gen)
    seq = (start + stride * torch.arange(CTX + 1)) % VOCAB
    return seq[:, :-1], seq[:, 1:]


def main():
    steps = int(os.environ.get("GPT_STEPS", "300"))
    eps_step = int(os.environ.get("GPT_EPS_STEP", "-1"))
    eps = float(os.environ.get("GPT_EPS", "0.5"))
    nan_step = int(os.environ.get("GPT_NAN_STEP", "-1"))
    autocast = os.environ.get("GPT_AUTOCAST", "") == "bf16"
    torch.manual_seed(int(os.environ.get("GPT_SEED", "0")))
    gen = torch.Generator().manual_seed(int(os.environ.get("GPT_DATA_SEED", "1")))
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    attach = os.environ.get("GPT_ATTACH")
    if attach:
        runpy.run_path(attach)["attach"](model, opt)
    for step in range(steps):
        if step == eps_step:
            model.h[1].ln_2.eps = eps
        model.h[1].nan_now = step == nan_step
        x, y = batch(gen)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            print("step", step, "loss %.6f" % float(loss), flush=True)


if __name__ == "__main__":
    main()
