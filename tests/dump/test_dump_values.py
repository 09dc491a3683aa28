"""Dumped tensors equal, bit for bit, what examples/train.py records itself
through its own hooks (a path that does not involve the shim): forward and
backward of conv2d, linear, relu and cross_entropy, API and module records;
and the shim does not change a single loss."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

STEPS = 3
DUMPED = (0, 2)


class DumpValues(dt.ShimCase):
    def run_pair(self, extra):
        cfg = self.write_config(dt.config("./dump", mode="mix", steps="0|2"))
        with_shim = self.train(["--steps", str(STEPS), "--record", "rec", "--print-losses"] + extra,
                               cfg)
        without = self.train(["--steps", str(STEPS), "--print-losses"] + extra, preload=False)
        rec = np.load(self.path("rec", "record.npz"))
        return with_shim, without, rec

    def check_run(self, extra):
        with_shim, without, rec = self.run_pair(extra)
        self.assertEqual(len(dt.losses(without.stdout)), STEPS)
        self.assertEqual(dt.losses(with_shim.stdout), dt.losses(without.stdout),
                         "losses changed under the shim")
        self.assertNotIn("msprobe:", with_shim.stderr)
        files = dt.dump_files(self.path("dump"))
        self.assertEqual(sorted(files), [(s, 0) for s in DUMPED])
        for step in DUMPED:
            recs, root = dt.read_dump(files[(step, 0)])
            self.assertEqual(int(root["step"]), step)
            self.assertEqual(int(root["rank"]), 0)
            r = lambda key: rec["step%d/%s" % (step, key)]  # noqa: E731
            same = lambda name, role, key: dt.assert_same(  # noqa: E731
                self, recs[name][role], r(key), "step %d %s %s" % (step, name, role))
            # forward, API level
            same("Functional.conv2d.0.forward", "input.0", "input")
            same("Functional.conv2d.0.forward", "input.1", "conv1.weight")
            same("Functional.conv2d.0.forward", "input.2", "conv1.bias")
            same("Functional.conv2d.0.forward", "output.0", "conv1.out")
            same("Functional.relu.0.forward", "output.0", "relu1.out")
            same("Functional.conv2d.1.forward", "input.0", "relu1.out")
            same("Functional.conv2d.1.forward", "output.0", "conv2.out")
            same("Functional.relu.1.forward", "output.0", "relu2.out")
            same("Functional.linear.0.forward", "input.1", "fc1.weight")
            same("Functional.linear.0.forward", "output.0", "fc1.out")
            same("Functional.relu.2.forward", "output.0", "relu3.out")
            same("Functional.linear.1.forward", "input.0", "relu3.out")
            same("Functional.linear.1.forward", "output.0", "fc2.out")
            same("Functional.cross_entropy.0.forward", "input.0", "fc2.out")
            same("Functional.cross_entropy.0.forward", "output.0", "loss")
            # backward, API level: input.* = grads of the op's outputs,
            # output.* = grads of its inputs
            same("Functional.cross_entropy.0.backward", "output.0", "fc2.grad_out")
            same("Functional.linear.1.backward", "input.0", "fc2.grad_out")
            same("Functional.relu.2.backward", "input.0", "relu3.grad_out")
            same("Functional.relu.2.backward", "output.0", "fc1.grad_out")
            same("Functional.linear.0.backward", "input.0", "fc1.grad_out")
            same("Functional.linear.0.backward", "output.1", "fc1.weight.grad")
            same("Functional.linear.0.backward", "output.2", "fc1.bias.grad")
            same("Functional.conv2d.1.backward", "input.0", "conv2.grad_out")
            same("Functional.conv2d.1.backward", "output.0", "relu1.grad_out")
            same("Functional.conv2d.1.backward", "output.1", "conv2.weight.grad")
            same("Functional.conv2d.1.backward", "output.2", "conv2.bias.grad")
            same("Functional.conv2d.0.backward", "input.0", "conv1.grad_out")
            same("Functional.conv2d.0.backward", "output.1", "conv1.weight.grad")
            same("Functional.conv2d.0.backward", "output.2", "conv1.bias.grad")
            # the first conv's input needs no grad: recorded as the value None
            self.assertEqual(recs["Functional.conv2d.0.backward"]["attrs"]["output.0"], "None")
            g = recs["Functional.cross_entropy.0.backward"]["input.0"]
            self.assertEqual(float(g), 1.0)
            # module level
            same("Module.conv1.Conv2d.forward.0", "input.0", "input")
            same("Module.conv1.Conv2d.forward.0", "output.0", "conv1.out")
            same("Module.fc1.Linear.forward.0", "output.0", "fc1.out")
            same("Module.relu2.ReLU.forward.0", "output.0", "relu2.out")
            same("Module.fc2.Linear.backward.0", "input.0", "fc2.grad_out")
            same("Module.conv2.Conv2d.backward.0", "input.0", "conv2.grad_out")
            same("Module.conv2.Conv2d.backward.0", "output.0", "relu1.grad_out")
            # execution order: forward records come in the order the net runs
            order = {n: int(v["attrs"]["order"]) for n, v in recs.items()}
            self.assertLess(order["Functional.conv2d.0.forward"], order["Functional.conv2d.1.forward"])
            self.assertLess(order["Functional.linear.1.forward"],
                            order["Functional.cross_entropy.0.forward"])
            self.assertLess(order["Functional.cross_entropy.0.backward"],
                            order["Functional.conv2d.0.backward"])
            self.assertEqual(sorted(order.values()), list(range(len(order))))
        return files

    def test_fp32_forward_backward_bit_identical(self):
        files = self.check_run([])
        recs, _ = dt.read_dump(files[(0, 0)])
        t = recs["Functional.conv2d.0.forward"]["tattrs"]["output.0"]
        self.assertEqual(t["dtype"], "torch.float32")
        self.assertEqual(int(t["requires_grad"]), 1)
        # non-tensor arguments are string attributes (stride of the second conv)
        self.assertEqual(recs["Functional.conv2d.1.forward"]["attrs"]["input.3"], "(2, 2)")

    def test_bf16_autocast_values_and_dtype(self):
        files = self.check_run(["--bf16"])
        recs, _ = dt.read_dump(files[(0, 0)])
        self.assertEqual(recs["Functional.conv2d.0.forward"]["tattrs"]["output.0"]["dtype"],
                         "torch.bfloat16")
        self.assertEqual(recs["Functional.conv2d.0.forward"]["tattrs"]["input.0"]["dtype"],
                         "torch.float32")


INPLACE = r"""
import torch
torch.manual_seed(0)
w = torch.randn(3, 4, requires_grad=True)
for i in range(2):
    a = w * 2
    v = a.view(12); v.mul_(2)          # in-place writes through views of an op's output
    c = a[0]; c.zero_()
    y = a.t(); y.add_(1)
    torch.nn.functional.relu(a, inplace=True)
    loss = (a * a).sum()
    loss.backward()
