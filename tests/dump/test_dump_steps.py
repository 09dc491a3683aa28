"""dump_iter selects exactly the steps asked for; call indices restart at each
step so two steps (and two runs) name their records alike; each step_trigger
ends steps where it says; api_type selects directions."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402


def names(path):
    recs, _ = dt.read_dump(path)
    return set(recs)


class DumpSteps(dt.ShimCase):
    def test_dump_iter_selects_exact_steps_and_indices_restart(self):
        cfg = self.write_config(dt.config("./d", steps="1|3"))
        self.train(["--steps", "5"], cfg)
        files = dt.dump_files(self.path("d"))
        self.assertEqual(sorted(files), [(1, 0), (3, 0)])
        n1, n3 = names(files[(1, 0)]), names(files[(3, 0)])
        self.assertEqual(n1, n3)
        for n in ("Functional.conv2d.0.forward", "Functional.conv2d.1.forward",
                  "Functional.conv2d.1.backward", "Torch.flatten.0.forward",
                  "Functional.cross_entropy.0.forward", "Functional.cross_entropy.0.backward"):
            self.assertIn(n, n1)
        self.assertNotIn("Functional.conv2d.2.forward", n1)
        # only outermost calls: cross_entropy's own log_softmax/nll_loss are not records
        self.assertNotIn("Functional.log_softmax.0.forward", n1)
        self.assertNotIn("Functional.nll_loss.0.forward", n1)
        # nothing of the shim's own tensor reads (detach) shows up
        self.assertFalse(any(n.startswith("Tensor.detach") for n in n1))
        recs, root = dt.read_dump(files[(3, 0)])
        self.assertEqual(int(root["step"]), 3)

    def test_range_and_two_runs_name_alike(self):
        cfg = self.write_config(dt.config("./a", steps="1-2"))
        self.train(["--steps", "4"], cfg)
        cfg2 = self.write_config(dt.config("./b", steps="1-2"), "b.json")
        self.train(["--steps", "4", "--bf16"], cfg2)
        fa, fb = dt.dump_files(self.path("a")), dt.dump_files(self.path("b"))
        self.assertEqual(sorted(fa), [(1, 0), (2, 0)])
        self.assertEqual(sorted(fb), [(1, 0), (2, 0)])
        na, nb = names(fa[(2, 0)]), names(fb[(2, 0)])
        for n in ("Functional.conv2d.1.forward", "Functional.linear.1.backward"):
            self.assertIn(n, na)
            self.assertIn(n, nb)

    def test_manual_trigger_only_counts_msprobe_step_calls(self):
        lst = [("torch.nn.functional.conv2d", "forward")]
        cfg = self.write_config(dt.config("./m", steps="all", trigger="manual", api_list=lst))
        self.train(["--steps", "3"], cfg)
        files = dt.dump_files(self.path("m"))
        self.assertEqual(sorted(files), [(0, 0)])
        self.assertEqual(names(files[(0, 0)]),
                         {"Functional.conv2d.%d.forward" % i for i in range(6)})
        cfg = self.write_config(dt.config("./m2", steps="all", trigger="manual", api_list=lst),
                                "m2.json")
        self.train(["--steps", "3", "--manual-step"], cfg)
        files = dt.dump_files(self.path("m2"))
        self.assertEqual(sorted(files), [(0, 0), (1, 0), (2, 0)])
        for f in files.values():
            self.assertEqual(names(f), {"Functional.conv2d.0.forward", "Functional.conv2d.1.forward"})

    def test_exported_msprobe_step_also_ends_steps_with_optimizer_trigger(self):
        lst = [("torch.nn.functional.conv2d", "forward")]
        cfg = self.write_config(dt.config("./o", steps="all", api_list=lst))
        self.train(["--steps", "2", "--manual-step"], cfg)
        # each iteration: optimizer.step() then msprobe_step(): two step ends
        self.assertEqual(sorted(dt.dump_files(self.path("o"))), [(0, 0), (2, 0)])

    def test_forward_trigger_ends_step_at_root_forward(self):
        lst = [("torch.nn.functional.conv2d", "all")]
        cfg = self.write_config(dt.config("./f", steps="0|1", trigger="forward", api_list=lst))
        self.train(["--steps", "2"], cfg)
        files = dt.dump_files(self.path("f"))
        self.assertEqual(names(files[(0, 0)]),
                         {"Functional.conv2d.0.forward", "Functional.conv2d.1.forward"})
        # the backward of the first forward runs in step 1
        self.assertEqual(names(files[(1, 0)]),
                         {"Functional.conv2d.0.forward", "Functional.conv2d.1.forward",
                          "Functional.conv2d.0.backward", "Functional.conv2d.1.backward"})

    def test_backward_trigger_and_api_type(self):
        lst = [("torch.nn.functional.linear", "backward"), ("torch.nn.functional.relu", "forward")]
        cfg = self.write_config(dt.config("./k", steps="1", trigger="backward", api_list=lst))
        self.train(["--steps", "3"], cfg)
        files = dt.dump_files(self.path("k"))
        self.assertEqual(sorted(files), [(1, 0)])
        self.assertEqual(names(files[(1, 0)]),
                         {"Functional.linear.0.backward", "Functional.linear.1.backward",
                          "Functional.relu.0.forward", "Functional.relu.1.forward",
                          "Functional.relu.2.forward"})

    def test_module_mode_names_by_dotted_suffix(self):
        cfg = self.write_config(dt.config("./mm", mode="module", steps="0",
                                          api_list=[("net.conv2", "all"), ("fc1", "forward")]))
        self.train(["--steps", "1"], cfg)
        files = dt.dump_files(self.path("mm"))
        self.assertEqual(names(files[(0, 0)]),
                         {"Module.conv2.Conv2d.forward.0", "Module.conv2.Conv2d.backward.0",
                          "Module.fc1.Linear.forward.0"})

    def test_seed_format_module_path_in_api_mode_dumps_that_module(self):
        # The seed's own example: api mode, comments, an API and a module path side by side.
        cfg = self.write_config("""{
  "dump": {
    "common_dump_settings": {
      "dump_mode": "api",            // "api" | "module" | "mix"
      "dump_path": "./seed",
      "dump_iter": "0"               /* the first step only */
    },
    "api_list": [
      { "name": "torch.nn.functional.conv2d", "api_type": "forward" },
      { "name": "my_model.conv2",             "api_type": "backward" }
    ]
  }
}""")
        self.train(["--steps", "2"], cfg)
        files = dt.dump_files(self.path("seed"))
        self.assertEqual(sorted(files), [(0, 0)])
        self.assertEqual(names(files[(0, 0)]),
                         {"Functional.conv2d.0.forward", "Functional.conv2d.1.forward",
                          "Module.conv2.Conv2d.backward.0"})

    def test_example_config_record_names(self):
        cfg = os.path.join(dt.SOURCE, "examples", "msprobe.json")
        self.train(["--steps", "3"], cfg)
        files = dt.dump_files(self.path("msprobe_dump_data"))
        self.assertEqual(sorted(files), [(0, 0), (2, 0)])
        expect = {"Functional.conv2d.%d.%s" % (i, d) for i in (0, 1) for d in ("forward", "backward")}
        expect |= {"Functional.linear.%d.%s" % (i, d) for i in (0, 1) for d in ("forward", "backward")}
        expect |= {"Functional.relu.%d.forward" % i for i in range(3)}
        expect |= {"Functional.cross_entropy.0.forward", "Functional.cross_entropy.0.backward",
                   "Module.conv1.Conv2d.forward.0", "Module.conv1.Conv2d.backward.0",
                   "Module.fc2.Linear.forward.0"}
        self.assertEqual(names(files[(2, 0)]), expect)



OS_EXIT = r"""
import os, sys
import numpy as np
import torch
import torch.nn.functional as F
torch.manual_seed(0)
m = torch.nn.Linear(4, 3)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(8, 4)
for step in range(2):
    opt.zero_grad()
    F.relu(m(x)).sum().backward()
    opt.step()
