"""Every op seen, once, on model code nobody here wrote: torchvision's resnet18
(in-place ReLU), a two-model GAN built from torch.nn parts (two roots that both
have a `main`), nn.LSTM (torch._VF.lstm), a DataLoader over a TensorDataset.
Values are checked against what the script saw itself or against numpy."""
import os
import re
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402


class OpsCase(dt.ShimCase):
    def run_both(self, script, cfg, *args):
        """Run with and without the shim; same stdout (losses), nothing on stderr."""
        path = self.path("script.py")
        with open(path, "w") as f:
            f.write(script)
        plain = self.run_cmd([dt.PYTHON, path, self.path("plain.npz")] + list(args), preload=False)
        shim = self.run_cmd([dt.PYTHON, path, self.path("shim.npz")] + list(args), cfg)
        self.assertEqual(plain.returncode, 0, plain.stderr[-3000:])
        self.assertEqual((shim.returncode, shim.stderr), (0, ""))
        self.assertEqual(shim.stdout, plain.stdout, "the shim changed what training computed")
        return np.load(self.path("shim.npz"))

    def step_file(self, root, step):
        files = dt.dump_files(self.path(root))
        self.assertIn((step, 0), files, sorted(files))
        return dt.read_dump(files[(step, 0)])[0]


RESNET = r"""
import sys, numpy as np, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet18(num_classes=10)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(2, 3, 32, 32)
y = torch.tensor([1, 2])
for step in range(2):
    opt.zero_grad()
    logits = m(x)
    loss = torch.nn.functional.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    print("step", step, loss.item().hex())
np.savez(sys.argv[1], x=x.numpy(), logits=logits.detach().numpy())
"""


class ResNet(OpsCase):
    def test_resnet18_inplace_relu_inputs_backwards_and_root(self):
        cfg = self.write_config(dt.config("./d", mode="module", steps="1"))
        saw = self.run_both(RESNET, cfg)
        recs = self.step_file("d", 1)
        fwd = [n for n in recs if re.search(r"\.ReLU\.forward\.\d+$", n)]
        bwd = [n for n in recs if re.search(r"\.ReLU\.backward\.\d+$", n)]
        # the stem's relu once, each of the 8 BasicBlocks' relu twice
        self.assertEqual(len(fwd), 17, sorted(fwd))
        self.assertEqual(len(bwd), 17, sorted(bwd))
        # ReLU(inplace=True) overwrites its input: the record still holds what
        # it was given, the batchnorm's output, negatives included
        pairs = [("Module.relu.ReLU.forward.0", "Module.bn1.BatchNorm2d.forward.0"),
                 ("Module.layer1.0.relu.ReLU.forward.0", "Module.layer1.0.bn1.BatchNorm2d.forward.0"),
                 ("Module.layer3.1.relu.ReLU.forward.0", "Module.layer3.1.bn1.BatchNorm2d.forward.0")]
        for relu, bn in pairs:
            given = recs[relu]["input.0"]
            dt.assert_same(self, given, recs[bn]["output.0"], relu + " input.0")
            self.assertLess(float(given.min()), 0.0, relu)
            np.testing.assert_array_equal(recs[relu]["output.0"], np.maximum(given, 0))
        # the in-place relu's backward: grad_in = grad_out where its input was > 0
        for n in ("Module.relu.ReLU", "Module.layer2.0.relu.ReLU"):
            b, f = recs[n + ".backward.0"], recs[n + ".forward.0"]
            expect = np.where(f["input.0"] > 0, b["input.0"], 0).astype(np.float32)
            dt.assert_same(self, b["output.0"], expect, n + " backward")
        # the root model is a record too, with the script's own input and logits
        root = recs["Module.ResNet.forward.0"]
        dt.assert_same(self, root["input.0"], saw["x"], "root input")
        dt.assert_same(self, root["output.0"], saw["logits"], "root output")
        self.assertIn("Module.ResNet.backward.0", recs)

    def test_resnet18_api_mode_inplace_relu_backward_and_links(self):
        cfg = self.write_config(dt.config("./d", steps="1"))
        self.run_both(RESNET, cfg)
        recs = self.step_file("d", 1)
        fwd = [n for n in recs if re.match(r"Functional\.relu\.\d+\.forward$", n)]
        bwd = [n for n in recs if re.match(r"Functional\.relu\.\d+\.backward$", n)]
        self.assertEqual((len(fwd), len(bwd)), (17, 17))
        for i in (0, 5, 16):
            f, b = recs["Functional.relu.%d.forward" % i], recs["Functional.relu.%d.backward" % i]
            self.assertLess(float(f["input.0"].min()), 0.0)
            expect = np.where(f["input.0"] > 0, b["input.0"], 0).astype(np.float32)
            dt.assert_same(self, b["output.0"], expect, "relu %d backward" % i)
        # the stem: conv -> batch_norm -> relu, each input the previous output
        link = lambda n: recs[n]["tattrs"]["input.0"].get("producer")  # noqa: E731
        self.assertEqual(link("Functional.batch_norm.0.forward"),
                         "Functional.conv2d.0.forward/output.0")
        self.assertEqual(link("Functional.relu.0.forward"),
                         "Functional.batch_norm.0.forward/output.0")
        dt.assert_same(self, recs["Functional.relu.0.forward"]["input.0"],
                       recs["Functional.batch_norm.0.forward"]["output.0"], "relu 0 input")


