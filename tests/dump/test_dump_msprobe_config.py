"""msprobe's own config.json drives a real dump: one config per task (tensor,
statistics, md5) and level (L1, L0, mix), plus rank selection and data_mode,
with torchvision's MLP and torch.nn parts under the real preload shim. What
each dump holds is read back with h5py and checked against numpy and zlib on
the values the script saved itself."""
import json
import os
import sys
import unittest
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

SCRIPT = r'''
import sys, numpy as np, torch, torchvision
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torchvision.ops.MLP(4 * 6 * 6, [16, 5]))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(2, 3, 8, 8)
np.save(sys.argv[1], x.numpy())
for step in range(2):
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    print("step", step, "%.9g" % loss.item())
'''


class MsprobeConfigJson(dt.ShimCase):
    def run_config(self, cfg, env_extra=None):
        path = self.write_config(json.dumps(cfg), name="config.json")
        with open(self.path("t.py"), "w") as f:
            f.write(SCRIPT)
        p = self.run_cmd([dt.PYTHON, "t.py", "x.npy"], path, env_extra=env_extra)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        return p

    def check_input(self, recs, task):
        """The first conv's input is the script's x: data (tensor task) or its crc32."""
        x = np.load(self.path("x.npy"))
        rec = recs.get("Functional.conv2d.0.forward") or recs["Module.0.Conv2d.forward.0"]
        t = rec["tattrs"]["input.0"]
        self.assertEqual(int(t["crc32"]), zlib.crc32(x.tobytes()))
        self.assertEqual(float(t["max"]), float(x.max()))
        if task == "tensor":
            dt.assert_same(self, rec["input.0"], x, "conv input")
        else:
            self.assertIsNone(rec["input.0"], task + " task wrote tensor data")

    def test_each_task_and_level(self):
        for task, level, mode in (("tensor", "L1", "api"), ("statistics", "L0", "module"),
                                  ("md5", "mix", "mix")):
            with self.subTest(task=task, level=level):
                root = "d_" + task
                cfg = {"task": task, "dump_path": "./" + root, "rank": [], "step": [1],
                       "level": level, "async_dump": False,
                       task if task != "md5" else "statistics": {
                           "scope": [], "list": [], "data_mode": ["all"]}}
                p = self.run_config(cfg)
                self.assertIn("ignored (not applicable to msprobe-c): async_dump", p.stderr)
                files = dt.dump_files(self.path(root))
                self.assertEqual(sorted(files), [(1, 0)])
                recs, attrs = dt.read_dump(files[(1, 0)])
                self.assertEqual(attrs["task"], task)
                self.assertEqual(attrs["dump_mode"], mode)
                # optimizer steps are records at every level
                self.assertIn("Optimizer.SGD.0.step", recs)
                apis = [n for n in recs if not n.startswith(("Module.", "Optimizer."))]
                mods = [n for n in recs if n.startswith("Module.")]
                self.assertEqual(bool(apis), mode != "module", sorted(recs))
                self.assertEqual(bool(mods), mode != "api", sorted(recs))
                self.check_input(recs, task)

    def test_rank_selection_and_data_mode(self):
        cfg = {"task": "tensor", "dump_path": "./r", "rank": ["1-2"], "step": ["0"],
               "level": "L1",
               "tensor": {"list": ["Functional.conv2d.0.forward", "Functional.linear"],
                          "data_mode": ["forward", "output"]}}
        self.run_config(cfg, {"RANK": "0"})
        self.assertEqual(dt.dump_files(self.path("r")), {})
        self.run_config(cfg, {"RANK": "1"})
        files = dt.dump_files(self.path("r"))
        self.assertEqual(sorted(files), [(0, 1)])
        recs, _ = dt.read_dump(files[(0, 1)])
        self.assertEqual(sorted(recs), ["Functional.conv2d.0.forward",
                                        "Functional.linear.0.forward",
                                        "Functional.linear.1.forward"])
        for name, rec in recs.items():
            self.assertEqual(sorted(rec["tattrs"]), ["output.0"], name)

    def test_data_mode_forward_hooks_no_backward(self):
        # A backward record costs a hook on each call's grad_fn, registered
        # through torch.autograd.Function._register_hook; with data_mode
        # forward those records are dropped, so no hook may be registered.
        # The script counts the registrations itself, during the dumped steps.
        counting = SCRIPT.replace("for step in range(2):", """import torch.autograd
calls = [0]
orig = torch.autograd.Function._register_hook
def counted(*a):
    calls[0] += 1
    return orig(*a)
torch.autograd.Function._register_hook = counted
for step in range(2):""") + 'print("REGISTERED", calls[0])\n'
        for modes, hooked in ((["forward"], False), (["all"], True)):
            with self.subTest(data_mode=modes):
                root = "dm_" + modes[0]
                cfg = {"task": "statistics", "dump_path": "./" + root, "rank": [], "step": [],
                       "level": "L1", "statistics": {"list": [], "data_mode": modes}}
                path = self.write_config(json.dumps(cfg), name="config.json")
                with open(self.path("t.py"), "w") as f:
                    f.write(counting)
                p = self.run_cmd([dt.PYTHON, "t.py", "x.npy"], path)
                self.assertEqual(p.returncode, 0, p.stderr[-3000:])
                registered = int(p.stdout.split("REGISTERED")[1].split()[0])
                files = dt.dump_files(self.path(root))
                recs, _ = dt.read_dump(files[(1, 0)])
                bwd = sorted(r for r in recs if ".backward" in r)
                fwd = sorted(r for r in recs if ".forward" in r)
                self.assertIn("Functional.conv2d.0.forward", fwd)
                if hooked:  # the count sees msprobe's hooks: one or more a backward record
                    self.assertIn("Functional.conv2d.0.backward", bwd)
                    self.assertGreaterEqual(registered, len(bwd))
                else:
                    self.assertEqual(bwd, [])
                    self.assertEqual(registered, 0)
                self.check_input(recs, "statistics")

    def test_published_sample_runs_a_dump(self):
        sample = {"task": "statistics", "dump_path": "./dump_path", "rank": [], "step": [],
                  "level": "L1", "extra_info": True, "async_dump": False,
                  "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                 "summary_mode": "statistics"},
                  "tensor": {"scope": [], "list": [], "data_mode": ["all"]},
                  "acc_check": {"white_list": [], "black_list": [], "error_data_path": "./"}}
        p = self.run_config(sample)
        self.assertEqual(p.stderr.count("ignored (not applicable"), 1, p.stderr)
        self.assertIn("async_dump, acc_check, tensor", p.stderr)
        files = dt.dump_files(self.path("dump_path"))
        self.assertEqual(sorted(files), [(0, 0), (1, 0)])
        recs, attrs = dt.read_dump(files[(0, 0)])
        self.assertEqual(attrs["task"], "statistics")
        self.check_input(recs, "statistics")


