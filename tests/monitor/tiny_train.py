"""A tiny training (two linears, a layer norm, AdamW) for the monitor tests.

Run plainly under `msprobe monitor`. With MSPROBE_MONITOR_REFERENCE set to a
directory holding msenv.py, msprobe's own TrainerMon is attached instead (how
fixtures/monitor/ was made). With TINY_SAVE=DIR, the weights before and after
each step, their gradients and the optimizer's exp_avg/exp_avg_sq are saved
to DIR/step{N}.pt, for tests that recompute the statistics independently.
TINY_DTYPE=float64|bfloat16|float16 trains in that dtype.
TINY_DYNAMIC_AT=STEP:FILE:JSON writes JSON to FILE after step STEP (msprobe's
dynamic start and stop). TINY_NAN_STEP=N poisons the input of step N with a NaN; TINY_INPLACE=1 makes
the ReLU in-place (on the output of a Linear: torch's full backward hooks
refuse that unless the hooks' outputs are cloned). TINY_HOOKS=1 prints the
number of torch's global forward and backward module hooks to stderr as
each step starts.
"""
import os
import sys

import torch

import montest


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.act = torch.nn.ReLU(inplace=os.environ.get("TINY_INPLACE") == "1")
        self.fc2 = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.norm = torch.nn.LayerNorm(8)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.norm(self.block(x)))


def main():
    steps = int(os.environ.get("TINY_STEPS", "3"))
    nan_step = int(os.environ.get("TINY_NAN_STEP", "-1"))
    save = os.environ.get("TINY_SAVE")
    torch.manual_seed(0)
    model = Tiny()
    dtype = getattr(torch, os.environ.get("TINY_DTYPE", "float32"))
    model = model.to(dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ref = os.environ.get("MSPROBE_MONITOR_REFERENCE")
    if ref:
        sys.path.insert(0, ref)
        from msenv import TrainerMon

        mon = TrainerMon(os.environ["TINY_CONFIG"], params_have_main_grad=False)
        mon.set_monitor(model, grad_acc_steps=1, optimizer=opt)
    for step in range(steps):
        if os.environ.get("TINY_HOOKS"):
            montest.say_hooks(step)
        x = torch.randn(4, 8).to(dtype)
        if step == nan_step:
            x[0, 0] = float("nan")
        y = torch.randn(4, 2).to(dtype)
        loss = torch.nn.functional.mse_loss(model(x).float(), y.float())
        opt.zero_grad()
        loss.backward()
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        opt.step()
        if save:
            state = {}
            for n, p in model.named_parameters():
                st = opt.state[p]
                state[n] = {k: st[k].detach().clone() for k in ("exp_avg", "exp_avg_sq")}
            after = {n: p.detach().clone() for n, p in model.named_parameters()}
            torch.save({"param": before, "grad": grads, "after": after, "state": state},
                       os.path.join(save, "step%d.pt" % step))
        print("step", step, "loss", repr(float(loss)))
        dyn = os.environ.get("TINY_DYNAMIC_AT")  # "STEP:FILE:JSON": FILE rewritten after STEP
        if dyn and int(dyn.split(":", 2)[0]) == step:
            with open(dyn.split(":", 2)[1], "w") as f:
                f.write(dyn.split(":", 2)[2])


if __name__ == "__main__":
    main()