GAN = r"""
import sys, numpy as np, torch, torch.nn as nn
torch.manual_seed(0)
nz = 8
class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, 16, 4, 1, 0, bias=False), nn.BatchNorm2d(16), nn.ReLU(True),
            nn.ConvTranspose2d(16, 3, 4, 2, 1, bias=False), nn.Tanh())
    def forward(self, z):
        return self.main(z)
class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(3, 16, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(16, 1, 4, 1, 0, bias=False), nn.Sigmoid())
    def forward(self, x):
        return self.main(x).view(-1)
netG, netD = Generator(), Discriminator()
crit = nn.BCELoss()
optD = torch.optim.Adam(netD.parameters(), lr=2e-4)
optG = torch.optim.Adam(netG.parameters(), lr=2e-4)
seen = {}
def keep(tag):
    def hook(mod, inp, out):
        seen.setdefault(tag, []).append(out.detach().numpy().copy())
    return hook
netG.main.register_forward_hook(keep("G"))
netD.main.register_forward_hook(keep("D"))
for it in range(2):
    real = torch.randn(4, 3, 8, 8)
    netD.zero_grad()
    errD_real = crit(netD(real), torch.ones(4))
    errD_real.backward()
    fake = netG(torch.randn(4, nz, 1, 1))
    errD_fake = crit(netD(fake.detach()), torch.zeros(4))
    errD_fake.backward()
    optD.step()                      # step 2*it ends: D(real), G, D(fake.detach())
    netG.zero_grad()
    errG = crit(netD(fake), torch.ones(4))
    errG.backward()
    optG.step()                      # step 2*it+1 ends: D(fake)
    print("iter", it, errD_real.item().hex(), errD_fake.item().hex(), errG.item().hex())
np.savez(sys.argv[1], **{k + str(i): v for k, vs in seen.items() for i, v in enumerate(vs)})
"""


class Gan(OpsCase):
    def test_two_roots_with_the_same_child_names_keep_every_record(self):
        cfg = self.write_config(dt.config("./d", mode="module", steps="all"))
        saw = self.run_both(GAN, cfg)
        # netD is called first: it keeps msprobe's names; netG is the second
        # root and gets its class as a namespace (msprobe-dump(5))
        for it in range(2):
            s0, s1 = self.step_file("d", 2 * it), self.step_file("d", 2 * it + 1)
            d = lambda k: saw["D%d" % (3 * it + k)]  # noqa: E731
            dt.assert_same(self, s0["Module.main.Sequential.forward.0"]["output.0"], d(0), "D real")
            dt.assert_same(self, s0["Module.main.Sequential.forward.1"]["output.0"], d(1), "D fake")
            dt.assert_same(self, s1["Module.main.Sequential.forward.0"]["output.0"], d(2), "D for G")
            dt.assert_same(self, s0["Module.Generator.main.Sequential.forward.0"]["output.0"],
                           saw["G%d" % it], "G")
            self.assertNotIn("Module.main.Sequential.forward.2", s0)
            # the roots themselves: D's output is its main's, flattened
            dt.assert_same(self, s0["Module.Discriminator.forward.1"]["output.0"],
                           d(1).reshape(-1), "D root")
            dt.assert_same(self, s0["Module.Generator.forward.0"]["output.0"], saw["G%d" % it],
                           "G root")
            # both in-place activations hold what they were given
            for relu, prev in (("Module.main.1.LeakyReLU.forward.0", "Module.main.0.Conv2d.forward.0"),
                               ("Module.Generator.main.2.ReLU.forward.0",
                                "Module.Generator.main.1.BatchNorm2d.forward.0")):
                dt.assert_same(self, s0[relu]["input.0"], s0[prev]["output.0"], relu)
                self.assertLess(float(s0[relu]["input.0"].min()), 0.0, relu)
            # every module of both models, every call: nothing lost to a name clash
            d_mods = ["Module.Discriminator", "Module.main.Sequential", "Module.main.0.Conv2d",
                      "Module.main.1.LeakyReLU", "Module.main.2.Conv2d", "Module.main.3.Sigmoid"]
            g_mods = ["Module.Generator", "Module.Generator.main.Sequential",
                      "Module.Generator.main.0.ConvTranspose2d",
                      "Module.Generator.main.1.BatchNorm2d", "Module.Generator.main.2.ReLU",
                      "Module.Generator.main.3.ConvTranspose2d", "Module.Generator.main.4.Tanh"]
            fwd0 = {n for n in s0 if ".forward." in n}
            expect0 = {"%s.forward.%d" % (m, i) for m in d_mods for i in (0, 1)}
            expect0 |= {"%s.forward.0" % m for m in g_mods}
            expect0 |= {"Module.BCELoss.forward.%d" % i for i in (0, 1)}
            self.assertEqual(fwd0, expect0)


