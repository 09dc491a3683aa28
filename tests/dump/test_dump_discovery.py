"""The API list comes from the running torch, and api_list may name any
importable callable: checked under the real preload shim in real training,
dumps read back with h5py, values recomputed with numpy."""
import math
import os
import re
import subprocess
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

MSPROBE = os.environ.get("MSPROBE_BIN", "")

# What msprobe-dump(5) says each namespace's records are called.
PREFIX = [("torch.nn.functional.", "Functional"), ("torch.Tensor.", "Tensor"),
          ("torch.distributed.", "Distributed"), ("torch._VF.", "VF"), ("torch.", "Torch")]


def record_prefix(name):
    for path, pre in PREFIX:
        if name.startswith(path) and "." not in name[len(path):]:
            return pre + "." + name[len(path):]
    return None


def table_names():
    """The committed fallback table, read from its C source."""
    with open(os.path.join(dt.SOURCE, "src", "dump", "api_table.c")) as f:
        return re.findall(r'^    "([^"]+)",$', f.read(), re.M)


# A sitecustomize run before the script: torch is imported and changed before
# the shim boots, the way a newer torch would differ.
NEW_API = r"""
import torch, torch.nn.functional as F, torch.overrides as ov
def mirror_pad_sum(x, w):
    return torch.cat([x, x.flip(-1)], -1) @ w
F.mirror_pad_sum = mirror_pad_sum
_orig = ov.get_testing_overrides
def get_testing_overrides():
    d = dict(_orig())
    d[mirror_pad_sum] = lambda x, w: -1
    return d
ov.get_testing_overrides = get_testing_overrides
"""
BROKEN_OVERRIDES = r"""
import torch, torch.overrides as ov
def get_testing_overrides():
    raise RuntimeError("no overrides in this build")
ov.get_testing_overrides = get_testing_overrides
"""
NEW_API_TRAIN = r"""
import numpy as np, torch, torch.nn.functional as F
torch.manual_seed(0)
x = torch.randn(3, 4)
w = torch.randn(8, 2, requires_grad=True)
out = F.mirror_pad_sum(x, w)
np.save("x.npy", x.numpy()); np.save("w.npy", w.detach().numpy())
out.sum().backward()
y = F.relu(x)
"""

FAKE_NPU = r'''
"""A torch_npu stand-in: a fused kernel implemented in torch."""
import torch

def npu_rms_norm(x, gamma, epsilon=1e-6):
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + epsilon)
    return x * rstd * gamma, rstd
'''
USER_OPS = r'''
import torch

def scaled_gelu(x, scale):
    return torch.nn.functional.gelu(x) * scale

def cube(x):
    return x * x * x
'''
# Binds the vendor function by name while userpkg.model is being imported.
USER_MODEL = r'''
import torch
from torch_npu import npu_rms_norm
from userpkg import ops

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 5)
        self.gamma = torch.nn.Parameter(torch.linspace(0.5, 1.5, 5))

    def forward(self, x):
        h, _ = npu_rms_norm(self.fc(x), self.gamma)
        return ops.scaled_gelu(h, 1.5)
'''
CUSTOM_TRAIN = r"""
import numpy as np, torch
torch.manual_seed(0)
from userpkg.model import Net
import userpkg.ops as ops
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(2):
    x = torch.randn(4, 6)
    loss = net(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step", step, repr(loss.item()))
print("wrapped", "msprobe" in repr(ops.scaled_gelu))
"""


def gelu(a):
    return 0.5 * a * (1.0 + np.vectorize(math.erf)(a / math.sqrt(2.0)))


