"""Activations under `msprobe monitor` without msprobe's copies: a module's
inputs and outputs reach the next module as they are (aliases), except where
an in-place change needs a copy, and a tensor met again (a module's output
that is the next one's input, a gradient passing through nested modules) is
reduced once. Checked on actv_train.py's four small models:

- each step's loss is bit for bit the loss of the same script run plainly;
- the rows of step 0 equal numpy's statistics of the activations and
  gradients this test recomputes with plain autograd (no hooks);
- MSPROBE_MONITOR_PROFILE's counts: tensors reduced, rows reusing them and
  activations copied, counted by hand below for each model;
- zeros (the share of |x| < eps, compared in float64 as msprobe does) on
  float32 values just under, at and just over eps;
- activations and gradients large enough to be read in pieces by two
  threads, of four dtypes, one with a NaN in a late piece: numpy's numbers,
  the same in two runs byte for byte.
"""
import os
import re
import sys
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import actv_train  # noqa: E402
import montest as mt  # noqa: E402

OPS = ["min", "max", "mean", "norm", "zeros", "nans"]
EPS = 1e-8
CONF = {"targets": {}, "xy_distribution": True, "ops": OPS, "ndigits": 12, "eps": EPS}
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "actv_train.py")
COUNTS = re.compile(r"monitor: (\d+) tensors reduced \((\d+) read in pieces by two threads\), "
                    r"(\d+) rows took the numbers of the same memory just seen, (\d+) "
                    r"activations copied for an in-place change")


def stats(t):
    a = t.detach().double().numpy().ravel()
    return [a.min(), a.max(), a.mean(), np.sqrt(np.sum(a * a)),
            np.count_nonzero(np.abs(a) < EPS) / a.size, np.count_nonzero(np.isnan(a))]


def reference_wide():
    """({row: tensor}, {row: gradient}) of step 0 of the wide model, from
    plain autograd (retain_grad, no hooks); gradients only where one flows."""
    model = actv_train.build("wide")
    os.environ["ACTV_MODEL"] = "wide"
    try:
        x, y = actv_train.data()
    finally:
        del os.environ["ACTV_MODEL"]
    keep = {}
    out = model(x, keep)
    grads = [keep["fc"][1], keep["act"][1], keep["bf"][1], keep["f64"][1], keep["head"][0], out]
    for t in grads:
        t.retain_grad()
    torch.nn.functional.mse_loss(out, y).backward()
    actv = {}
    for mod, (i, o) in keep.items():
        actv[mod + ".input"], actv[mod + ".output"] = i, o
    grad = {"fc.output": keep["fc"][1].grad, "act.input": keep["fc"][1].grad,
            "act.output": keep["act"][1].grad, "bf.input": keep["act"][1].grad,
            "bf.output": keep["bf"][1].grad, "f64.input": keep["bf"][1].grad,
            "f64.output": keep["f64"][1].grad, "head.input": keep["head"][0].grad,
            "head.output": out.grad, ".output": out.grad}
    return actv, grad


def reference(kind):
    """{row name: tensor or None} of step 0's actv and actv_grad, from plain
    autograd: retain_grad on every intermediate, no module hook."""
    model = actv_train.build(kind)
    x, y = actv_train.data()
    if kind == "seq":
        fc1, _, fc2 = model
        a = fc1(x)
        b = torch.relu(a)
        c = fc2(b)
        names = {"0": (x, a), "1": (a, b), "2": (b, c), "": (x, c)}
        ts = (a, b, c)
    else:  # view: Identity hands fc1's output on; the caller halves it
        a = model.fc1(x)
        h = a * 0.5
        c = model.fc2(h)
        names = {"fc1": (x, a), "same": (a, a), "fc2": (h, c), "": (x, c)}
        ts = (a, h, c)
    for t in ts:
        t.retain_grad()
    torch.nn.functional.mse_loss(c, y).backward()
    actv, grad = {}, {}
    for mod, (i, o) in names.items():
        actv[mod + ".input"], actv[mod + ".output"] = i, o
        grad[mod + ".input"] = i.grad if i is not x else None
        grad[mod + ".output"] = o.grad
    return actv, grad


