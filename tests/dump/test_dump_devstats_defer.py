"""Device statistics copy the tensors of many calls in one launch
(py_devstats.c, "Deferred copies"): a tensor waits in its window, and a call
that writes into what it is given has every waiting tensor copied first. The
statistics must still be those of the values each call saw and made.

Run by ctest with MSPROBE_TEST_DEVICE_STATS=1 (CPU tensors take the device
path) and windows of a device's size, so that tensors do wait."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402
import msp_launch  # noqa: E402

DEVICE_PATH = os.environ.get("MSPROBE_TEST_DEVICE_STATS") == "1"
SIZES = {"MSPROBE_DEVICE_STATS_MB": "64"}

# Each write below comes after the call whose output it changes; the script
# keeps a copy of what each call saw (exp) for numpy.
WRITES = r"""
import sys, numpy as np, torch
import torch.nn.functional as F
torch.manual_seed(0)
opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
W = torch.randn(50, 8) * 3
exp = {}
for step in range(2):
    x = torch.randn(1000)
    y = torch.mul(x, 2)
    exp["mul0"] = y.numpy().copy()
    y.add_(1)                                  # by its name
    z = torch.mul(y, 3)
    exp["mul1"] = z.numpy().copy()
    F.relu(z, inplace=True)                    # inplace=True
    w2 = torch.mul(z, -1.5) + 0.25
    exp["add0"] = w2.numpy().copy()
    F.relu(w2, True)                           # True as a later argument
    exp["W0"] = W.numpy().copy()
    # renorms rows of W: a write seen at its first call
    F.embedding(torch.tensor([1, 2, 3]) + 20 * step, W, max_norm=1.0)
    exp["W1"] = W.numpy().copy()
    F.embedding(torch.tensor([4, 5, 6]) + 20 * step, W, max_norm=1.0)
    exp["W2"] = W.numpy().copy()
    v = torch.mul(x, 4)
    exp["mul3"] = v.numpy().copy()
    v[3:7] = 100                               # __setitem__
    a = torch.randn(4, 3, 5)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    exp["rm"] = rm.numpy().copy()
    F.batch_norm(a, rm, rv, training=True)     # writes its running statistics
    c = torch.arange(7) * 3                    # int64: a float64 window, waiting too
    exp["c0"] = c.numpy().copy()
    d = torch.add(c, 2)
    exp["d"] = d.numpy().copy()
    c.add_(10)                                 # writes an int tensor: c copied first
    exp["c1"] = c.numpy().copy()
    e2 = torch.sub(c, 1)                       # c after the write, waiting again
    exp["e2"] = e2.numpy().copy()
    u = torch.mul(x, 5)
    exp["mul5"] = u.numpy().copy()
    torch.ops.aten.add_(u, 1)                  # a write no wrapper sees
    torch.mul(u, 1)
    opt.step()
np.savez(sys.argv[1], **exp)
"""

# torchvision's resnet18 (ReLU(inplace=True), out += identity, batch norm)
# under AdamW: the same two steps, dumped once with tensors and once with
# statistics.
RESNET = r"""
import torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet18(num_classes=10)
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
g = torch.Generator().manual_seed(1)
for step in range(2):
    x, y = torch.randn(2, 3, 32, 32, generator=g), torch.randint(0, 10, (2,), generator=g)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.step()
"""


# The elements the shim's copies (aten::cat) took in the profile prof: a
# script's "# CAT_ELEMENTS" line becomes this.
CAT_ELEMENTS = r"""
        n = 0
        for e in prof.events():  # cat(tensors, dim, out=): the out's shape is the last
            if e.name == "aten::cat" and e.input_shapes and len(e.input_shapes[-1]) == 1:
                n += e.input_shapes[-1][0]
        print("CAT_ELEMENTS", n)
"""[1:]

# A chain of calls, each given the last one's output: profiled, the elements
# the shim's copies (aten::cat) take, and what the chain holds.
CHAIN = r"""
import torch
from torch.profiler import profile, ProfilerActivity
opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
for step in range(2):
    x = torch.randn(1000)
    if step == 1:
        prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
        prof.__enter__()
    for i in range(40):
        x = torch.mul(x, 1.01)
    opt.step()  # the step's trigger: what waits is copied before it runs
    if step == 1:
        prof.__exit__(None, None, None)
        # CAT_ELEMENTS
