"""Replay of a large elementwise optimizer step judges a sample of elements.

An optimizer that updates each element from its own gradient and state
(AdamW) is replayed on a sample like an elementwise call
(msprobe-compare(1), REPLAY; test_replay_sampled.py has the calls): its
parameters, gradients and states alike, sent as every k-th block of 1,024
elements. Here a
real AdamW step on a 4.7M-element weight, run under the dump shim,
weight_decay 0.5 on the compare side against 0.01 on the bench side. Replay
must call the step introduced on that sample, with the error computed here
over those blocks, within 1 % of the one over every element (numpy,
float64, AdamW's first step by hand from the dumped parameter and
gradient). A parameter of 4,000 elements beside it goes whole: its sample
would be its first block, which here has no gradient and no error."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import h5py
import numpy as np
import openpyxl

from msp_ref import ordinal

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
ROWS, COLS = 2048, 2304  # 4,718,592 elements: over 2^19
LR = 1e-2
TRAIN = """
import sys, torch
torch.manual_seed(0)
lin = torch.nn.Linear(%d, %d, bias=False)
opt = torch.optim.AdamW(lin.parameters(), lr=%r, weight_decay=float(sys.argv[1]))
x = torch.randn(4, %d)
loss = lin(x).square().mean()
opt.zero_grad()
loss.backward()
opt.step()
""" % (COLS, ROWS, LR, COLS)


# A second parameter of 4,000 elements in a group of its own, whose learning
# rate is the plant; its first 1,024 elements get no gradient (Adam then
# leaves them as they were, on both sides), so its sample (its first block
# of 1,024 elements alone) shows no error: it must be sent whole for the
# sample to see the record's.
SMALL_LR_BENCH = 1e-3
TRAIN_SMALL = """
import sys, torch
torch.manual_seed(0)
lin = torch.nn.Linear(%d, %d, bias=False)
s = torch.nn.Parameter(torch.linspace(0.5, 2.0, 4000))
opt = torch.optim.AdamW([{"params": [lin.weight]},
                         {"params": [s], "lr": float(sys.argv[1]), "weight_decay": 0.0}],
                        lr=%r, weight_decay=0.01)
x = torch.randn(4, %d)
loss = lin(x).square().mean() + (s[1024:] * x[0, 0]).sum()
opt.zero_grad()
loss.backward()
opt.step()
""" % (COLS, ROWS, LR, COLS)


class SampledOptimizer(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-sampled-opt-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def dump_adamw(self, side, wd, train=TRAIN):
        root = os.path.join(self.work, side)
        cfg = root + ".json"
        with open(cfg, "w") as f:
            json.dump({"dump": {"common_dump_settings": {
                "dump_mode": "api", "dump_path": root, "dump_iter": "all", "task": "tensor"}}}, f)
        script = os.path.join(self.work, "train.py")
        with open(script, "w") as f:
            f.write(train)
        env = dict(os.environ, LD_PRELOAD=PRELOAD, MSPROBE_PATH=cfg, OMP_NUM_THREADS="1")
        env.pop("MSPROBE_LOG_FILE", None)
        p = subprocess.run([PYTHON, script, str(wd)], cwd=self.work, env=env,
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        return root

    def sampled_step(self, b, c):
        """The summary row of the AdamW step compare gives (it must say
        introduced, on every k-th element of the large weight, k computed
        here), and the (param, grad, output) of parameter i as the compare
        side dumped them, in float64."""
        out = os.path.join(self.work, "out")
        p = subprocess.run([BIN, "compare", "-b", b, "-c", c, "-o", out], capture_output=True,
                           text=True, timeout=600, cwd=self.work)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = list(wb["summary"].iter_rows(values_only=True))
        by = {r[rows[0].index("Name")]: dict(zip(rows[0], r)) for r in rows[1:]}
        step = by["Optimizer.AdamW.0.step"]
        self.assertTrue((step["Replay"] or "").startswith("introduced"), step)
        k = -(-ROWS * COLS // (1 << 16))
        self.assertIn("on every %s block of 1024 elements" % ordinal(k), step["Replay"])
        with h5py.File(os.path.join(c, "step0", "rank0", "dump.h5"), "r") as f:
            rec = f["Optimizer.AdamW.0.step"]
            side = lambda i: tuple(rec[r % i][()].astype(np.float64) for r in (
                "input.param.%d", "input.grad.%d", "output.param.%d"))
            return step, side(0), side(1) if "input.param.1" in rec else None

    def test_a_small_parameter_goes_whole_beside_a_sampled_large_one(self):
        b = self.dump_adamw("gpu", SMALL_LR_BENCH, TRAIN_SMALL)
        c = self.dump_adamw("npu", 1e-2, TRAIN_SMALL)
        step, _, (prm, g, got) = self.sampled_step(b, c)
        # the first block: no gradient, no error
        self.assertTrue((g[:1024] == 0.0).all() and (g[1024:] != 0.0).all())
        self.assertTrue((got[:1024] == prm[:1024]).all())
        # AdamW's first step with the bench side's lr, no weight decay
        want = prm - SMALL_LR_BENCH * g / (np.abs(g) + 1e-8)
        e = np.linalg.norm(got - want) / np.linalg.norm(want)
        self.assertGreater(e, 1e-3)
        self.assertAlmostEqual(step["Replay Error"] / e, 1.0, delta=0.01)

    def test_an_elementwise_optimizer_step_is_judged_on_a_sample(self):
        b = self.dump_adamw("gpu", 0.01)
        c = self.dump_adamw("npu", 0.5)
        step, (prm, g, got), _ = self.sampled_step(b, c)
        # AdamW's first step with the bench side's weight_decay, in float64
        # over every element: p (1 - lr wd) - lr g / (|g| + eps) (bias
        # correction makes m_hat = g and v_hat = g^2)
        want = prm * (1 - LR * 0.01) - LR * g / (np.abs(g) + 1e-8)
        k = -(-ROWS * COLS // (1 << 16))
        kept = np.arange(ROWS * COLS) % (k * 1024) < 1024
        on_sample = np.linalg.norm(got.reshape(-1)[kept] - want.reshape(-1)[kept]) / \
            np.linalg.norm(want.reshape(-1)[kept])
        self.assertAlmostEqual(step["Replay Error"] / on_sample, 1.0, delta=1e-3)
        e = np.linalg.norm(got - want) / np.linalg.norm(want)
        self.assertGreater(e, 1e-4)
        self.assertAlmostEqual(step["Replay Error"] / e, 1.0, delta=0.01)

if __name__ == "__main__":
    unittest.main()
