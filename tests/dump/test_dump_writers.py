"""Which processes write, and one runtime: a spawn pool's children and the
resource tracker write neither dump nor pack; a second Python process run
after training never replaces a finished step (it gets rank0-1, with a
warning); the dump and config_check share one wrapper of Optimizer.__init__,
one set of global module hooks and one wrapper type. Files read with h5py and
zipfile."""
import json
import os
import sys
import unittest
import zipfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

POOL = r"""
import multiprocessing as mp, torch
def work(i):
    return float(torch.relu(torch.full((4,), float(i) - 1.5)).sum())
if __name__ == "__main__":
    torch.manual_seed(3)
    m = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = torch.ones(5, 4)
    for step in range(2):
        opt.zero_grad(); m(x).sum().backward(); opt.step()
        if step == 0:
            with mp.get_context("spawn").Pool(2) as p:
                print(p.map(work, range(4)))
    print("done")
"""

TRAIN2 = r"""
import torch
torch.manual_seed(0)
m = torch.nn.Linear(3, 2)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(2):
    opt.zero_grad(); m(torch.ones(4, 3)).sum().backward(); opt.step()
"""

AFTER = "import torch; torch.relu(torch.full((3,), 2.0)); torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1).step()"

INTROSPECT = r"""
import torch, torch.nn.modules.module as mm
init = torch.optim.Optimizer.__dict__["__init__"]
print(type(init).__name__, type(init.__wrapped__).__name__)
print(len(mm._global_forward_pre_hooks), len(mm._global_forward_hooks))
print(type(torch.manual_seed).__name__, type(torch.manual_seed.__wrapped__).__name__)
m = torch.nn.Linear(2, 2)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
m(torch.ones(1, 2)).sum().backward()
opt.step()
"""


class Writers(dt.ShimCase):
    def test_spawn_pool_children_and_resource_tracker_write_nothing(self):
        cfg = self.write_config({"dump": dt.config("./d", steps="all")["dump"],
                                 "config_check": {"output_zip_path": "pack.zip"}})
        script = self.path("pool.py")
        with open(script, "w") as f:
            f.write(POOL)
        plain = self.run_cmd([dt.PYTHON, script], preload=False)
        shim = self.run_cmd([dt.PYTHON, script], cfg)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertEqual((shim.returncode, shim.stderr), (0, ""))
        self.assertEqual(shim.stdout, plain.stdout)
        # relu(i - 1.5) summed over 4 elements, by hand
        self.assertIn(str([0.0, 0.0, 2.0, 6.0]), shim.stdout)
        self.assertEqual(sorted(os.listdir(self.path("d", "step0"))), ["rank0"])
        files = dt.dump_files(self.path("d"))
        self.assertEqual(sorted(files), [(0, 0), (1, 0)])
        for path in files.values():
            names = set(dt.read_dump(path)[0])
            self.assertIn("Functional.linear.0.forward", names)
            self.assertFalse(any(n.startswith("Torch.relu") for n in names), sorted(names))
        # the pack is the training process's: its weights and its seed
        with zipfile.ZipFile(self.path("pack.zip")) as z:
            weights = json.loads(z.read("weights.json"))["tensors"]
            calls = json.loads(z.read("random.json"))["calls"]
        self.assertEqual(sorted(w["name"] for w in weights), ["Linear.bias", "Linear.weight"])
        self.assertEqual([(c["api"], c["value"]) for c in calls], [("torch.manual_seed", "3")])

    def test_a_second_python_process_never_replaces_a_finished_step(self):
        cfg = self.write_config(dt.config("./d", steps="all"))
        with open(self.path("train2.py"), "w") as f:
            f.write(TRAIN2)
        p = self.run_cmd(["sh", "-c", "%s train2.py && %s -c '%s'" % (dt.PYTHON, dt.PYTHON, AFTER)],
                         cfg)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("writes rank0-1 instead", lines[0])
        first, _ = dt.read_dump(self.path("d", "step0", "rank0", "dump.h5"))
        self.assertIn("Functional.linear.0.forward", first)
        self.assertNotIn("Torch.relu.0.forward", first)
        w = first["Functional.linear.0.forward"]["input.1"]
        self.assertEqual(w.shape, (2, 3))
        self.assertTrue(os.path.exists(self.path("d", "step1", "rank0", "dump.h5")))
        second, root = dt.read_dump(self.path("d", "step0", "rank0-1", "dump.h5"))
        self.assertEqual(int(root["rank"]), 0)
        dt.assert_same(self, second["Torch.relu.0.forward"]["output.0"], np.full(3, 2.0, np.float32),
                       "second process's relu")
        self.assertEqual(sorted(os.listdir(self.path("d", "step0"))), ["rank0", "rank0-1"])

    def test_a_python_that_never_imports_torch_writes_no_pack(self):
        # like multiprocessing's resource tracker, run beside every training
        cfg = self.write_config({"config_check": {"output_zip_path": "pack.zip"}})
        p = self.run_cmd([dt.PYTHON, "-c", "import json; print(json.dumps([1]))"], cfg)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "[1]\n", ""))
        self.assertFalse(os.path.exists(self.path("pack.zip")))

    def test_a_python_that_imports_torch_but_trains_nothing_writes_no_pack(self):
        # like a compile worker or an evaluation helper started by the training
        cfg = self.write_config({"config_check": {"output_zip_path": "pack.zip"}})
        p = self.run_cmd([dt.PYTHON, "-c", "import torch; print((torch.ones(2) + 1).tolist())"], cfg)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "[2.0, 2.0]\n", ""))
        self.assertFalse(os.path.exists(self.path("pack.zip")))

    def test_one_wrapper_of_optimizer_init_and_one_set_of_module_hooks(self):
        cfg = self.write_config({"dump": dt.config("./d", mode="mix", steps="all")["dump"],
                                 "config_check": {"output_zip_path": "pack.zip"}})
        p = self.run_cmd([dt.PYTHON, "-c", INTROSPECT], cfg)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines()[:3],
                         ["Wrapper function", "1 1", "Wrapper function"])
        with zipfile.ZipFile(self.path("pack.zip")) as z:
            hyper = json.loads(z.read("hyperparameters.json"))
        self.assertEqual([o["class"] for o in hyper["optimizers"]], ["torch.optim.sgd.SGD"])
        self.assertEqual(hyper["optimizers"][0]["param_groups"][0]["lr"], 0.1)


if __name__ == "__main__":
    unittest.main()