out = F.relu(m(x))                          # step 2: forward only, no optimizer.step()
np.save(sys.argv[1], out.detach().numpy())  # the value, as the script sees it
os._exit(int(sys.argv[2]))
"""


class OsExit(dt.ShimCase):
    def test_os_exit_writes_queued_steps_and_the_one_in_flight(self):
        cfg = dt.config("./d", steps="all")
        cfg["config_check"] = {"output_zip_path": "pack.zip"}
        cfg = self.write_config(cfg)
        p = self.run_cmd([dt.PYTHON, "-c", OS_EXIT, "expect.npy", "7"], cfg)
        self.assertEqual(p.returncode, 7, p.stderr)   # the script's own status
        self.assertEqual(p.stderr, "")
        files = dt.dump_files(self.path("d"))
        self.assertEqual(sorted(files), [(0, 0), (1, 0), (2, 0)])
        import h5py
        for key, path in files.items():
            with h5py.File(path, "r") as f:     # closed properly: /index lists every dataset
                n = sum(1 for g in f.values() if isinstance(g, h5py.Group) for _ in g)
                self.assertEqual(len(f["index"]), n, key)
        recs, _ = dt.read_dump(files[(2, 0)])
        self.assertLessEqual({"Functional.linear.0.forward", "Functional.relu.0.forward"}, set(recs))
        self.assertFalse([n for n in recs if n.endswith("backward")])
        dt.assert_same(self, recs["Functional.relu.0.forward"]["output.0"],
                       np.load(self.path("expect.npy")), "in-flight step's relu")
        # and the config_check pack, which the atexit handler would have written
        import zipfile
        with zipfile.ZipFile(self.path("pack.zip")) as z:
            self.assertIn("manifest.json", z.namelist())

    def test_os_exit_in_a_forked_child_leaves_the_parent_dumping(self):
        script = ("import os, torch\n"
                  "x = torch.ones(3)\n"
                  "pid = os.fork()\n"
                  "if pid == 0:\n"
                  "    torch.relu(x); os._exit(5)\n"
                  "_, st = os.waitpid(pid, 0)\n"
                  "torch.relu(x * 2)\n"
                  "print(os.waitstatus_to_exitcode(st) if hasattr(os, 'waitstatus_to_exitcode') "
                  "else st >> 8)\n")
        cfg = self.write_config(dt.config("./d", steps="all", trigger="manual"))
        p = self.run_cmd([dt.PYTHON, "-c", script], cfg)
        self.assertEqual((p.returncode, p.stderr, p.stdout.strip()), (0, "", "5"))
        recs, _ = dt.read_dump(dt.dump_files(self.path("d"))[(0, 0)])
        self.assertIn("Torch.relu.0.forward", recs)
        dt.assert_same(self, recs["Torch.relu.0.forward"]["output.0"],
                       np.full(3, 2.0, np.float32), "parent's relu after the child exited")


if __name__ == "__main__":
    unittest.main()