@unittest.skipUnless(MSPROBE, "MSPROBE_BIN not set (run through ctest)")
class ListApis(dt.ShimCase):
    def list_apis(self, env_extra=None, python=dt.PYTHON):
        env = dict(os.environ, **(env_extra or {}))
        env.pop("MSPROBE_PATH", None)
        env["MSPROBE_PRELOAD_LIB"] = dt.PRELOAD
        return subprocess.run([MSPROBE, "dump", "--list-apis", "--", python], cwd=self.dir,
                              env=env, capture_output=True, text=True, timeout=300)

    def test_discovery_on_this_torch_reproduces_the_table(self):
        p = self.list_apis()
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        if not lines[0].startswith("# torch 1.13"):  # a GPU machine's torch 2.x, say
            self.skipTest("the table was generated from torch 1.13; this is " + lines[0])
        self.assertRegex(lines[0], r"^# torch 1\.13.*: %d APIs, discovered at run time in "
                         r"[0-9.]+ ms$" % len(table_names()))
        rows = [l.split("\t") for l in lines if not l.startswith("#")]
        self.assertEqual([r[0] for r in rows], sorted(table_names()))
        self.assertEqual([r[1] for r in rows], [record_prefix(n) for n in sorted(table_names())])

    def test_list_follows_the_running_torch(self):
        with open(self.path("sitecustomize.py"), "w") as f:
            f.write(NEW_API)
        p = self.list_apis({"PYTHONPATH": self.dir})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("torch.nn.functional.mirror_pad_sum\tFunctional.mirror_pad_sum\n", p.stdout)

    def test_python_without_torch_fails(self):
        with open(self.path("torch.py"), "w") as f:
            f.write("raise ImportError('no torch here')\n")
        p = self.list_apis({"PYTHONPATH": self.dir})
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stdout, "")
        self.assertIn("found no torch", p.stderr)


class Discovery(dt.ShimCase):
    def test_api_of_a_newer_torch_is_accepted_and_dumped(self):
        with open(self.path("sitecustomize.py"), "w") as f:
            f.write(NEW_API)
        cfg = self.write_config(dt.config("./d", trigger="manual", api_list=[
            ("torch.nn.functional.mirror_pad_sum", "all")]))
        p = self.run_cmd([dt.PYTHON, "-c", NEW_API_TRAIN], cfg, env_extra={"PYTHONPATH": self.dir})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        recs, _ = dt.read_dump(dt.dump_files(self.path("d"))[(0, 0)])
        self.assertEqual(set(recs), {"Functional.mirror_pad_sum.0.forward",
                                     "Functional.mirror_pad_sum.0.backward"})
        x, w = np.load(self.path("x.npy")), np.load(self.path("w.npy"))
        fwd = recs["Functional.mirror_pad_sum.0.forward"]
        dt.assert_same(self, fwd["input.0"], x, "x")
        want = np.concatenate([x, x[:, ::-1]], -1).astype(np.float64) @ w.astype(np.float64)
        np.testing.assert_allclose(fwd["output.0"], want, rtol=1e-5, atol=1e-5)
        # d(sum(out))/dw = column sums of the padded x, repeated per output column
        bwd = recs["Functional.mirror_pad_sum.0.backward"]
        gw = np.repeat(np.concatenate([x, x[:, ::-1]], -1).sum(0)[:, None], 2, 1)
        np.testing.assert_allclose(bwd["output.1"], gw, rtol=1e-5, atol=1e-5)

    def test_failed_discovery_falls_back_to_the_table_with_one_warning(self):
        with open(self.path("sitecustomize.py"), "w") as f:
            f.write(BROKEN_OVERRIDES)
        cfg = self.write_config(dt.config("./d", trigger="manual",
                                          api_list=[("torch.nn.functional.relu", "forward")]))
        p = self.run_cmd([dt.PYTHON, "-c", "import torch, torch.nn.functional as F\n"
                          "for i in range(3): F.relu(torch.ones(2) * i)"], cfg,
                         env_extra={"PYTHONPATH": self.dir})
        self.assertEqual(p.returncode, 0, p.stderr)
        warn = [l for l in p.stderr.splitlines() if l.startswith("msprobe:")]
        self.assertEqual(len(warn), 1, p.stderr)
        self.assertIn("built-in list of torch 1.13", warn[0])
        self.assertIn("no overrides in this build", warn[0])
        recs, _ = dt.read_dump(dt.dump_files(self.path("d"))[(0, 0)])
        self.assertEqual(set(recs), {"Functional.relu.%d.forward" % i for i in range(3)})
        dt.assert_same(self, recs["Functional.relu.2.forward"]["output.0"],
                       np.full(2, 2, np.float32), "relu(2)")


