"""Replay's check: the bench side's own replay must reproduce its output.

When compare's replay calls a record introduced, the bench side is replayed
too, as the check that the call is rebuilt exactly (msprobe-compare(1),
REPLAY); a bench output the replay cannot reproduce makes the record "not
replayable" with the distance. When the inputs are identical on both sides
(same roles, dtypes, context and setting arguments), the bench side's replay
is the compare side's very call, and its outputs are judged in the same job.
Here F.gelu of the same x on both sides, approximate left out (erf): the
bench recorded the tanh approximation's output (its kernel is not the call
it says it is) and the compare side an erf gelu 1 % off. The check must
refuse the record with the bench's own distance, computed here in float64
(numpy); a pair whose bench output is the erf gelu must be introduced."""
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
import openpyxl

from msp_h5dump import write_dump
from msp_ref import gelu

BIN = os.environ.get("MSPROBE_BIN", "msprobe")


class BenchCheck(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-check-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def run_pair(self, bench_out, cmp_out, x):
        for side, out in (("gpu", bench_out), ("npu", cmp_out)):
            write_dump(os.path.join(self.work, side, "step0", "rank0", "dump.h5"),
                       [("Functional.gelu.0.forward", 0,
                         {"input.0": x, "output.0": out.astype(np.float32)})])
        out = os.path.join(self.work, "out")
        shutil.rmtree(out, ignore_errors=True)
        p = subprocess.run([BIN, "compare", "-b", "gpu", "-c", "npu", "-o", out],
                           capture_output=True, text=True, timeout=600, cwd=self.work)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = list(wb["summary"].iter_rows(values_only=True))
        return dict(zip(rows[0], rows[1]))

    def test_a_bench_output_the_call_cannot_give_is_refused_with_its_own_distance(self):
        x = np.random.default_rng(2).standard_normal(4096).astype(np.float32)
        erf = gelu(x, False)
        bench = gelu(x, True).astype(np.float32)
        wrong = (erf * 1.01).astype(np.float32)
        row = self.run_pair(bench, wrong, x)
        self.assertTrue((row["Replay"] or "").startswith("not replayable"), row)
        self.assertIn("not rebuilt exactly", row["Replay"])
        want = np.linalg.norm(bench.astype(np.float64) - erf) / np.linalg.norm(erf)
        got = float(row["Replay"].split("own inputs is ")[1].split(" ")[0])
        self.assertAlmostEqual(got / want, 1.0, delta=0.01)
        # the compare side's own distance (1 %) is not what the check reports
        self.assertGreater(abs(got - 0.01), 0.005)

    def test_a_bench_output_the_call_gives_lets_the_verdict_stand(self):
        x = np.random.default_rng(2).standard_normal(4096).astype(np.float32)
        erf = gelu(x, False)
        row = self.run_pair(erf.astype(np.float32), (erf * 1.01).astype(np.float32), x)
        self.assertTrue((row["Replay"] or "").startswith("introduced"), row)
        self.assertAlmostEqual(row["Replay Error"], 0.01, delta=1e-4)


if __name__ == "__main__":
    unittest.main()
