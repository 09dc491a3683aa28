"""A tensor passed by position on one side and by keyword on the other.

The same training step, dumped twice under the preload shim: the bench side
calls F.layer_norm(h, (64,), w, b, 1e-5) and torch.clamp(y, -1.0, 1.0), the
compare side F.layer_norm(h, (64,), weight=w, bias=b, eps=1e-5) and
torch.clamp(y, min=-1.0, max=1.0). The dump records input.2 on one side and
kwarg.weight on the other; the API's signature (the dump's /defaults) says
they are one parameter, so compare must pair them (msprobe-compare(1),
MATCHING): nothing fails, and the weight rows' cosine is 1 (the tensors are
equal, checked with h5py). With the compare side's weight 1.05 times the
bench's (a checkpoint loaded differently), the weight passed by keyword must
be named before the layer_norm that uses it, with its error computed here
(numpy), and the layer_norm must not be blamed."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import h5py
import numpy as np
import openpyxl

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
TRAIN = """
import sys, torch
import torch.nn.functional as F
torch.manual_seed(0)
scale = float(sys.argv[2])
w = torch.nn.Parameter(torch.randn(64) * scale)
b = torch.nn.Parameter(torch.randn(64))
lin = torch.nn.Linear(64, 64)
opt = torch.optim.SGD(list(lin.parameters()) + [w, b], lr=0.1)
x = torch.randn(8, 64)
for step in range(2):
    h = lin(x)
    if sys.argv[1] == "position":
        y = F.layer_norm(h, (64,), w, b, 1e-5)
        z = torch.clamp(y, -1.0, 1.0)
    else:
        y = F.layer_norm(h, (64,), weight=w, bias=b, eps=1e-5)
        z = torch.clamp(y, min=-1.0, max=1.0)
    loss = z.square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
LN = "Functional.layer_norm.0.forward"


class KeywordAgainstPosition(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="msp-kwpos-")
        script = os.path.join(cls.work, "train.py")
        with open(script, "w") as f:
            f.write(TRAIN)
        cls.roots = {}
        for name, how, scale in (("pos", "position", 1.0), ("kw", "keyword", 1.0),
                                 ("kw5", "keyword", 1.05)):
            root = os.path.join(cls.work, name)
            cfg = root + ".json"
            with open(cfg, "w") as f:
                json.dump({"dump": {"common_dump_settings": {
                    "dump_mode": "api", "dump_path": root, "dump_iter": "all",
                    "task": "tensor"}}}, f)
            env = dict(os.environ, LD_PRELOAD=PRELOAD, MSPROBE_PATH=cfg, OMP_NUM_THREADS="1")
            env.pop("MSPROBE_LOG_FILE", None)
            p = subprocess.run([PYTHON, script, how, str(scale)], cwd=cls.work, env=env,
                               capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                raise AssertionError(p.stderr[-3000:])
            cls.roots[name] = root

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def compare(self, b, c):
        out = os.path.join(self.work, "out-%s-%s" % (b, c))
        p = subprocess.run([BIN, "compare", "-b", self.roots[b], "-c", self.roots[c], "-o", out],
                           capture_output=True, text=True, timeout=600)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = list(wb["details"].iter_rows(values_only=True))
        details = [dict(zip(rows[0], r)) for r in rows[1:]]
        rows = list(wb["summary"].iter_rows(values_only=True))
        summary = [dict(zip(rows[0], r)) for r in rows[1:]]
        return p, details, summary

    def tensor(self, side, rec, role):
        with h5py.File(os.path.join(self.roots[side], "step0", "rank0", "dump.h5"), "r") as f:
            return f[rec][role][()].astype(np.float64)

    def row(self, details, npu):
        got = [r for r in details if r["NPU Name"] == npu]
        self.assertEqual(len(got), 2, [r["NPU Name"] for r in details])  # steps 0 and 1
        return got[0]

    def test_keyword_and_position_pair_as_one_parameter(self):
        p, details, _ = self.compare("pos", "kw")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("no introduced error found", p.stdout)
        for role, pos in (("kwarg.weight", "input.2"), ("kwarg.bias", "input.3")):
            r = self.row(details, "%s.%s" % (LN, role))
            self.assertEqual(r["Bench Name"], "%s.%s" % (LN, pos))
            self.assertTrue(np.array_equal(self.tensor("kw", LN, role),
                                           self.tensor("pos", LN, pos)))
            self.assertAlmostEqual(r["Cosine"], 1.0, places=6)
        # the backward's gradients of those parameters pair the same way
        r = self.row(details, "Functional.layer_norm.0.backward.output.kwarg.weight")
        self.assertEqual(r["Bench Name"], "Functional.layer_norm.0.backward.output.2")
        self.assertFalse([r["NPU Name"] for r in details if r["Bench Name"] in (None, "N/A")])

    def test_a_weight_given_by_keyword_that_differs_is_named(self):
        p, details, summary = self.compare("pos", "kw5")
        first = [l for l in p.stdout.splitlines() if l.startswith("first introduced error")]
        self.assertEqual(len(first), 1, p.stdout)
        self.assertIn("step 0 rank 0 before %s kwarg.weight" % LN, first[0])
        want_w = self.tensor("kw5", LN, "kwarg.weight")
        have_w = self.tensor("pos", LN, "input.2")
        e = np.linalg.norm(want_w - have_w) / np.linalg.norm(have_w)
        self.assertAlmostEqual(e, 0.05, delta=1e-6)
        self.assertIn("error %.2g" % e, p.stdout)
        ln = [r for r in summary if r["Name"] == LN and r["Step"] == 0][0]
        self.assertNotEqual(ln["Error Origin"], "introduced", ln)


if __name__ == "__main__":
    unittest.main()
