"""Replay of a large elementwise call judges a sample of its elements.

A call whose output element i depends on input element i alone (add, mul,
gelu, ...) and whose tensors all have the output's shape is replayed on
every k-th element when they hold over 2^19 elements (msprobe-compare(1),
REPLAY), every k-th block of 1,024 elements: the error over the sample
estimates the whole tensor's. Here a planted gelu (the tanh approximation on the compare side, erf on the bench
side) of 5,000,000 elements: replay must still call it introduced, say that
it sampled, and report the error computed here in float64 over those blocks
(within 1 % of the one over every element); a control of the same size (the same output on
both sides) must not be introduced.
(test_replay_sampled_optimizer.py: an optimizer's step, sampled alike.)

A sample must show the error to stand for the tensor: a mul whose compare
side is wrong in three elements only, none of them in a sampled block, is
replayed whole (an error that sits in a few lanes falls between the
samples), and called introduced."""
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
import openpyxl

from msp_h5dump import write_dump
from msp_ref import gelu, ordinal

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
N = 5_000_000


class SampledReplay(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-sampled-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_a_large_elementwise_call_is_judged_on_a_sample_of_its_elements(self):
        x = np.random.default_rng(11).standard_normal(N).astype(np.float32)
        erf = gelu(x, False)
        tanh = gelu(x, True)
        for side, out in (("gpu", erf), ("npu", tanh)):
            write_dump(os.path.join(self.work, side, "step0", "rank0", "dump.h5"),
                       [("Functional.gelu.0.forward", 0,
                         {"input.0": x, "output.0": out.astype(np.float32)}),
                        ("Functional.gelu.1.forward", 1,
                         {"input.0": x, "output.0": erf.astype(np.float32)})])
        out = os.path.join(self.work, "out")
        p = subprocess.run([BIN, "compare", "-b", "gpu", "-c", "npu", "-o", out, "--replay",
                            "all"], capture_output=True, text=True, timeout=600, cwd=self.work)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = list(wb["summary"].iter_rows(values_only=True))
        by = {r[rows[0].index("Name")]: dict(zip(rows[0], r)) for r in rows[1:]}
        plant = by["Functional.gelu.0.forward"]
        self.assertTrue(plant["Replay"].startswith("introduced"), plant)
        k = -(-N // (1 << 16))
        self.assertIn("on every %s block of 1024 elements" % ordinal(k),
                      plant["Reason"] + (plant["Replay"] or ""))
        # the compare side's float32 output against the float64 replay of its
        # inputs, over the sampled blocks and over every element, computed here
        got = tanh.astype(np.float32)
        kept = np.arange(N) % (k * 1024) < 1024
        on_sample = np.linalg.norm(got[kept] - erf[kept]) / np.linalg.norm(erf[kept])
        self.assertAlmostEqual(plant["Replay Error"] / on_sample, 1.0, delta=1e-3)
        want = np.linalg.norm(got - erf) / np.linalg.norm(erf)
        self.assertAlmostEqual(plant["Replay Error"] / want, 1.0, delta=0.01)
        self.assertNotEqual(by["Functional.gelu.1.forward"]["Error Origin"], "introduced")


    def test_an_error_in_a_few_elements_is_replayed_whole(self):
        rng = np.random.default_rng(5)
        x = rng.standard_normal(N).astype(np.float32)
        y = rng.standard_normal(N).astype(np.float32)
        good = x * y
        bad = good.copy()
        k = -(-N // (1 << 16))
        at = [2_000, 1_000_001, 3_000_003]
        self.assertTrue(all(i % (k * 1024) >= 1024 for i in at))
        bad[at] += np.float32(100.0)
        for side, out in (("gpu", good), ("npu", bad)):
            write_dump(os.path.join(self.work, side, "step0", "rank0", "dump.h5"),
                       [("Torch.mul.0.forward", 0, {"input.0": x, "input.1": y, "output.0": out})])
        out = os.path.join(self.work, "out")
        p = subprocess.run([BIN, "compare", "-b", "gpu", "-c", "npu", "-o", out],
                           capture_output=True, text=True, timeout=600, cwd=self.work)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = list(wb["summary"].iter_rows(values_only=True))
        row = dict(zip(rows[0], rows[1]))
        self.assertEqual(row["Name"], "Torch.mul.0.forward")
        self.assertTrue((row["Replay"] or "").startswith("introduced"), row)
        self.assertNotIn("on every", row["Replay"])
        ref = x.astype(np.float64) * y
        want = np.linalg.norm(bad - ref) / np.linalg.norm(ref)
        self.assertAlmostEqual(row["Replay Error"] / want, 1.0, delta=0.01)
        self.assertIn("Torch.mul.0.forward", p.stdout)


if __name__ == "__main__":
    unittest.main()
