#!/usr/bin/python3
"""A tiny torch.nn training run that takes credentials on its command line,
as real launch scripts do (--db-url, --password, --token, a positional URL).
It knows nothing about msprobe and never prints its arguments."""
import argparse
import sys

import torch
import torch.nn as nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("target")
    ap.add_argument("--db-url")
    ap.add_argument("--password")
    ap.add_argument("--token")
    ap.add_argument("--api-key")
    ap.add_argument("--header")
    ap.add_argument("--hf-token")
    ap.add_argument("--webhook")
    ap.add_argument("-p")
    ap.add_argument("--conn")
    ap.add_argument("--wandb")
    ap.add_argument("--jdbc")
    ap.add_argument("--dsn")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--run-name", default="baseline")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(1)
    for step in range(2):
        x = torch.randn(4, 6, generator=gen)
        y = torch.randint(0, 3, (4,), generator=gen)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print("step %d loss %.6f" % (step, loss.item()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
