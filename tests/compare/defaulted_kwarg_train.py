"""Two steps of a small MLP with Adam, its activation F.gelu(h) as most code
writes it, or F.gelu(h, approximate="tanh") when GELU_TANH=1: the same call
with a keyword given on one side only (test_culprit_defaulted_kwarg.py)."""
import os

import torch
import torch.nn.functional as F

torch.manual_seed(0)
tanh = os.environ.get("GELU_TANH") == "1"
fc1, fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)
opt = torch.optim.Adam(list(fc1.parameters()) + list(fc2.parameters()), lr=1e-3)
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
for step in range(2):
    h = fc1(x)
    a = F.gelu(h, approximate="tanh") if tanh else F.gelu(h)
    loss = F.cross_entropy(fc2(a), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step %d loss %.6f" % (step, loss.item()))
