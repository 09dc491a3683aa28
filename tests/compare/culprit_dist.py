"""Two ranks on the CPU (gloo) that gather a layer's output into buffers made
with torch.empty_like, as tensor-parallel code does, then train two AdamW
steps. Launched with the environment torchrun sets (MASTER_ADDR, MASTER_PORT,
RANK, WORLD_SIZE, LOCAL_RANK): Debian's torchrun fails on torch 1.13 with
Python 3.11.

The memory empty_like hands out holds whatever was there before: here the
bytes of a tensor drawn from a time-seeded generator and freed just before,
so two otherwise identical runs hold different garbage in those buffers until
all_gather writes them. The garbage is made with numpy, outside the APIs the
dump records.
"""
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    dist.init_process_group("gloo")
    rank, ws = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    m = nn.Linear(8, 8)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    torch.manual_seed(1 + rank)
    x = torch.randn(4, 8)
    # garbage made outside torch's API (numpy), so only the buffers show it
    noise = np.random.default_rng(time.time_ns())
    for step in range(2):
        opt.zero_grad()
        h = m(x)
        junk = torch.from_numpy((noise.random((4, 8)) * 1e30).astype(np.float32))
        del junk
        bufs = [torch.empty_like(h) for _ in range(ws)]
        dist.all_gather(bufs, h.detach())
        g = torch.cat(bufs)
        loss = (h * g[rank * 4:(rank + 1) * 4]).sum() * 1e-2
        loss.backward()
        opt.step()
        print("rank %d step %d loss %.6f" % (rank, step, loss.item()), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
