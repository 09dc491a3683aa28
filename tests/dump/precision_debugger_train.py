"""A training script written against Huawei msprobe's documented API
(PrecisionDebugger, seed_all), as users have it: resnet18 on 32x32 random
data, 4 steps of two optimizer steps each. argv: CONFIG [STEPS]: CONFIG is
config_path ("-": none given), STEPS (e.g. "1,2")
is passed as PrecisionDebugger(step=[...]), else the config's step decides;
NAME=VALUE arguments (dump_path=d, level=L1) are passed as they are.
After stop() it runs a tanh and a mul that no dump may hold."""
import sys

import torch
import torchvision
from msprobe.pytorch import PrecisionDebugger, seed_all

seed_all(1234)
kw = {}
for a in sys.argv[2:]:
    if "=" in a:                    # dump_path=..., level=..., task=...
        kw[a.split("=", 1)[0]] = a.split("=", 1)[1]
    else:
        kw["step"] = [int(s) for s in a.split(",")]
debugger = PrecisionDebugger(config_path=None if sys.argv[1] == "-" else sys.argv[1], **kw)
torch.set_num_threads(1)
model = torchvision.models.resnet18(num_classes=10)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for step in range(4):
    debugger.start(model)
    seed_all(1000 + step)           # inside the window: msprobe's own calls, no record
    for micro in range(2):          # two optimizer steps in one debugger step
        x = torch.randn(2, 3, 32, 32)
        y = torch.randint(0, 10, (2,))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("step %d.%d loss %r" % (step, micro, loss.item()))
    debugger.stop()
    after = torch.tanh(loss.detach())  # after stop(): not recorded
    debugger.step()
    x = torch.mul(after, 0.5)          # between step() and start(): not recorded
    print("step %d tanh %r" % (step, after.item()))
if hasattr(debugger, "forward_backward_dump_end"):  # 8.x has it, msprobe 26 does not
    debugger.forward_backward_dump_end()
print("msprobe from", getattr(sys.modules["msprobe"], "__file__", None))