""".replace("        # CAT_ELEMENTS\n", CAT_ELEMENTS)


# Views of one tensor's memory (reshape, transpose, flatten, a leading slice):
# the same elements, one copy; a strided slice is other elements. What each
# call returned is kept for numpy. Profiled in the second step dumped: each
# API's first call in a dump copies what waits (does it write?).
VIEWS = r"""
import sys, numpy as np, torch
from torch.profiler import profile, ProfilerActivity
opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
for step in range(3):
    x = torch.randn(64, 50) * 3 + 1
    if step == 2:
        prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
        prof.__enter__()
    out = {}
    for i in range(8):
        out["reshape%d" % i] = x.reshape(50, 64)
        out["t%d" % i] = out["reshape%d" % i].t()
        out["flatten%d" % i] = out["reshape%d" % i].flatten()
        out["transpose%d" % i] = x.transpose(0, 1)
        out["permute%d" % i] = x.view(4, 16, 50).permute(2, 0, 1)
        out["lead%d" % i] = x.view(-1).narrow(0, 0, 1600)
        out["half%d" % i] = x[:32]
        out["strided%d" % i] = x[:, ::2]
    opt.step()  # the step's trigger: what waits is copied before it runs
    if step == 2:
        prof.__exit__(None, None, None)
        # CAT_ELEMENTS
        np.savez(sys.argv[1], x=x.numpy(), **{k: v.numpy() for k, v in out.items()})
""".replace("        # CAT_ELEMENTS\n", CAT_ELEMENTS)


def stats_of(test, t, x, what):
    """t (a dumped row) against numpy over x: max and min exact, mean and
    norm within the device path's documented tolerance."""
    x = np.asarray(x, dtype=np.float64).ravel()
    test.assertEqual(float(t["max"]), x.max(), what)
    test.assertEqual(float(t["min"]), x.min(), what)
    test.assertLessEqual(abs(float(t["mean"]) - x.mean()), 1e-6 * np.abs(x).mean() + 1e-30, what)
    test.assertTrue(np.isclose(float(t["norm"]), np.sqrt((x * x).sum()), rtol=1e-6, atol=0), what)


# One-dimensional tensors, strided or not, go into the window's copy as
# they are; the others are flattened first (accel_copy.py's win_put).
SHAPES = r"""
import sys, numpy as np, torch
opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
torch.manual_seed(0)
for step in range(2):
    x = torch.randn(3000) * 5 - 2
    out = {"step3": torch.neg(x[1::3]), "tail": torch.neg(x[2900:]),
           "cube": torch.neg(x[:2880].view(12, 16, 15)), "scalar": torch.neg(x[7]),
           "cols": torch.neg(x[:2000].view(40, 50)[:, 3])}
    opt.step()
np.savez(sys.argv[1], **{k: v.numpy() for k, v in out.items()})
"""