print([x.hex() for x in w.grad.flatten().tolist()])
"""


USER_HOOKS = r"""
import sys, numpy as np, torch, torch.nn as nn
from torch.utils.hooks import RemovableHandle
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
full = []
m[2].register_full_backward_hook(lambda mod, gi, go: full.append(go[0].sum().item()))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(3, 4)
w = torch.randn(3, 2, requires_grad=True)
seen = []
for step in range(3):
    opt.zero_grad()
    before = RemovableHandle.next_id
    y = torch.mul(m(x), w)
    made = RemovableHandle.next_id - before  # the full backward hook's own handles
    h = y.grad_fn.register_hook(lambda gi, go: seen.append((step, go[0].detach().clone())))
    if step == 1:
        h.remove()                           # removed: not called in step 1
    before = RemovableHandle.next_id
    loss = (y * y).sum()
    loss.backward()
    opt.step()
    print("step", step, loss.item().hex(), "handles", made, RemovableHandle.next_id - before)
print("seen", [s for s, _ in seen], "full", [v.hex() for v in full])
np.save(sys.argv[1], seen[-1][1].numpy())
"""


class UserHooks(dt.ShimCase):
    def test_users_hooks_on_hooked_nodes_run_and_remove_and_ours_make_no_handles(self):
        # msprobe hooks each recorded call's grad_fn through its own
        # Function._register_hook (no RemovableHandle: the dearest part of a
        # record before); a user's hook on the same node, a removed one and a
        # module's full backward hook must behave as without the shim
        cfg = self.write_config(dt.config("./d", steps="all", trigger="manual", task="tensor"))
        plain = self.run_cmd([dt.PYTHON, "-c", USER_HOOKS, "plain.npy"], preload=False)
        shim = self.run_cmd([dt.PYTHON, "-c", USER_HOOKS, "shim.npy"], cfg)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertEqual((shim.returncode, shim.stderr), (0, ""))
        self.assertEqual(shim.stdout, plain.stdout)
        # (the equal outputs include each step's count of RemovableHandles
        # made: the full backward hook's own, and none of msprobe's)
        self.assertIn("seen [0, 2]", plain.stdout)
        self.assertIn("handles 2 0", plain.stdout)
        recs, _ = dt.read_dump(dt.dump_files(self.path("d"))[(0, 0)])
        mul = sorted(r for r in recs if r.startswith("Torch.mul.") and r.endswith(".backward"))
        self.assertEqual(len(mul), 3, sorted(recs))
        # the grad the user's hook saw in the last step is the record's input
        last = "Torch.mul.%d.backward" % max(int(r.split(".")[2]) for r in mul)
        dt.assert_same(self, recs[last]["input.0"], np.load(self.path("shim.npy")), last)


class InPlace(dt.ShimCase):
    def test_inplace_writes_on_views_run_unchanged_with_every_api_dumped(self):
        # one step on purpose: "manual" keeps the exit's "whole run was step 0" hint quiet
        cfg = self.write_config(dt.config("./d", steps="all", trigger="manual"))
        plain = self.run_cmd([dt.PYTHON, "-c", INPLACE], preload=False)
        shim = self.run_cmd([dt.PYTHON, "-c", INPLACE], cfg)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertEqual((shim.returncode, shim.stderr), (0, ""))
        self.assertEqual(shim.stdout, plain.stdout)
        recs, _ = dt.read_dump(dt.dump_files(self.path("d"))[(0, 0)])
        # a * a: one input used twice; its grad is 2 * a * grad
        g = recs["Tensor.__mul__.1.backward"]
        dt.assert_same(self, g["output.0"], 2 * g["input.0"] * recs["Tensor.__mul__.1.forward"]["input.0"],
                       "grad of a*a")


INPLACE_MODEL = r"""
import torch, torch.nn as nn
torch.manual_seed(0)
m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(inplace=True), nn.Conv2d(4, 4, 3),
                  nn.BatchNorm2d(4), nn.ReLU(inplace=True))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(2, 3, 8, 8)
