"""Training runs that go to NaN or Inf, for overflow_check's tests.

    python nan_train.py resnet PLANT [STEPS]
    python nan_train.py dist PLANT          (two ranks: RANK, WORLD_SIZE, MASTER_ADDR,
                                             MASTER_PORT set by the launcher)

resnet: torchvision resnet18 trained on random 32x32 images under CPU
autocast (bfloat16: torch 1.13's CPU autocast refuses float16, and its CPU
kernels for conv, matmul and most ops have no float16 either), with one
planted stage before layer2:
  fp16_overflow  the activation cast to float16 and scaled by 2^15, the way
                 a loss scale or an attention scale pushes it past 65504: the
                 float16 multiply overflows to Inf
  log_negative   x + 1e-3 * log(x - 0.5): log of the negative entries is NaN
                 made from finite inputs
  none           the same stage, scale 1: no NaN anywhere
dist: two ranks over gloo; rank 1 takes log of a negative number, and the
all_reduce of the activations carries its NaN to rank 0.
"""
import sys

import torch
import torch.nn as nn


class Planted(nn.Module):
    def __init__(self, plant):
        super().__init__()
        self.plant = plant

    def forward(self, x):
        if self.plant == "fp16_overflow":
            h = x.half() * 32768.0
            return h.float() / 32768.0
        if self.plant == "log_negative":
            return x + 1e-3 * torch.log(x - 0.5)
        return x * 1.0


def resnet(plant, steps):
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    model.layer2 = nn.Sequential(Planted(plant), model.layer2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    for step in range(steps):
        x = torch.randn(4, 3, 32, 32, generator=gen)
        y = torch.randint(0, 10, (4,), generator=gen)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("step %d loss %.6f" % (step, loss.item()), flush=True)


def dist(plant):
    import torch.distributed as td
    td.init_process_group("gloo")
    rank = td.get_rank()
    torch.manual_seed(0)
    m = nn.Linear(8, 8)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    torch.manual_seed(1 + rank)
    x = torch.randn(4, 8)
    for step in range(2):
        h = torch.tanh(m(x))
        if rank == 1 and plant == "log_negative":
            h = h + torch.log(h - 2.0)  # tanh < 1: every entry is log of a negative
        h = h.detach()
        td.all_reduce(h)
        loss = (m(x) * h).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("rank %d step %d loss %.6f" % (rank, step, loss.item()), flush=True)
    td.destroy_process_group()


if __name__ == "__main__":
    kind, plant = sys.argv[1], sys.argv[2]
    if kind == "resnet":
        resnet(plant, int(sys.argv[3]) if len(sys.argv) > 3 else 2)
    elif kind == "dist":
        dist(plant)
    else:
        sys.exit("unknown run %s" % kind)
