"""The selection forms of msprobe's config.json that msprobe's docs show,
driving a real dump under the real preload shim: "list" with a name fragment
("relu": every API, and at L0 and mix every module, whose record name holds
it), "scope" ranges (two record names: what runs from the first to the
last), and dump_enable turned true while the run goes on (the file is read
again at each step's end, as msprobe 26 rereads it). Which records were
written is read back with h5py; the expected sets are written out by hand
from the script below and msprobe's rules (docs/en/dump/config_json_introduct.md,
python/msprobe/core/dump/data_dump/scope.py of msprobe 26), and each was
also what msprobe 26 itself wrote for the same script and config (run from
its sources with its PrecisionDebugger, torch 1.13), but for the module
backward records it does not write on torch 1.13 and the one difference the
mix scope test names."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

SCRIPT = r'''
import json, sys, time
import torch, torch.nn as nn, torch.nn.functional as F

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU()
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        h = self.act(self.fc(x))        # Functional.linear.0, Functional.relu.0 in Module.act
        h = F.leaky_relu(h, 0.1)         # Functional.leaky_relu.0
        h = torch.sigmoid(h)             # Torch.sigmoid.0
        return self.out(h)               # Functional.linear.1 in Module.out

torch.manual_seed(0)
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(3, 4), torch.randn(3, 2)
import os
CONFIG = os.path.abspath("config.json")
if "cd" in sys.argv:                                 # the script changes directory first
    os.makedirs("elsewhere", exist_ok=True)
    os.chdir("elsewhere")
flips = dict(a.split("=") for a in sys.argv[1:] if "=" in a)  # step=true|false: set dump_enable
dbg = None
if "dbg" in sys.argv:                                # msprobe's PrecisionDebugger drives the steps
    from msprobe.pytorch import PrecisionDebugger
    dbg = PrecisionDebugger(config_path="config.json")
for step in range(8):
    if str(step) in flips:
        with open(CONFIG) as f:
            cfg = json.load(f)
        cfg["dump_enable"] = flips[str(step)] == "true"
        time.sleep(0.01)
        with open(CONFIG, "w") as f:
            json.dump(cfg, f)
    if dbg:
        dbg.start(net)
    opt.zero_grad()
    loss = F.mse_loss(net(x), y)
    loss.backward()
    opt.step()
    if dbg:
        dbg.stop()
        dbg.step()
'''


def fb(*names):
    """Each name's forward and backward record."""
    return {n + "." + d for n in names for d in ("forward", "backward")}