LSTM = r"""
import sys, numpy as np, torch, torch.nn as nn
torch.manual_seed(0)
lstm = nn.LSTM(4, 6)
head = nn.Linear(6, 1)
opt = torch.optim.SGD(list(lstm.parameters()) + list(head.parameters()), lr=0.1)
x = torch.randn(5, 3, 4)
for step in range(2):
    opt.zero_grad()
    out, (h, c) = lstm(x)
    loss = head(out).square().mean()
    loss.backward()
    if step == 0:
        np.savez(sys.argv[1], x=x.numpy(), out=out.detach().numpy(), h=h.detach().numpy(),
                 c=c.detach().numpy(), gw=lstm.weight_ih_l0.grad.numpy(),
                 gwh=lstm.weight_hh_l0.grad.numpy())
    opt.step()
    print("step", step, loss.item().hex())
"""


class Lstm(OpsCase):
    def test_nn_lstm_is_dumped_as_vf_lstm_forward_and_backward(self):
        cfg = self.write_config(dt.config("./d", steps="0"))
        saw = self.run_both(LSTM, cfg)
        recs = self.step_file("d", 0)
        f = recs["VF.lstm.0.forward"]
        dt.assert_same(self, f["input.0"], saw["x"], "lstm input")
        dt.assert_same(self, f["output.0"], saw["out"], "lstm output")
        dt.assert_same(self, f["output.1"], saw["h"], "lstm h")
        dt.assert_same(self, f["output.2"], saw["c"], "lstm c")
        b = recs["VF.lstm.0.backward"]
        # input.2 is the list of flat weights: weight_ih_l0, weight_hh_l0, ...
        dt.assert_same(self, b["output.2.0"], saw["gw"], "grad of weight_ih_l0")
        dt.assert_same(self, b["output.2.1"], saw["gwh"], "grad of weight_hh_l0")

    def test_vf_names_are_valid_api_list_entries(self):
        cfg = self.write_config(dt.config("./d", steps="0", api_list=[("torch._VF.lstm", "forward")]))
        self.run_both(LSTM, cfg)
        self.assertEqual(set(self.step_file("d", 0)), {"VF.lstm.0.forward"})
        bad = self.write_config(dt.config("./e", steps="0", api_list=[("torch._VF.lstmm", "forward")]),
                                "bad.json")
        p = self.run_cmd([dt.PYTHON, "-c", "import torch"], bad)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('did you mean "torch._VF.lstm"', p.stderr)


LOADER = r"""
import sys, numpy as np, torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
data, target = torch.randn(64, 4), torch.randn(64, 1)
loader = DataLoader(TensorDataset(data, target), batch_size=16, shuffle=False)
m = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step, (xb, yb) in enumerate(loader):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(m(xb), yb)
    loss.backward()
    opt.step()
    print("step", step, loss.item().hex())
np.savez(sys.argv[1], data=data.numpy())
"""


class Loader(OpsCase):
    def test_batches_fetched_in_process_are_not_dumped(self):
        cfg = self.write_config(dt.config("./d", mode="mix", steps="all"))
        saw = self.run_both(LOADER, cfg)
        for step in range(4):
            recs = self.step_file("d", step)
            self.assertFalse([n for n in recs if n.startswith(("Tensor.__getitem__", "Torch.stack"))],
                             sorted(recs))
            dt.assert_same(self, recs["Functional.linear.0.forward"]["input.0"],
                           saw["data"][16 * step:16 * (step + 1)], "batch %d" % step)
            self.assertIn("Functional.mse_loss.0.forward", recs)
            self.assertIn("Module.Linear.forward.0", recs)


ONE = r"""
import sys, numpy as np, torch
torch.manual_seed(0)
m = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(3, 4)
out = m(x)
out.square().sum().backward()
opt.step()
print(out.sum().item().hex())
np.savez(sys.argv[1], x=x.numpy(), out=out.detach().numpy(), gw=m.weight.grad.numpy())
"""


class OneModule(OpsCase):
    def test_a_model_of_one_module_is_dumped(self):
        cfg = self.write_config(dt.config("./d", mode="module", steps="0"))
        saw = self.run_both(ONE, cfg)
        recs = self.step_file("d", 0)
        # the model's one module, and the optimizer step (a record at every level)
        self.assertEqual(set(recs), {"Module.Linear.forward.0", "Module.Linear.backward.0",
                                     "Optimizer.SGD.0.step"})
        f, b = recs["Module.Linear.forward.0"], recs["Module.Linear.backward.0"]
        dt.assert_same(self, f["input.0"], saw["x"], "input")
        dt.assert_same(self, f["output.0"], saw["out"], "output")
        # d(sum(out^2))/d out = 2 out
        dt.assert_same(self, b["input.0"], 2 * saw["out"], "grad of the output")


if __name__ == "__main__":
    unittest.main()