LIST_SCRIPT = r'''
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
    def forward(self, x):
        return F.gelu(self.fc(F.relu(x)))
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = nn.Linear(4, 4)
        self.block = Block()
    def forward(self, x):
        return F.relu(self.block(F.relu(self.pre(x))))
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(2, 4)
loss = net(x).sum()
loss.backward()
opt.step()
print("loss %.9g" % loss.item())
'''


class MsprobeListSemantics(dt.ShimCase):
    """msprobe's "list": a full record name selects that call alone; a module
    at level mix dumps the APIs called inside it; NPU./Aten. names say why
    they dumped nothing."""

    def run_list(self, entries, level="L1", name="d"):
        cfg = {"task": "statistics", "dump_path": "./" + name, "step": [0], "level": level,
               "statistics": {"list": entries, "data_mode": ["all"]}}
        path = self.write_config(json.dumps(cfg), name=name + ".json")
        with open(self.path("t.py"), "w") as f:
            f.write(LIST_SCRIPT)
        p = self.run_cmd([dt.PYTHON, "t.py"], path)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        files = dt.dump_files(self.path(name))
        recs = dt.read_dump(files[(0, 0)])[0] if files else {}
        return p, recs

    def test_call_index_is_respected(self):
        # F.relu runs three times: pre's output (0), inside block (1), last (2)
        _, recs = self.run_list(["Functional.relu.1.forward"])
        self.assertEqual(sorted(recs), ["Functional.relu.1.forward"])
        _, recs = self.run_list(["Functional.relu.2.backward", "Functional.relu.0.forward"],
                                name="e")
        self.assertEqual(sorted(recs), ["Functional.relu.0.forward",
                                        "Functional.relu.2.backward"])
        # no index: every call, both directions (as before)
        _, recs = self.run_list(["Functional.relu"], name="f")
        self.assertEqual(sorted(recs), sorted("Functional.relu.%d.%s" % (i, d)
                                              for i in range(3) for d in ("forward", "backward")))

    def test_module_at_level_mix_dumps_the_apis_inside_it(self):
        _, recs = self.run_list(["Module.block.Block.forward.0"], level="mix")
        # the module record, and what ran inside its forward: its Linear's
        # F.linear, the relu and gelu around it, and their backward records
        self.assertIn("Module.block.Block.forward.0", recs)
        self.assertNotIn("Module.block.Block.backward.0", recs)
        apis = sorted(n for n in recs if not n.startswith("Module."))
        self.assertEqual(apis, ["Functional.gelu.0.backward", "Functional.gelu.0.forward",
                                "Functional.linear.1.backward", "Functional.linear.1.forward",
                                "Functional.relu.1.backward", "Functional.relu.1.forward"])

    def test_npu_and_aten_entries_say_why_nothing_was_dumped(self):
        p, recs = self.run_list(["NPU.npu_rms_norm.0.forward", "Aten.add.0.forward"])
        self.assertEqual(recs, {})
        # named as the user wrote them, by their key in config.json
        self.assertIn("names what this run never dumped", p.stderr)
        self.assertIn('statistics.list[0] "NPU.npu_rms_norm.0.forward" (no module of the model '
                      'has that path, and no imported module has that callable)', p.stderr)
        self.assertIn('statistics.list[1] "Aten.add.0.forward" (msprobe\'s aten-level record: '
                      'torch.ops.aten is not wrapped here', p.stderr)