class MsprobeSelection(dt.ShimCase):
    def dump(self, cfg, *flips):
        out = self.path("out%d" % len(os.listdir(self.dir)))  # a new one each run
        cfg = dict({"task": "tensor", "dump_path": out, "rank": []}, **cfg)
        path = self.write_config(cfg, name="config.json")
        with open(self.path("t.py"), "w") as f:
            f.write(SCRIPT)
        p = self.run_cmd([dt.PYTHON, "t.py", *flips], path)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        steps = {}
        for (step, rank), h5 in dt.dump_files(out).items():
            recs, _ = dt.read_dump(h5)
            steps[step] = set(recs)
        return p, steps

    def records(self, level, task_keys, step=0):
        p, steps = self.dump({"level": level, "step": [step], "tensor": task_keys})
        self.assertEqual(sorted(steps), [step], p.stderr)
        return p, steps[step]

    # ---- list: a name fragment ------------------------------------------------

    def test_list_fragment_at_l1_selects_every_api_whose_name_holds_it(self):
        p, recs = self.records("L1", {"list": ["relu"]})
        self.assertEqual(recs, fb("Functional.relu.0", "Functional.leaky_relu.0"))
        self.assertNotIn("never dumped", p.stderr)

    def test_list_fragment_at_l0_selects_modules_only(self):
        # msprobe matches with Python's `in`: case counts ("relu" is not in
        # "Module.act.ReLU.forward.0"), and at L0 no API is recorded
        _, recs = self.records("L0", {"list": ["relu", "ReLU"]})
        self.assertEqual(recs, {"Module.act.ReLU.forward.0", "Module.act.ReLU.backward.0"})

    def test_list_fragment_at_mix_selects_apis_and_modules(self):
        _, recs = self.records("mix", {"list": ["relu", "ReLU"]})
        self.assertEqual(recs, fb("Functional.relu.0", "Functional.leaky_relu.0") |
                         {"Module.act.ReLU.forward.0", "Module.act.ReLU.backward.0"})
        # a module the fragment names dumps everything that runs inside it
        _, recs = self.records("mix", {"list": ["out"]})
        self.assertEqual(recs, fb("Functional.linear.1") |
                         {"Module.out.Linear.forward.0", "Module.out.Linear.backward.0"})

    def test_list_fragment_naming_nothing_is_warned(self):
        p, steps = self.dump({"level": "L1", "step": [0], "tensor": {"list": ["relux"]}})
        self.assertEqual(steps, {})
        self.assertIn('tensor.list[0] "relux" (no API of this torch has a name that holds it)',
                      p.stderr)

    # ---- scope: a range of records ---------------------------------------------

    def test_scope_at_l1_dumps_the_forward_apis_between_two_names(self):
        _, recs = self.records("L1", {"scope": ["Functional.linear.0.forward",
                                                "Torch.sigmoid.0.forward"]})
        self.assertEqual(recs, {"Functional.linear.0.forward", "Functional.relu.0.forward",
                                "Functional.leaky_relu.0.forward", "Torch.sigmoid.0.forward"})

    def test_scope_at_l0_dumps_the_modules_between_two_names(self):
        _, recs = self.records("L0", {"scope": ["Module.act.ReLU.forward.0",
                                                "Module.out.Linear.forward.0"]})
        self.assertEqual(recs, {"Module.act.ReLU.forward.0", "Module.out.Linear.forward.0"})

    def test_scope_at_mix_mixes_module_and_api_names(self):
        # from the ReLU module's start to linear.1's call, what runs inside
        # Module.out (linear.1) included
        _, recs = self.records("mix", {"scope": ["Module.act.ReLU.forward.0",
                                                 "Functional.linear.1.forward"]})
        self.assertEqual(recs, {"Module.act.ReLU.forward.0", "Functional.relu.0.forward",
                                "Functional.leaky_relu.0.forward", "Torch.sigmoid.0.forward",
                                "Module.out.Linear.forward.0", "Functional.linear.1.forward"})
        # a module as the last name closes the range when it starts at mix
        # (msprobe 26's MixRangeScope): its record in, what runs inside it out.
        # (msprobe 26 also writes Module.fc's outputs: it started before
        # linear.0 and ended inside the range; a module is in here when it
        # starts inside, msprobe.json(5).)
        _, recs = self.records("mix", {"scope": ["Functional.linear.0.forward",
                                                 "Module.act.ReLU.forward.0"]})
        self.assertEqual(recs, {"Functional.linear.0.forward", "Module.act.ReLU.forward.0"})

    def test_scope_reaching_into_the_backward_pass(self):
        # from linear.1's call to linear.0's backward: the forward calls from
        # linear.1 on, and every backward record made before linear.0's
        # (msprobe 26 wrote the same, but for Torch.ones_like, which it does
        # not wrap)
        _, recs = self.records("L1", {"scope": ["Functional.linear.1.forward",
                                                "Functional.linear.0.backward"]})
        self.assertEqual(recs, {"Functional.linear.1.forward", "Functional.mse_loss.0.forward",
                                "Torch.ones_like.0.forward"} |
                         {n + ".backward" for n in (
                             "Functional.mse_loss.0", "Functional.linear.1", "Torch.sigmoid.0",
                             "Functional.leaky_relu.0", "Functional.relu.0",
                             "Functional.linear.0")})
        # two backward names: backward records only
        _, recs = self.records("L1", {"scope": ["Functional.leaky_relu.0.backward",
                                                "Functional.linear.0.backward"]})
        self.assertEqual(recs, {"Functional.leaky_relu.0.backward", "Functional.relu.0.backward",
                                "Functional.linear.0.backward"})

    def test_list_beside_a_scope_filters_the_range(self):
        # each as msprobe 26 wrote it for the same script and config
        _, recs = self.records("L1", {"scope": ["Functional.linear.0.forward",
                                                "Torch.sigmoid.0.forward"], "list": ["relu"]})
        self.assertEqual(recs, {"Functional.relu.0.forward", "Functional.leaky_relu.0.forward"})
        _, recs = self.records("L0", {"scope": ["Module.fc.Linear.forward.0",
                                                "Module.out.Linear.forward.0"], "list": ["act"]})
        self.assertEqual(recs, {"Module.act.ReLU.forward.0"})
        # at mix a module the list names lets what runs inside it through
        _, recs = self.records("mix", {"scope": ["Module.fc.Linear.forward.0",
                                                 "Functional.linear.1.forward"], "list": ["act"]})
        self.assertEqual(recs, {"Module.act.ReLU.forward.0", "Functional.relu.0.forward"})
        _, recs = self.records("L1", {"scope": ["Functional.linear.1.forward",
                                                "Functional.linear.0.backward"],
                                      "list": ["linear"]})
        self.assertEqual(recs, {"Functional.linear.1.forward", "Functional.linear.1.backward",
                                "Functional.linear.0.backward"})

    def test_scope_whose_first_name_never_runs_is_warned(self):
        p, steps = self.dump({"level": "L1", "step": [0],
                              "tensor": {"scope": ["Functional.linear.9.forward",
                                                   "Torch.sigmoid.0.forward"]}})
        self.assertEqual(steps, {})
        self.assertIn('scope: "Functional.linear.9.forward" never ran', p.stderr)

    # ---- dump_enable turned on and off during the run --------------------------

    def test_dump_enable_flipped_true_mid_run_dumps_the_steps_after(self):
        # the script sets it true during step 2: msprobe 26 dumped steps 3-7
        p, steps = self.dump({"level": "L1", "step": [], "dump_enable": False}, "2=true")
        self.assertEqual(sorted(steps), [3, 4, 5, 6, 7], p.stderr)
        self.assertIn("config.json: dump_enable is true: dumping from step 3", p.stderr)
        self.assertIn("Functional.linear.0.forward", steps[3])
        # the config named relatively, the script changing directory before training
        cfg = {"task": "tensor", "dump_path": self.path("cd_out"), "rank": [], "step": [],
               "level": "L1", "dump_enable": False}
        self.write_config(cfg, name="config.json")
        p = self.run_cmd([dt.PYTHON, "t.py", "2=true", "cd"], "config.json")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual(sorted(s for s, _ in dt.dump_files(self.path("cd_out"))),
                         [3, 4, 5, 6, 7], p.stderr)

    def test_dump_enable_read_again_at_precision_debugger_start(self):
        # set true before step 2's debugger.start(): msprobe 26 (at 3 s a step,
        # past its 3 s between looks) dumped steps 2-7
        p, steps = self.dump({"level": "L1", "step": [], "dump_enable": False}, "2=true", "dbg")
        self.assertEqual(sorted(steps), [2, 3, 4, 5, 6, 7], p.stderr)
        self.assertIn("dump_enable is true: dumping from step 2", p.stderr)
        # the dump started with another config (no dump_enable): the
        # debugger's config_path is the file followed
        out = self.path("other_out")
        other = self.write_config({"task": "tensor", "dump_path": out, "rank": [], "step": [],
                                   "level": "L1"}, name="other.json")
        self.write_config({"task": "tensor", "dump_path": out, "rank": [], "step": [],
                           "level": "L1", "dump_enable": False}, name="config.json")
        p = self.run_cmd([dt.PYTHON, "t.py", "2=true", "dbg"], other)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual(sorted(s for s, _ in dt.dump_files(out)), [2, 3, 4, 5, 6, 7], p.stderr)

    def test_dump_enable_flipped_false_stops_and_true_again_resumes(self):
        p, steps = self.dump({"level": "L1", "step": [], "dump_enable": True},
                             "1=false", "5=true")
        self.assertEqual(sorted(steps), [0, 1, 6, 7], p.stderr)
        self.assertIn("dump_enable is false: nothing is dumped from step 2", p.stderr)
        # the step list still applies to the steps dump_enable lets through
        p, steps = self.dump({"level": "L1", "step": ["4-6"], "dump_enable": False}, "2=true")
        self.assertEqual(sorted(steps), [4, 5, 6], p.stderr)


if __name__ == "__main__":
    unittest.main()