class ActivationsAsTheyAre(mt.MonitorCase):
    def run_model(self, kind, conf=CONF, extra=None):
        env = dict(os.environ, ACTV_MODEL=kind, **(extra or {}))
        plain = mt.subprocess.run([mt.PYTHON, SCRIPT], env=env, capture_output=True, text=True)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        out = self.path("out_" + kind + (extra or {}).get("ACTV_EPS", ""))
        p = self.monitor(self.write_config(conf), out, args=(SCRIPT,),
                         env=dict({"ACTV_MODEL": kind, "MSPROBE_MONITOR_PROFILE": "1"},
                                  **(extra or {})))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, plain.stdout)  # the same losses, bit for bit
        m = COUNTS.search(p.stderr)
        self.assertIsNotNone(m, p.stderr)
        return mt.run_dir(out), [int(v) for v in m.groups()], p.stderr

    def check_rows(self, d, kind):
        for task, want in zip(("actv", "actv_grad"), reference(kind)):
            _, rows = mt.read_csv(os.path.join(d, f"{task}_0-0.csv"))
            self.assertEqual(sorted(r[1] for r in rows), sorted(want))
            for r in rows:
                t = want[r[1]]
                if t is None:
                    self.assertEqual(r[4:10], ["nan"] * 6, (task, r))
                    continue
                self.assertEqual(r[-2], str(list(t.shape)))
                for op, got, exp in zip(OPS, r[4:10], stats(t)):
                    self.assertTrue(np.isclose(float(got), exp, rtol=1e-6, atol=1e-9),
                                    (task, r[1], op, got, exp))

    def test_no_copy_and_each_tensor_reduced_once(self):
        # A step: forward rows x, a | a, b | b, c (Linear, ReLU, Linear), then
        # the Sequential's x, c: 4 tensors, 4 rows reusing them; backward rows
        # dc, db | db, da | none, da and the Sequential's none, dc: 3 and 3.
        d, counts, _ = self.run_model("seq")
        self.assertEqual(counts, [3 * 7, 0, 3 * 7, 0])
        self.check_rows(d, "seq")

    def test_in_place_relu_copies_only_its_input(self):
        # ReLU(inplace=True) changes its (copied) input, then both its rows
        # are that copy: still 7 and 7 a step, one copy a step.
        _, counts, _ = self.run_model("inplace")
        self.assertEqual(counts, [3 * 7, 0, 3 * 7, 3 * 1])

    def test_unwritten_steps_run_as_plain_training(self):
        # step_interval 2 over 3 steps writes steps 0 and 2. Step 1 starts
        # with torch's global hook tables as in plain training but for the
        # shim's own forward hook: the monitor's forward hook and full
        # backward hook are gone (no BackwardHook, no alias, no copy), and
        # come back for step 2. Counts: 7 + 7 a written step, the in-place
        # ReLU's one copy a written step.
        conf = dict(CONF, step_interval=2)
        _, counts, err = self.run_model("inplace", conf, {"ACTV_HOOKS": "1"})
        self.assertEqual(counts, [2 * 7, 0, 2 * 7, 2])
        env = dict(os.environ, ACTV_MODEL="inplace", ACTV_HOOKS="1")
        plain = mt.subprocess.run([mt.PYTHON, SCRIPT], env=env, capture_output=True, text=True)
        got, base = mt.hooks_said(err), mt.hooks_said(plain.stderr)
        self.assertEqual(sorted(got), [0, 1, 2], err)
        self.assertEqual(base[1], (0, 0), plain.stderr)
        self.assertEqual(got[1][1], base[1][1], err)  # no full backward hook
        for step in (0, 2):
            self.assertEqual(got[step], (got[1][0] + 1, got[1][1] + 1), err)

    def test_a_module_seen_changing_its_input_is_copied_after(self):
        # Step 0 gives module 1 its input as it is: the change is seen, said
        # once, and steps 1 and 2 copy it. Its input row is the changed
        # memory, no longer the Linear's output: 5 forward tensors a step
        # (x, a, the changed input, its output, c), 3 gradients; 3 and 3
        # rows reuse them.
        _, counts, err = self.run_model("changes")
        self.assertEqual(counts, [3 * 8, 0, 3 * 6, 2])
        self.assertEqual(err.count("module 1 changed its input in place"), 1, err)

    def test_an_output_that_is_an_input_is_copied(self):
        # Identity hands its input back and the caller changes it in place:
        # that output is a copy (one a step), so the Linear's output the
        # rows name keeps its values; same counts as seq.
        d, counts, _ = self.run_model("view")
        self.assertEqual(counts, [3 * 7, 0, 3 * 7, 3])
        self.check_rows(d, "view")

    def test_zeros_beside_eps(self):
        # eps not a float32 (1e-3), one that is (0.5), one over float32's
        # range (every finite value counts)
        for eps in ("1e-3", "0.5", "1e40"):
            with self.subTest(eps=eps):
                a = actv_train.edges(float(eps)).double().numpy().ravel()
                want = np.count_nonzero(np.abs(a) < float(eps)) / a.size
                self.assertTrue(0 < want <= 1)
                conf = dict(CONF, eps=float(eps))
                d, _, _ = self.run_model("edges", conf, {"ACTV_EPS": eps})
                _, rows = mt.read_csv(os.path.join(d, "actv_0-0.csv"))
                row = [r for r in rows if r[1] == "0.input"][0]
                self.assertEqual(float(row[8]), want, (eps, row))

    def test_large_tensors_read_in_pieces(self):
        # A step's tensors of 655,360 elements, each reduced once: forward
        # fc, act, bf, f64, poison and f16's outputs and head's input (the
        # inputs are outputs just seen); backward the gradients of head's
        # input, f64's output and input, bf's input and act's input (the
        # outputs' are the inputs' just seen; poison and f16 get none).
        d, counts, _ = self.run_model("wide")
        self.assertEqual(counts[1], 3 * 12, counts)
        actv, grad = reference_wide()
        for task, want in (("actv", actv), ("actv_grad", grad)):
            _, rows = mt.read_csv(os.path.join(d, f"{task}_0-0.csv"))
            got = {r[1]: r for r in rows}
            for name, t in want.items():
                r = got[name]
                self.assertEqual(r[-2], str(list(t.shape)), (task, name))
                self.assertEqual(r[-1], str(t.dtype), (task, name))
                for op, v, exp in zip(OPS, r[4:10], stats(t)):
                    self.assertTrue(np.isclose(float(v), exp, rtol=1e-9, atol=1e-12,
                                               equal_nan=True), (task, name, op, v, exp))
        self.assertEqual(got[".output"][4:10], got["head.output"][4:10])
        _, rows = mt.read_csv(os.path.join(d, "actv_0-0.csv"))
        self.assertEqual([r[9] for r in rows if r[1] == "poison.output"], ["1"])
        # the pieces' sums are added in their order, whichever thread read them
        d2, _, _ = self.run_model("wide", extra={"ACTV_EPS": "2"})
        for step in range(3):
            for task in ("actv", "actv_grad"):
                name = f"{task}_{step}-{step}.csv"
                with open(os.path.join(d, name)) as a, open(os.path.join(d2, name)) as b:
                    self.assertEqual(a.read(), b.read(), name)


if __name__ == "__main__":
    unittest.main()
