"""Two steps of a small MLP with layer norm and AdamW, each call spelled one
of two ways that compute the same thing (test_compare_defaults.py):
SPELLING=given passes F.gelu(h, approximate="none") and F.layer_norm(...,
eps=1e-5) by keyword; SPELLING=left_out calls F.gelu(h) and passes
F.layer_norm's eps by position. fp32, one thread: both runs are bit for bit
the same. SPELLING=wide_eps is a real change: eps=1e-3 by keyword."""
import os

import torch
import torch.nn.functional as F

torch.manual_seed(0)
spelling = os.environ.get("SPELLING", "left_out")
given = spelling == "given"
fc1, fc2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)
ln_w, ln_b = torch.nn.Parameter(torch.ones(32)), torch.nn.Parameter(torch.zeros(32))
params = list(fc1.parameters()) + list(fc2.parameters()) + [ln_w, ln_b]
opt = torch.optim.AdamW(params, lr=1e-3)
x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
for step in range(2):
    h = fc1(x)
    if given:
        h = F.layer_norm(h, (32,), ln_w, ln_b, eps=1e-5)
        a = F.gelu(h, approximate="none")
    elif spelling == "wide_eps":
        h = F.layer_norm(h, (32,), ln_w, ln_b, eps=1e-3)
        a = F.gelu(h)
    else:
        h = F.layer_norm(h, (32,), ln_w, ln_b, 1e-5)
        a = F.gelu(h)
    loss = F.cross_entropy(fc2(a), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step %d loss %.9f" % (step, loss.item()))
