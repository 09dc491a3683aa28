"""Two ranks (torch.multiprocessing.spawn, gloo, world_size 2) train a linear
layer for two steps and all_reduce their gradients. Used by test_dump_procs.py:
every spawned process boots the shim on its own and writes its own rank dir."""
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    mp.spawn(worker, args=(2, free_port()), nprocs=2)
    sys.exit(0)
