"""A small MLP trained two steps on the CPU, the same seed on both sides;
on the compare side one parameter is different before training starts, as a
checkpoint that loaded differently would make it (issue 38, items 4 and 5).

Environment:
  P_SCALE     factor applied to fc1.weight right after the model is built (1: none)
  P_SCALE_RANK  the rank whose fc1.weight is scaled (-1: every rank)
  P_OPT       sgd | adam (sgd: SGD with momentum)
  P_DDP       1: gradients all_reduce'd by hand over gloo (RANK/WORLD_SIZE set
              by the launcher, as torchrun does); 0: one process
  P_STEPS     steps (2)
  P_EXACT     1: one thread and mkldnn off (the control: no parameter differs,
              only the kernels' summation order may)
  P_BF16      1: the forward under CPU autocast to bfloat16 (parameters stay float32)
              on P_SCALE_RANK's ranks (every rank when it is -1)
  P_XSCALE    factor applied to the input batch on P_SCALE_RANK's ranks (1: none),
              as a data pipeline that normalised differently would
Each rank prints "rank R step S loss HEX" per step.
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = float(os.environ.get("P_SCALE", "1"))
SCALE_RANK = int(os.environ.get("P_SCALE_RANK", "-1"))
OPT = os.environ.get("P_OPT", "sgd")
DDP = os.environ.get("P_DDP", "0") == "1"
STEPS = int(os.environ.get("P_STEPS", "2"))
if os.environ.get("P_EXACT", "0") == "1":
    torch.backends.mkldnn.enabled = False
    torch.set_num_threads(1)

rank, world = 0, 1
if DDP:
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


torch.manual_seed(0)
model = MLP()
if SCALE != 1.0 and SCALE_RANK in (-1, rank):
    with torch.no_grad():
        model.fc1.weight.mul_(SCALE)
if OPT == "adam":
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
else:
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
g = torch.Generator().manual_seed(100 + rank)
x, y = torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
XSCALE = float(os.environ.get("P_XSCALE", "1"))
if XSCALE != 1.0 and SCALE_RANK in (-1, rank):
    x = x * XSCALE
BF16 = os.environ.get("P_BF16", "0") == "1" and SCALE_RANK in (-1, rank)
for step in range(STEPS):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=BF16):
        logits = model(x)
    loss = F.cross_entropy(logits.float(), y)
    opt.zero_grad()
    loss.backward()
    if DDP:
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad.div_(world)
    opt.step()
    print("rank %d step %d loss %s" % (rank, step, loss.item().hex()), flush=True)
if DDP:
    dist.destroy_process_group()
