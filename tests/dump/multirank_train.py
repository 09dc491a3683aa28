"""Four ranks on the CPU (gloo), as torchrun starts them (MASTER_ADDR,
MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK in the environment): a torchvision
SqueezeNet under DistributedDataParallel over the world, and a small
tensor-parallel MLP over groups of two ranks written with torch.distributed
calls: broadcast of the input from the group's first rank, a column-parallel
linear whose outputs are gathered (all_gather_into_tensor), a row-parallel
linear whose partial sums are all_reduce'd, a reduce_scatter_tensor of the
result, and a send/recv between the two ranks of each group.

Every collective the script calls is logged by the script itself (API, group
ranks, peer, and the values it was given and left in its tensors) to
LOG_DIR/rank{R}.npz, so the tests check the dump against what was really
called, not against msprobe. Where gloo lacks a collective (torch 1.13's gloo
has no all_gather_into_tensor and no reduce_scatter_tensor) the call raises,
the log says so, and the layer does the same with all_gather / all_reduce.

Environment: T_STEPS (3), T_KILL_RANK / T_KILL_STEP (that rank SIGKILLs
itself when that step begins), T_LOG_DIR (where the logs go; none: no log),
T_WNOISE (a relative change of rank 2's slice of the tensor-parallel fc1
weight, the error planted on one rank: it reaches rank 3 only through the
group's communication). Prints "rank R step S loss HEX" per step.
"""
import datetime
import os
import signal
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torchvision

STEPS = int(os.environ.get("T_STEPS", "3"))
KILL_RANK = int(os.environ.get("T_KILL_RANK", "-1"))
KILL_STEP = int(os.environ.get("T_KILL_STEP", "-1"))
LOG_DIR = os.environ.get("T_LOG_DIR", "")
WNOISE = float(os.environ.get("T_WNOISE", "0"))
TP = 2


class Log:
    """What each collective was given and returned, in call order."""

    def __init__(self):
        self.calls = []
        self.arrays = {}

    def add(self, api, group, peer, ok, before, after):
        k = len(self.calls)
        self.calls.append((api, group, -1 if peer is None else peer, ok))
        if not LOG_DIR:
            return
        with torch.no_grad():
            for role, t in before:
                self.arrays["c%d/in/%s" % (k, role)] = t.detach().clone().numpy()
            for role, t in after:
                self.arrays["c%d/out/%s" % (k, role)] = t.detach().clone().numpy()

    def save(self, rank):
        if not LOG_DIR:
            return
        meta = np.array(["%s|%s|%d|%d" % c for c in self.calls])
        np.savez(os.path.join(LOG_DIR, "rank%d.npz" % rank), meta=meta, **self.arrays)


LOG = Log()


def snap(pairs):
    return [(r, t.detach().clone()) for r, t in pairs]


def ranks_text(ranks):
    return "%d-%d" % (ranks[0], ranks[-1]) if len(ranks) > 1 else str(ranks[0])


