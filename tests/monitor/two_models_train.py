"""Two models, two AdamW optimizers, and a parameterless module run before
either (a GAN's shape), for test_monitor_values.py: the model monitored is
the first root module with trainable parameters (G), and only the steps of
the optimizer that trains it count."""
import torch
torch.manual_seed(0)
aug = torch.nn.Dropout(0.0)          # a parameterless module run first
G = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
D = torch.nn.Sequential(torch.nn.Linear(4, 1))
og = torch.optim.AdamW(G.parameters(), 1e-2); od = torch.optim.AdamW(D.parameters(), 1e-2)
for step in range(3):
    z = aug(torch.randn(8, 4))
    fake = G(z)
    ld = D(fake.detach()).mean(); od.zero_grad(); ld.backward(); od.step()
    lg = -D(fake).mean(); og.zero_grad(); lg.backward(); og.step()
