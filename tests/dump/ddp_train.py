"""Two ranks (torch.multiprocessing.spawn, gloo, world_size 2) train a linear
layer for two steps and all_reduce their gradients. Used by test_dump_procs.py:
every spawned process boots the shim on its own and writes its own rank dir."""
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from msp_launch import free_port  # tests/lib, on PYTHONPATH in the suite


def worker(rank, world, port):
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        x = torch.full((3, 4), float(rank + 1))
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2, free_port()), nprocs=2)
    sys.exit(0)