seen = {}
def keep_grad(mod, i, o):
    o.register_hook(lambda g: seen.__setitem__("g", g.detach().numpy().copy()))
m[2].register_forward_hook(keep_grad)
for step in range(2):
    opt.zero_grad()
    loss = m(x).square().sum()
    loss.backward()
    opt.step()
    print(loss.item().hex())
import numpy as np, sys
np.save(sys.argv[1], seen["g"])
"""


class InPlaceModules(dt.ShimCase):
    def test_module_mode_backward_with_inplace_relu_after_conv(self):
        cfg = self.write_config(dt.config("./d", mode="module", steps="1"))
        plain = self.run_cmd([dt.PYTHON, "-c", INPLACE_MODEL, "plain.npy"], preload=False)
        shim = self.run_cmd([dt.PYTHON, "-c", INPLACE_MODEL, "shim.npy"], cfg)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertEqual((shim.returncode, shim.stderr), (0, ""))
        self.assertEqual(shim.stdout, plain.stdout)
        recs, _ = dt.read_dump(dt.dump_files(self.path("d"))[(1, 0)])
        self.assertIn("Module.0.Conv2d.forward.0", recs)
        # grad reaching the second conv's output, as the script saw it itself
        g = np.load(self.path("shim.npy"))
        dt.assert_same(self, recs["Module.2.Conv2d.backward.0"]["input.0"], g, "conv 2 output grad")
        dt.assert_same(self, recs["Module.3.BatchNorm2d.backward.0"]["output.0"], g,
                       "batchnorm input grad")


JIT = r"""
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(4, 4)
    def forward(self, x):
        return F.relu(self.l(x)) + torch.matmul(x, x.t()).sum()
m = M()
scripted = torch.jit.script(m)
x = torch.ones(2, 4)
print(scripted(x).sum().item().hex(), m(x).sum().item().hex())
"""


class TorchScript(dt.ShimCase):
    def test_jit_script_compiles_and_eager_calls_are_still_dumped(self):
        cfg = self.write_config(dt.config("./d", steps="all", trigger="manual"))
        script = self.path("jit_model.py")  # TorchScript reads the source file
        with open(script, "w") as f:
            f.write(JIT)
        plain = self.run_cmd([dt.PYTHON, script], preload=False)
        shim = self.run_cmd([dt.PYTHON, script], cfg)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertEqual((shim.returncode, shim.stderr), (0, ""))
        self.assertEqual(shim.stdout, plain.stdout)
        recs, _ = dt.read_dump(dt.dump_files(self.path("d"))[(0, 0)])
        # only the eager call goes through Python APIs
        self.assertIn("Functional.relu.0.forward", recs)
        self.assertNotIn("Functional.relu.1.forward", recs)


LAYOUTS = r"""
import sys
import numpy as np
import torch
torch.manual_seed(0)
base = torch.randn(6, 8) * 100
cases = {}
for name in ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
             "uint8", "bool"]:
    x = base > 0 if name == "bool" else base.to(getattr(torch, name))
    cases[name + ".t"] = x.t()                 # transposed
    cases[name + ".step"] = x[::2, 1::3]       # strided, with a storage offset
    cases[name + ".offset"] = x[1:3]           # contiguous, with a storage offset