class Callables(dt.ShimCase):
    def write_packages(self):
        os.makedirs(self.path("pkgs", "torch_npu"))
        os.makedirs(self.path("pkgs", "userpkg"))
        for rel, text in ((("torch_npu", "__init__.py"), FAKE_NPU),
                          (("userpkg", "__init__.py"), ""), (("userpkg", "ops.py"), USER_OPS),
                          (("userpkg", "model.py"), USER_MODEL)):
            with open(self.path("pkgs", *rel), "w") as f:
                f.write(text)
        return {"PYTHONPATH": self.path("pkgs")}

    def test_vendor_and_user_functions_dumped_by_name(self):
        env = self.write_packages()
        cfg = self.write_config(dt.config("./d", api_list=[
            ("torch_npu.npu_rms_norm", "all"), ("userpkg.ops.scaled_gelu", "forward"),
            ("userpkg.ops.no_such_fn", "all"), ("nosuchpkg.fn", "forward")]))
        p = self.run_cmd([dt.PYTHON, "-c", CUSTOM_TRAIN], cfg, env_extra=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        plain = self.run_cmd([dt.PYTHON, "-c", CUSTOM_TRAIN], preload=False, env_extra=env)
        self.assertEqual(p.stdout.replace("wrapped True", "wrapped False"), plain.stdout)
        self.assertIn("wrapped True", p.stdout)
        # One warning at exit, naming exactly the entries that never resolved.
        warn = [l for l in p.stderr.splitlines() if l.startswith("msprobe:")]
        self.assertEqual(len(warn), 1, p.stderr)
        self.assertIn('"userpkg.ops.no_such_fn"', warn[0])
        self.assertIn('"nosuchpkg.fn"', warn[0])
        self.assertNotIn("npu_rms_norm", warn[0])
        self.assertNotIn("scaled_gelu", warn[0])
        files = dt.dump_files(self.path("d"))
        self.assertEqual(set(files), {(0, 0), (1, 0)})
        for step in (0, 1):
            recs, _ = dt.read_dump(files[(step, 0)])
            # Only the outermost call: what the custom functions call inside is not recorded.
            self.assertEqual(set(recs), {"NPU.npu_rms_norm.0.forward",
                                         "NPU.npu_rms_norm.0.backward",
                                         "Custom.userpkg.ops.scaled_gelu.0.forward"})
            f = recs["NPU.npu_rms_norm.0.forward"]
            x = f["input.0"].astype(np.float64)
            g = f["input.1"].astype(np.float64)
            if step == 0:  # gamma as created; step 1 sees it after one SGD update
                np.testing.assert_allclose(g, np.linspace(0.5, 1.5, 5), rtol=0, atol=1e-7)
            rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
            np.testing.assert_allclose(f["output.0"], x * rstd * g, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(f["output.1"], rstd, rtol=1e-5, atol=1e-6)
            self.assertEqual(f["tattrs"]["output.0"]["device"], "cpu")
            gl = recs["Custom.userpkg.ops.scaled_gelu.0.forward"]
            np.testing.assert_allclose(gl["input.0"], f["output.0"], rtol=0, atol=0)
            self.assertEqual(gl["attrs"].get("input.1"), "1.5")
            np.testing.assert_allclose(gl["output.0"], gelu(f["output.0"].astype(np.float64)) * 1.5,
                                       rtol=1e-5, atol=1e-6)
            # loss = mean(out^2): its grads flow back into the rms norm: check the
            # grad of gamma, sum over rows of dy * x * rstd, from the recorded dy.
            b = recs["NPU.npu_rms_norm.0.backward"]
            dy = b["input.0"].astype(np.float64)
            np.testing.assert_allclose(b["output.1"], (dy * x * rstd).sum(0), rtol=1e-4,
                                       atol=1e-6)
            out = gl["output.0"].astype(np.float64)
            h = f["output.0"].astype(np.float64)
            dgelu = 0.5 * (1 + np.vectorize(math.erf)(h / math.sqrt(2))) + \
                h * np.exp(-h * h / 2) / math.sqrt(2 * math.pi)
            np.testing.assert_allclose(dy, 2 * out / out.size * 1.5 * dgelu, rtol=1e-4, atol=1e-7)

    def test_class_method_and_module_path_entries(self):
        env = self.write_packages()
        with open(self.path("pkgs", "userpkg", "blocks.py"), "w") as f:
            f.write("import torch\nclass Scaler:\n    def __init__(self, s):\n        self.s = s\n"
                    "    def apply(self, x):\n        return x * self.s\n")
        cfg = self.write_config(dt.config("./d", trigger="manual", api_list=[
            ("userpkg.blocks.Scaler.apply", "forward"), ("net.fc", "forward"),
            ("userpkg.ops.cube", "forward")]))
        script = ("import torch\nfrom userpkg.blocks import Scaler\nimport importlib\n"
                  "net = torch.nn.Sequential()\nnet.add_module('fc', torch.nn.Linear(2, 2))\n"
                  "y = Scaler(3.0).apply(torch.ones(2))\nz = net(torch.ones(1, 2))\n")
        p = self.run_cmd([dt.PYTHON, "-c", script], cfg, env_extra=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        warn = [l for l in p.stderr.splitlines() if l.startswith("msprobe:")]
        # userpkg.ops was never imported: cube is reported; net.fc named a module.
        self.assertEqual(len(warn), 1, p.stderr)
        self.assertIn('"userpkg.ops.cube"', warn[0])
        self.assertNotIn("net.fc", warn[0])
        self.assertNotIn("Scaler", warn[0])
        recs, _ = dt.read_dump(dt.dump_files(self.path("d"))[(0, 0)])
        r = recs["Custom.userpkg.blocks.Scaler.apply.0.forward"]
        dt.assert_same(self, r["input.1"], np.ones(2, np.float32), "x")
        dt.assert_same(self, r["output.0"], np.full(2, 3.0, np.float32), "3x")


# torch.compile as torch >= 2.0 has it, on the torch 1.13 these tests run with.
FAKE_COMPILE = r"""
import torch
def compile(model=None, **kw):
    return model
torch.compile = compile
"""


class Compile(dt.ShimCase):
    def test_compiled_regions_reported_once_and_left_alone(self):
        with open(self.path("sitecustomize.py"), "w") as f:
            f.write(FAKE_COMPILE)
        cfg = self.write_config(dt.config("./d", trigger="manual",
                                          api_list=[("torch.nn.functional.relu", "forward")]))
        script = ("import torch, torch.nn.functional as F\n"
                  "net = torch.nn.Linear(2, 2)\n"
                  "for i in range(3):\n"
                  "    assert torch.compile(net, mode='default') is net\n"
                  "F.relu(torch.ones(2))\n")
        p = self.run_cmd([dt.PYTHON, "-c", script], cfg, env_extra={"PYTHONPATH": self.dir})
        self.assertEqual(p.returncode, 0, p.stderr)
        warn = [l for l in p.stderr.splitlines() if l.startswith("msprobe:")]
        self.assertEqual(len(warn), 1, p.stderr)
        self.assertIn("torch.compile", warn[0])
        self.assertIn("not visible", warn[0])
        recs, _ = dt.read_dump(dt.dump_files(self.path("d"))[(0, 0)])
        self.assertEqual(set(recs), {"Functional.relu.0.forward"})


if __name__ == "__main__":
    unittest.main()