OPTIONS_SCRIPT = r'''
import sys, numpy as np, torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
lin = nn.Linear(3, 3)
opt = torch.optim.SGD(lin.parameters(), lr=0.5)
x = torch.randn(2, 3)
saved = {}
for step in range(2):
    y = F.relu(lin(x))                       # CALL-SITE
    z = y.clone()
    saved["before_setitem_%d" % step] = z.detach().numpy().copy()
    z[0] = 7.0
    m = z > 1
    saved["before_fill_%d" % step] = z.detach().numpy().copy()
    z.masked_fill_(m, -1.0)
    saved["after_fill_%d" % step] = z.detach().numpy().copy()
    loss = z.square().sum() + y.sum()
    loss.backward()
    saved["w_before_%d" % step] = lin.weight.detach().numpy().copy()
    saved["w_grad_%d" % step] = lin.weight.grad.numpy().copy()
    opt.step()
    saved["w_after_%d" % step] = lin.weight.detach().numpy().copy()
    opt.zero_grad()
    print("loss %.9g" % loss.item())
np.savez(sys.argv[1], **saved)
'''


class MsprobeDumpOptions(dt.ShimCase):
    """dump_enable, tensor_list, extra_info (call sites), a step never reached;
    in-place Tensor methods recorded with the inputs they were given."""

    def run_opts(self, cfg, name="d", preload=True, env_extra=None):
        cfg = dict({"dump_path": "./" + name, "level": "L1"}, **cfg)
        path = self.write_config(json.dumps(cfg), name=name + ".json")
        with open(self.path("t.py"), "w") as f:
            f.write(OPTIONS_SCRIPT)
        p = self.run_cmd([dt.PYTHON, "t.py", name + ".npz"], path, preload=preload,
                         env_extra=env_extra)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        return p, dt.dump_files(self.path(name)), np.load(self.path(name + ".npz"))

    def test_in_place_methods_recorded_before_they_write(self):
        p, files, saved = self.run_opts({"task": "tensor", "step": [0, 1]})
        bare, _, _ = self.run_opts({"task": "tensor", "step": [0, 1]}, name="bare", preload=False)
        self.assertEqual(p.stdout, bare.stdout)  # the same losses, bit for bit
        for step in (0, 1):
            recs, _ = dt.read_dump(files[(step, 0)])
            si = recs["Tensor.__setitem__.0.forward"]
            dt.assert_same(self, si["input.0"], saved["before_setitem_%d" % step], "setitem in")
            self.assertEqual(float(np.asarray(si["input.2"])) if "input.2" in si
                             else float(si["attrs"]["input.2"]), 7.0)
            mf = recs["Tensor.masked_fill_.0.forward"]
            dt.assert_same(self, mf["input.0"], saved["before_fill_%d" % step], "fill in")
            dt.assert_same(self, mf["output.0"], saved["after_fill_%d" % step], "fill out")
            # SGD's in-place param.add_(grad, alpha=-lr) is inside optimizer.step(),
            # which is one record: the weight before and after, and its gradient
            opt = recs["Optimizer.SGD.0.step"]
            i = [k for k in opt if k.startswith("input.param.") and opt[k].shape == (3, 3)]
            self.assertEqual(len(i), 1, sorted(opt))
            n = i[0].rsplit(".", 1)[1]
            dt.assert_same(self, opt["input.param." + n], saved["w_before_%d" % step], "weight before")
            dt.assert_same(self, opt["input.grad." + n], saved["w_grad_%d" % step], "weight grad")
            dt.assert_same(self, opt["output.param." + n], saved["w_after_%d" % step], "weight after")
            self.assertFalse([k for k in recs if k.startswith("Tensor.add_.")])
            self.assertEqual(float(opt["attrs"]["group.0.lr"]), 0.5)

    def test_dump_enable_false_dumps_nothing(self):
        p, files, _ = self.run_opts({"task": "tensor", "step": [0], "dump_enable": False})
        self.assertEqual(files, {})
        self.assertIn("d.json: dump_enable is false: nothing is dumped", p.stderr)
        p, files, _ = self.run_opts({"task": "tensor", "step": [0], "dump_enable": True},
                                    name="on")
        self.assertEqual(sorted(files), [(0, 0)])
        self.assertNotIn("dump_enable", p.stderr)

    def test_tensor_list_keeps_data_inside_a_statistics_dump(self):
        _, files, saved = self.run_opts({"task": "statistics", "step": [0], "statistics": {
            "list": [], "tensor_list": ["Tensor.masked_fill_"]}})
        recs, attrs = dt.read_dump(files[(0, 0)])
        self.assertEqual(attrs["task"], "statistics")
        mf = recs["Tensor.masked_fill_.0.forward"]
        dt.assert_same(self, mf["input.0"], saved["before_fill_0"], "tensor_list data")
        self.assertIsNone(recs["Functional.relu.0.forward"]["input.0"])  # statistics only

    def test_step_never_reached_is_warned(self):
        p, files, _ = self.run_opts({"task": "statistics", "step": [1, 5, "7-9"]})
        self.assertEqual(sorted(files), [(1, 0)])
        self.assertIn("d.json: step 5, 7-9 of the dump never reached: the run ended in step 2 "
                      "(steps count from 0, one per optimizer.step())", p.stderr)
        p, _, _ = self.run_opts({"task": "statistics", "step": [0, 1]}, name="e")
        self.assertNotIn("never reached", p.stderr)

    def test_call_sites_recorded_once_per_step(self):
        _, files, _ = self.run_opts({"task": "statistics", "step": [0]})
        recs, _ = dt.read_dump(files[(0, 0)])
        lines = OPTIONS_SCRIPT.split("\n")  # as t.py holds it
        line = 1 + lines.index([l for l in lines if "CALL-SITE" in l][0])
        script = self.path("t.py")
        # F.linear runs first (inside nn.Linear: torch's frames are left out, so
        # its call site is the same script line as the relu's)
        lin = recs["Functional.linear.0.forward"]["attrs"]["stack"]
        self.assertTrue(lin.startswith("File %s, line %d, in <module>\n    y = F.relu(lin(x))"
                                       % (script, line)), lin)
        relu = recs["Functional.relu.0.forward"]["attrs"]["stack"]
        self.assertEqual(relu, "@Functional.linear.0.forward")  # the same line: one text
        self.assertEqual(recs["Functional.relu.0.backward"]["attrs"]["stack"],
                         "@Functional.linear.0.forward")
        texts = [r["attrs"]["stack"] for r in recs.values() if "stack" in r["attrs"]]
        full = [t for t in texts if not t.startswith("@")]
        self.assertEqual(len(full), len(set(full)))  # each text once in the file
        for t in full:
            self.assertNotIn("torch/nn/", t)  # torch's own frames left out
        # the frames walked by their attributes (a Python without
        # PyFrame_GetBack), or placed by line numbers (a Python without
        # PyFrame_GetLasti), give the same texts
        for name, env in (("attrs", "MSPROBE_TEST_STACK_ATTRS"), ("lines", "MSPROBE_TEST_STACK_LINES")):
            _, files, _ = self.run_opts({"task": "statistics", "step": [0]}, name=name,
                                        env_extra={env: "1"})
            other, _ = dt.read_dump(files[(0, 0)])
            self.assertEqual({n: r["attrs"].get("stack") for n, r in other.items()},
                             {n: r["attrs"].get("stack") for n, r in recs.items()}, name)
        # extra_info false: no call sites
        _, files, _ = self.run_opts({"task": "statistics", "step": [0], "extra_info": False},
                                    name="nx")
        recs, _ = dt.read_dump(files[(0, 0)])
        self.assertFalse([n for n, r in recs.items() if "stack" in r["attrs"]])


    def test_call_sites_of_many_functions_each_their_own(self):
        # 1500 functions (made by exec, with a file name of their own), each
        # calling F.relu on its own line: the shim's tables of code objects
        # and of call sites grow past their first size, and each record still
        # names its function's line, then the loop's
        script = "\n".join([
            "import torch, torch.nn.functional as F",
            "x = torch.ones(3)",
            "opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)",
            "src = '\\n'.join('def f%d():\\n    return F.relu(x)\\n' % i for i in range(1500))",
            "ns = {'F': F, 'x': x}",
            "exec(compile(src, 'gen.py', 'exec'), ns)",
            "for step in range(2):",
            "    for i in range(1500):",
            "        ns['f%d' % i]()  # LOOP",
            "    opt.step()", ""])
        with open(self.path("many.py"), "w") as f:
            f.write(script)
        cfg = self.write_config(json.dumps({"task": "statistics", "dump_path": "./m", "level": "L1",
                                            "step": [0, 1]}), name="m.json")
        p = self.run_cmd([dt.PYTHON, "many.py"], cfg)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        loop = 1 + script.split("\n").index([l for l in script.split("\n") if "# LOOP" in l][0])
        for step in (0, 1):  # each step's file holds each text once, whatever the last held
            recs, _ = dt.read_dump(dt.dump_files(self.path("m"))[(step, 0)])
            for i in range(1500):
                # function i's return is line 3i+2 of gen.py (def, return, blank)
                want = "File gen.py, line %d, in f%d\nFile %s, line %d, in <module>" % (
                    3 * i + 2, i, self.path("many.py"), loop)
                got = recs["Functional.relu.%d.forward" % i]["attrs"]["stack"]
                self.assertTrue(got.startswith(want), (step, i, got[:200]))


if __name__ == "__main__":
    unittest.main()