cases["expand"] = torch.arange(4.).view(4, 1).expand(4, 5)  # stride 0
cases["empty"] = torch.empty(0, 3)
cases["empty_t"] = torch.empty(3, 0).t()
cases["scalar"] = torch.tensor(2.5)
cases["permute"] = torch.randn(2, 3, 4).permute(2, 0, 1)
cases["requires_grad_t"] = torch.randn(3, 4, requires_grad=True).t()
saved = {}
for k, v in cases.items():
    torch.clone(v)
    a = v.detach()
    saved[k] = (a.float() if a.dtype == torch.bfloat16 else a).numpy().copy()
np.savez(sys.argv[1], **saved)
"""


class Layouts(dt.ShimCase):
    def test_every_dtype_strided_offset_empty_and_scalar_inputs_bit_identical(self):
        # CPU tensors are read in place (py_tensor.c's direct read); under
        # MSPROBE_TEST_HOST_COPY the same tensors take the DLPack host-copy path
        cfg = self.write_config(dt.config("./d", steps="all", trigger="manual"))
        shim = self.run_cmd([dt.PYTHON, "-c", LAYOUTS, "rec.npz"], cfg)
        self.assertEqual((shim.returncode, shim.stderr), (0, ""))
        rec = np.load(self.path("rec.npz"))
        recs, _ = dt.read_dump(dt.dump_files(self.path("d"))[(0, 0)])
        for i, key in enumerate(rec.files):
            with self.subTest(case=key):
                name = "Torch.clone.%d.forward" % i
                dt.assert_same(self, recs[name]["input.0"], rec[key], name + " " + key)
                want = "torch." + (key.split(".")[0] if "." in key else "float32")
                self.assertEqual(recs[name]["tattrs"]["input.0"]["dtype"], want)
                self.assertEqual(recs[name]["tattrs"]["input.0"]["device"], "cpu")
        self.assertEqual(len(rec.files), 36)


REREAD = r"""
import sys
import numpy as np
import torch
import torch.nn.functional as F
torch.manual_seed(0)
w = torch.randn(6, 4)
x = torch.randn(3, 4)
saved = {}
def keep(key, t):
    saved[key] = t.detach().numpy().copy()
for i in range(3):                 # the same weight, read by three calls
    keep("w%d" % i, w)
    y = F.linear(x, w)             # Functional.linear.i  input.1 = w
    keep("y%d" % i, y)
    z = F.relu(y)                  # Functional.relu.i    input.0 = y, as written
    keep("z%d" % i, z)
w.numpy()[0, 0] += 1.0             # bytes change through numpy: no torch call, no version bump
keep("w3", w)
F.linear(x, w)                     # Functional.linear.3
y.numpy()[1, 2] = 7.0              # y changes through a numpy view
keep("y4", y)
F.relu(y)                          # Functional.relu.3
e = torch.zeros(2, 2)
f = torch.zeros(2, 2)              # equal bytes elsewhere
F.relu(e); F.relu(f)               # Functional.relu.4, .5
np.savez(sys.argv[1], **saved)
"""


class Reread(dt.ShimCase):
    def test_tensors_read_again_dump_their_bytes_at_each_read(self):
        # A tensor read again with the same bytes shares the earlier copy
        # (py_tensor.c); changed bytes, with or without a version bump, are
        # copied again. Each read against what the script saw itself.
        cfg = self.write_config(dt.config("./d", steps="all", trigger="manual"))
        shim = self.run_cmd([dt.PYTHON, "-c", REREAD, "rec.npz"], cfg)
        self.assertEqual((shim.returncode, shim.stderr), (0, ""))
        rec = np.load(self.path("rec.npz"))
        recs, _ = dt.read_dump(dt.dump_files(self.path("d"))[(0, 0)])
        same = lambda name, role, key: dt.assert_same(  # noqa: E731
            self, recs[name][role], rec[key], "%s %s" % (name, role))
        for i in range(3):
            same("Functional.linear.%d.forward" % i, "input.1", "w%d" % i)
            same("Functional.linear.%d.forward" % i, "output.0", "y%d" % i)
            same("Functional.relu.%d.forward" % i, "input.0", "y%d" % i)
            same("Functional.relu.%d.forward" % i, "output.0", "z%d" % i)
        same("Functional.linear.3.forward", "input.1", "w3")
        same("Functional.relu.3.forward", "input.0", "y4")
        self.assertNotEqual(rec["w3"].tobytes(), rec["w2"].tobytes())
        self.assertNotEqual(rec["y4"].tobytes(), rec["y2"].tobytes())
        for i in (4, 5):
            dt.assert_same(self, recs["Functional.relu.%d.forward" % i]["input.0"],
                           np.zeros((2, 2), np.float32), "relu.%d zeros" % i)


if __name__ == "__main__":
    unittest.main()
