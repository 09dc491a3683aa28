"""Three AdamW steps of a small model for test_monitor_actv.py, chosen by
ACTV_MODEL, printing each step's loss exactly (float.hex):
  seq      Linear, ReLU, Linear
  inplace  the same with ReLU(inplace=True)
  changes  Linear, a module that doubles its input in place (no `inplace`
           attribute: torch cannot tell), Linear
  view     Linear, Identity, then the caller halves what Identity returned
           in place, Linear
  edges    seq on an input of values beside the eps of ACTV_EPS (just under,
           at and just over it as float32, either sign), for the zeros count
  wide     activations and gradients of 655,360 elements (read in pieces):
           Linear, ReLU, casts to bfloat16 and float64, a Linear on that
           cast back; off the loss's path, a float64 copy with one NaN deep
           inside and a float16 cast
"""
import os

import torch

import montest


class Doubles(torch.nn.Module):
    def forward(self, x):
        x.mul_(2)
        return x + 1


class Halved(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 8)
        self.same = torch.nn.Identity()
        self.fc2 = torch.nn.Linear(8, 4)

    def forward(self, x):
        h = self.same(self.fc1(x))
        h.mul_(0.5)
        return self.fc2(h)


class Cast(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def forward(self, x):
        return x.to(self.dtype)


class Poison(torch.nn.Module):
    def forward(self, x):
        m = torch.zeros_like(x)
        m.view(-1)[600001] = float("nan")
        return x + m


class Wide(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 4096)
        self.act = torch.nn.ReLU()
        self.bf = Cast(torch.bfloat16)
        self.f64 = Cast(torch.float64)
        self.poison = Poison()
        self.f16 = Cast(torch.float16)
        self.head = torch.nn.Linear(4096, 4)

    def forward(self, x, keep=None):
        a = self.fc(x)
        b = self.act(a)
        c = self.bf(b)
        d = self.f64(c)
        p = self.poison(d.detach())
        h = self.f16(b.detach())
        e = d.float()
        out = self.head(e)
        if keep is not None:
            keep.update(fc=(x, a), act=(a, b), bf=(b, c), f64=(c, d), poison=(d.detach(), p),
                        f16=(b.detach(), h), head=(e, out))
            keep[""] = (x, out)
        return out


def build(kind):
    torch.manual_seed(0)
    if kind == "view":
        return Halved()
    if kind == "wide":
        return Wide()
    mid = {"seq": torch.nn.ReLU(), "inplace": torch.nn.ReLU(inplace=True),
           "changes": Doubles()}[kind]
    return torch.nn.Sequential(torch.nn.Linear(8, 8), mid, torch.nn.Linear(8, 4))


def edges(eps):
    """40 float32 values around eps and 0, both signs, in the vector part
    and the tail of a pass (32 + 8)."""
    e = torch.tensor(eps, dtype=torch.float64).float()
    near = [torch.nextafter(e, torch.tensor(0.0)), e, torch.nextafter(e, torch.tensor(float("inf")))]
    vals = [v * sgn for v in near for sgn in (1, -1)] + [torch.tensor(0.0), torch.tensor(1.0)]
    vals = torch.stack(vals).float()
    return torch.cat([vals.repeat(5)[:32], vals.flip(0)[:8]]).view(5, 8)


def data():
    g = torch.Generator().manual_seed(1)
    if os.environ.get("ACTV_MODEL") == "wide":
        return torch.randn(160, 64, generator=g), torch.randn(160, 4, generator=g)
    x, y = torch.randn(5, 8, generator=g), torch.randn(5, 4, generator=g)
    if os.environ.get("ACTV_MODEL") == "edges":
        x = edges(float(os.environ["ACTV_EPS"]))
    return x, y


def main():
    kind = os.environ.get("ACTV_MODEL", "seq")
    model = build("seq" if kind == "edges" else kind)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = data()
    for step in range(3):
        if os.environ.get("ACTV_HOOKS"):
            montest.say_hooks(step)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        print(float(loss).hex())


if __name__ == "__main__":
    main()
