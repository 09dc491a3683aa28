"""Two steps of a LayerNorm MLP with Adam; with NAN_AT=1 the compare side's
LayerNorm takes eps=-10 (a value no one meant), so its forward makes NaN from
finite inputs and the rest of the run carries it (test_culprit_nan_chain.py)."""
import os

import torch
import torch.nn.functional as F

torch.manual_seed(0)
fc1, ln, fc2, fc3 = (torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 32),
                     torch.nn.Linear(32, 4))
params = [p for m in (fc1, ln, fc2, fc3) for p in m.parameters()]
opt = torch.optim.Adam(params, lr=1e-3)
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
eps = -10.0 if os.environ.get("NAN_AT") == "1" else 1e-5
for step in range(2):
    h = torch.relu(fc1(x))
    h = F.layer_norm(h, (32,), ln.weight, ln.bias, eps=eps)
    h = fc2(F.gelu(h))
    loss = F.cross_entropy(fc3(torch.tanh(h)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step %d loss %.6f" % (step, loss.item()))
