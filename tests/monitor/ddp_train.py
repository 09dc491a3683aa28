"""Two ranks of DDP over gloo training tests/monitor/tiny_train.py's model
with AdamW, each rank on its own data, for test_monitor_ranks.py. Each rank
saves its parameters' gradients as autograd left them on this rank (before
DDP averaged them: a hook on each gradient, registered before DDP's) and
after (at the optimizer's step) to TINY_SAVE/rank{R}_step{N}.pt."""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_train import Tiny  # noqa: E402


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Tiny()
    local = {}
    for name, p in model.named_parameters():
        p.register_hook(lambda g, name=name: local.__setitem__(name, g.detach().clone()))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(3):
        x, y = torch.randn(4, 8, generator=gen), torch.randn(4, 2, generator=gen)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        reduced = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        torch.save({"local": dict(local), "reduced": reduced},
                   os.path.join(os.environ["TINY_SAVE"], "rank%d_step%d.pt" % (rank, step)))
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