class TPMLP(nn.Module):
    """Column-parallel fc1 (hidden split over the group), row-parallel fc2."""

    def __init__(self, group, ranks, d=8, hidden=16):
        super().__init__()
        self.group, self.ranks = group, ranks
        self.gtext = ranks_text(ranks)
        self.world = ranks_text(list(range(dist.get_world_size())))  # send/recv's group
        self.me = dist.get_rank()
        self.pos = ranks.index(self.me)
        g = torch.Generator().manual_seed(7)
        w1 = torch.randn(hidden, d, generator=g) * 0.3
        w2 = torch.randn(d, hidden, generator=g) * 0.3
        h = hidden // len(ranks)
        w1 = w1[self.pos * h:(self.pos + 1) * h].clone()
        if WNOISE and self.me == 2:  # through numpy: no torch call, the same records
            a = w1.numpy()
            a *= 1 + WNOISE * np.random.default_rng(3).standard_normal(a.shape).astype(np.float32)
        self.w1 = nn.Parameter(w1)
        self.w2 = nn.Parameter(w2[:, self.pos * h:(self.pos + 1) * h].clone())

    def forward(self, x):
        n = len(self.ranks)
        root = self.ranks[0]
        before = snap([("input.0", x)])
        dist.broadcast(x, src=root, group=self.group)
        LOG.add("broadcast", self.gtext, root, 1, before, [("output.0", x)])

        h = F.gelu(x @ self.w1.t())
        # every rank's hidden slice, gathered along dim 0 (the layout the
        # next layer of a real model would take it in)
        hd = h.detach().contiguous()
        full = torch.zeros(n * hd.shape[0], hd.shape[1])
        before = snap([("input.0", full), ("input.1", hd)])
        try:
            dist.all_gather_into_tensor(full, hd, group=self.group)
            LOG.add("all_gather_into_tensor", self.gtext, None, 1, before,
                    [("output.0", full), ("output.1", hd)])
        except RuntimeError:
            LOG.add("all_gather_into_tensor", self.gtext, None, 0, before, [])
            parts = list(full.chunk(n))
            before = snap([("input.0.%d" % i, p) for i, p in enumerate(parts)] +
                          [("input.1", hd)])
            dist.all_gather(parts, hd, group=self.group)
            LOG.add("all_gather", self.gtext, None, 1, before,
                    [("output.0.%d" % i, p) for i, p in enumerate(parts)] + [("output.1", hd)])

        partial = h @ self.w2.t()
        total = partial.detach().clone()
        before = snap([("input.0", total)])
        dist.all_reduce(total, group=self.group)
        LOG.add("all_reduce", self.gtext, None, 1, before, [("output.0", total)])
        # the sum flows forward; the gradient goes to this rank's own part
        y = partial + (total - partial).detach()

        shard = torch.zeros(total.shape[0] // n, total.shape[1])
        src = total.contiguous()
        before = snap([("input.0", shard), ("input.1", src)])
        try:
            dist.reduce_scatter_tensor(shard, src, group=self.group)
            LOG.add("reduce_scatter_tensor", self.gtext, None, 1, before,
                    [("output.0", shard), ("output.1", src)])
        except RuntimeError:
            LOG.add("reduce_scatter_tensor", self.gtext, None, 0, before, [])
            summed = src.clone()
            before = snap([("input.0", summed)])
            dist.all_reduce(summed, group=self.group)
            LOG.add("all_reduce", self.gtext, None, 1, before, [("output.0", summed)])
            shard = summed[self.pos * shard.shape[0]:(self.pos + 1) * shard.shape[0]]

        # the group's two ranks swap their shards (first sends first)
        other = self.ranks[1 - self.pos]
        got = torch.zeros_like(shard)
        mine = shard.contiguous()
        for turn in range(2):
            if (turn == 0) == (self.pos == 0):
                before = snap([("input.0", mine)])
                dist.send(mine, dst=other)
                LOG.add("send", self.world, other, 1, before, [("output.0", mine)])
            else:
                before = snap([("input.0", got)])
                dist.recv(got, src=other)
                LOG.add("recv", self.world, other, 1, before, [("output.0", got)])
        return y, got


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    rank, ws = dist.get_rank(), dist.get_world_size()
    groups = [list(range(i, i + TP)) for i in range(0, ws, TP)]
    handles = [dist.new_group(g) for g in groups]
    mine = [i for i, g in enumerate(groups) if rank in g][0]

    torch.manual_seed(0)
    net = torchvision.models.squeezenet1_1(num_classes=10)
    ddp = nn.parallel.DistributedDataParallel(net)
    tp = TPMLP(handles[mine], groups[mine])
    opt = torch.optim.SGD(list(ddp.parameters()) + list(tp.parameters()), lr=0.01,
                          momentum=0.9)
    torch.manual_seed(100 + rank)  # each rank its own shard of the data
    images = torch.randn(STEPS, 2, 3, 32, 32)
    labels = torch.randint(0, 10, (STEPS, 2))
    feats = torch.randn(STEPS, 4, 8)
    for step in range(STEPS):
        if rank == KILL_RANK and step == KILL_STEP:
            LOG.save(rank)
            os.kill(os.getpid(), signal.SIGKILL)
        opt.zero_grad()
        logits = ddp(images[step])
        x = feats[step].clone()
        y, got = tp(x)
        loss = F.cross_entropy(logits, labels[step]) + (y ** 2).mean() + 0.1 * got.sum()
        loss.backward()
        opt.step()
        print("rank %d step %d loss %s" % (rank, step, loss.item().hex()), flush=True)
    LOG.save(rank)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    sys.exit(0)