class Deferred(dt.ShimCase):
    def run_script(self, name, text, *args, steps="1", env=None):
        """Script text as name.py, run under a statistics dump of these steps
        (api mode, into ./s) with the tests' window sizes; the process."""
        cfg = self.write_config(dt.config("./s", mode="api", steps=steps, task="statistics"))
        with open(self.path(name + ".py"), "w") as f:
            f.write(text)
        return self.run_cmd([dt.PYTHON, self.path(name + ".py")] + [self.path(a) for a in args],
                            cfg, env_extra=dict(SIZES, **(env or {})))

    def run_writes(self, env=None):
        p = self.run_script("writes", WRITES, "exp.npz", env=env)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        recs, _ = dt.read_dump(dt.dump_files(self.path("s"))[(1, 0)])
        return p, recs, np.load(self.path("exp.npz"))

    def test_a_call_that_writes_sees_and_leaves_what_it_was_given(self):
        p, recs, e = self.run_writes()
        relu = lambda a: np.maximum(a, 0)  # noqa: E731
        for rec, role, x in (
                ("Torch.mul.0.forward", "output.0", e["mul0"]),
                ("Tensor.add_.0.forward", "input.0", e["mul0"]),
                ("Tensor.add_.0.forward", "output.0", e["mul0"] + np.float32(1)),
                ("Torch.mul.1.forward", "output.0", e["mul1"]),
                ("Functional.relu.0.forward", "input.0", e["mul1"]),
                ("Functional.relu.0.forward", "output.0", relu(e["mul1"])),
                ("Tensor.__add__.0.forward", "output.0", e["add0"]),
                ("Functional.relu.1.forward", "input.0", e["add0"]),
                ("Functional.embedding.0.forward", "input.1", e["W0"]),
                ("Functional.embedding.1.forward", "input.1", e["W1"]),
                ("Torch.mul.3.forward", "output.0", e["mul3"]),
                ("Tensor.__setitem__.0.forward", "input.0", e["mul3"]),
                ("Functional.batch_norm.0.forward", "input.1", e["rm"]),
                # integers wait in their float64 window; writing one (add_) has
                # them copied first, and leaves the float windows' waiting ones
                ("Torch.add.0.forward", "input.0", e["c0"]),
                ("Torch.add.0.forward", "output.0", e["d"]),
                ("Tensor.add_.1.forward", "input.0", e["c0"]),
                ("Tensor.add_.1.forward", "output.0", e["c1"]),
                ("Torch.sub.0.forward", "input.0", e["c1"]),
                ("Torch.sub.0.forward", "output.0", e["e2"])):
            with self.subTest(record=rec, role=role):
                stats_of(self, recs[rec]["tattrs"][role], x, rec + "/" + role)
        # each renorm changed W's norm: the checks above tell before from after
        norms = [np.sqrt((e[k].astype(np.float64) ** 2).sum()) for k in ("W0", "W1", "W2")]
        self.assertTrue(norms[0] > norms[1] > norms[2], norms)
        # the write torch.ops.aten.add_ made unseen: said once, naming the
        # tensor; its statistics are after the write, as documented
        said = [ln for ln in p.stderr.splitlines() if "written in place" in ln]
        self.assertEqual(len(said), 1, p.stderr[-2000:])
        self.assertIn("Torch.mul.4.forward/output.0", said[0])
        stats_of(self, recs["Torch.mul.4.forward"]["tattrs"]["output.0"], e["mul5"] + np.float32(1),
                 "after the unseen write")

    def test_no_waiting_copies_each_call_when_it_returns(self):
        p, recs, e = self.run_writes({"MSPROBE_DEVICE_STATS_DEFER": "0"})
        self.assertNotIn("written in place", p.stderr)
        stats_of(self, recs["Torch.mul.4.forward"]["tattrs"]["output.0"], e["mul5"], "mul.4")
        stats_of(self, recs["Functional.relu.0.forward"]["tattrs"]["input.0"], e["mul1"], "relu")

    def test_an_output_given_to_the_next_call_is_copied_once(self):
        # 40 calls, each given the last one's output: 41 tensors, 80 inputs
        # and outputs. An input that is an earlier call's output, unchanged,
        # shares its copy in the window, so 41 tensors of 1000 elements are
        # copied, not 80 (and the optimizer's parameter of one element).
        p = self.run_script("chain", CHAIN)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        n = [int(ln.split()[1]) for ln in p.stdout.splitlines() if ln.startswith("CAT_ELEMENTS")]
        self.assertEqual(len(n), 1, p.stdout)
        self.assertGreaterEqual(n[0], 41 * 1000)  # the copies were seen
        self.assertLessEqual(n[0], 41 * 1000 + 10)
        recs, _ = dt.read_dump(dt.dump_files(self.path("s"))[(1, 0)])
        for i in range(1, 40):  # each input has the statistics of the output before it
            a = recs["Torch.mul.%d.forward" % i]["tattrs"]["input.0"]
            b = recs["Torch.mul.%d.forward" % (i - 1)]["tattrs"]["output.0"]
            for k in ("max", "min", "mean", "norm"):
                self.assertEqual(float(a[k]), float(b[k]), (i, k))

    def test_one_dimensional_tensors_strided_or_not_as_numpy_says(self):
        p = self.run_script("shapes", SHAPES, "o.npz")
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        e = np.load(self.path("o.npz"))
        recs, _ = dt.read_dump(dt.dump_files(self.path("s"))[(1, 0)])
        order = ["step3", "tail", "cube", "scalar", "cols"]
        for i, key in enumerate(order):
            r = recs["Torch.neg.%d.forward" % i]["tattrs"]
            stats_of(self, r["output.0"], e[key], key)
            stats_of(self, r["input.0"], -e[key], key + " input")
            self.assertEqual([int(d) for d in r["output.0"]["shape"]], list(e[key].shape), key)

    def test_views_of_the_same_memory_share_one_copy(self):
        # 72 calls whose inputs and outputs are views of x (3200 elements):
        # a reshape, a transpose, a 3-D permute, a flatten, a leading slice of x's memory
        # share the copy that waits (their statistics are x's, or its first
        # 1600 elements'); the strided slice x[:, ::2] (1600 other elements,
        # from the same address) does not. Before: about 100 copies of up to
        # 3200 elements.
        p = self.run_script("views", VIEWS, "v.npz", steps="1|2")
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        n = [int(ln.split()[1]) for ln in p.stdout.splitlines() if ln.startswith("CAT_ELEMENTS")]
        self.assertEqual(len(n), 1, p.stdout)
        # randn's output, the product and x (3 x 3200: x's views all share
        # x's copy), x's first half (x[:32] and the narrow: 1600) and each
        # strided slice (8 x 1600); before: about 112 copies of 1600-3200
        self.assertGreaterEqual(n[0], 3200)
        self.assertLessEqual(n[0], 3 * 3200 + 1600 + 8 * 1600)
        e = np.load(self.path("v.npz"))
        recs, _ = dt.read_dump(dt.dump_files(self.path("s"))[(2, 0)])
        checked = 0
        for name, r in recs.items():
            if not name.endswith(".forward") or "output.0" not in r["tattrs"]:
                continue
            kind = name.split(".")[1]
            i = int(name.split(".")[2])
            key = {"reshape": "reshape", "t": "t", "flatten": "flatten", "transpose": "transpose",
                   "permute": "permute", "narrow": "lead", "__getitem__": None}.get(kind, "")
            if key is None:  # x[:32] and x[:, ::2], in call order
                key = ("half%d" if i % 2 == 0 else "strided%d") % (i // 2)
            elif key:
                key = key + "%d" % i
            else:
                continue
            stats_of(self, r["tattrs"]["output.0"], e[key], name)
            checked += 1
        self.assertGreaterEqual(checked, 64)  # 8 of each kind (2 of __getitem__)

    def compare_every_tensor(self, data, stats, kinds="f"):
        """Every tensor of the statistics dump whose numpy dtype kind is in
        kinds against numpy over the same tensor of the tensor dump; how many
        were checked."""
        self.assertEqual(sorted(data), sorted(stats))
        checked = 0
        for rec in sorted(stats):
            for role, t in stats[rec]["tattrs"].items():
                a = data[rec].get(role)
                if a is None or a.dtype.kind not in kinds or a.size == 0:
                    continue
                stats_of(self, t, a, rec + "/" + role)
                checked += 1
        return checked

    def test_four_ranks_ddp_and_collectives_as_their_tensor_dump_says(self):
        # multirank_train.py: SqueezeNet under DistributedDataParallel (its
        # reducer writes gradients from C++), broadcast, all_gather,
        # all_reduce, send/recv; four ranks over gloo, run twice
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multirank_train.py")
        runs = {}
        for task in ("tensor", "statistics"):
            root = self.path(task)
            os.makedirs(os.path.join(root, "log"))
            cfg = self.write_config(dt.config(os.path.join(root, "dump"), mode="api", steps="1",
                                              task=task), name=task + ".json")
            env = dict(os.environ, OMP_NUM_THREADS="1", T_STEPS="2",
                       T_LOG_DIR=os.path.join(root, "log"), LD_PRELOAD=dt.PRELOAD,
                       MSPROBE_PATH=cfg, **SIZES)
            env.pop("MSPROBE_LOG_FILE", None)
            r = msp_launch.launch(script, 4, env, root, timeout=600).check()
            for err in r.errs:
                self.assertNotIn("written in place", err)
            runs[task] = [dt.read_dump(dt.dump_files(os.path.join(root, "dump"))[(1, k)])[0]
                          for k in range(4)]
        checked = sum(self.compare_every_tensor(d, s)
                      for d, s in zip(runs["tensor"], runs["statistics"]))
        self.assertGreater(checked, 2000)

    def test_every_tensor_of_a_resnet18_adamw_step_as_its_tensor_dump_says(self):
        with open(self.path("resnet.py"), "w") as f:
            f.write(RESNET)
        runs = {}
        for task in ("tensor", "statistics"):
            cfg = self.write_config(dt.config("./" + task, mode="api", steps="1", task=task),
                                    name=task + ".json")
            p = self.run_cmd([dt.PYTHON, self.path("resnet.py")], cfg, env_extra=SIZES)
            self.assertEqual(p.returncode, 0, p.stderr[-3000:])
            self.assertNotIn("written in place", p.stderr)
            runs[task], _ = dt.read_dump(dt.dump_files(self.path(task))[(1, 0)])
        checked = self.compare_every_tensor(runs["tensor"], runs["statistics"])
        # forward and backward records of ~60 layers, and AdamW's parameters,
        # gradients and moments before and after its step
        self.assertGreater(checked, 700)
        # integers in their float64 window: the labels, and each BatchNorm's
        # num_batches_tracked before and after its add_(1)
        self.assertGreaterEqual(self.compare_every_tensor(runs["tensor"], runs["statistics"],
                                                          kinds="iub"), 41)
        self.assertTrue(any(r.startswith("Optimizer.AdamW") for r in runs["statistics"]))


if not DEVICE_PATH:
    del Deferred

if __name__ == "__main__":
    unittest.main()
