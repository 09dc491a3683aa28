"""The seeded training run that fixtures/msprobe/ holds msprobe's own dumps
of (see fixtures/msprobe/README.md): the same script run under our shim must
give the same tensors, so a mixed compare (msprobe's dump against ours) of
it is clean. Kept small: the fixtures are committed.

    python msprobe_seeded_model.py [STEPS] [--extra-relu]

--extra-relu adds one F.relu call at the start of the forward, on a spare
buffer whose result is unused: the same values, every later F.relu call one
index up (a call-index shift for fuzzy matching). With run(debugger) a caller wraps each step in
msprobe's PrecisionDebugger start/stop/step."""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, extra_relu=False):
        super().__init__()
        self.extra_relu = extra_relu
        self.emb = nn.Embedding(12, 8)
        self.norm = nn.LayerNorm(8)
        self.proj = nn.Linear(8, 8)
        self.head = nn.Linear(8, 3)
        self.register_buffer("spare", torch.zeros(1))

    def forward(self, ids):
        if self.extra_relu:
            F.relu(self.spare)                 # one more relu call, nothing else
        h = self.emb(ids)                      # [4, 5, 8]
        h = self.norm(h)
        h = F.gelu(self.proj(h))               # linear on a 3-d input
        h = torch.matmul(h, h.transpose(1, 2)).softmax(-1) @ h
        h = h.mean(1)                          # [4, 8]
        return self.head(F.relu(h))            # linear on a 2-d input


def run(steps=1, extra_relu=False, debugger=None, model=None):
    torch.manual_seed(1234)
    net = Net(extra_relu)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    ids = torch.randint(0, 12, (4, 5))
    target = torch.tensor([0, 2, 1, 2])
    losses = []
    for _ in range(steps):
        if debugger:
            debugger.start(net)
        loss = F.cross_entropy(net(ids), target)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if debugger:
            debugger.stop()
            debugger.step()
        losses.append(loss.item())
    return losses


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 1
    for v in run(n, "--extra-relu" in sys.argv):
        print("loss %.9g" % v)
