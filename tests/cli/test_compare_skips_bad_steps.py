"""compare and ls of a dump root with unreadable step files (a truncated
dump.h5, as a killed run leaves, and a 0-byte one, as a full disk leaves):
each bad file is one warning naming it and why, and the intact steps are still
compared into result.xlsx (read back with openpyxl) or listed. Dumps are
written with h5py (msp_h5dump), cut with truncate(1)."""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import openpyxl

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
import msp_h5dump  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
RECORDS = ("Functional.relu.0.forward", "Torch.matmul.1.forward")


def write_root(root, steps, seed):
    rng = np.random.default_rng(seed)
    for step in steps:
        path = os.path.join(root, f"step{step}", "rank0", "dump.h5")
        os.makedirs(os.path.dirname(path))
        recs = [(f"{name}", order, {"input.0": rng.standard_normal(8).astype(np.float32),
                                    "output.0": rng.standard_normal(8).astype(np.float32)})
                for order, name in enumerate(RECORDS)]
        msp_h5dump.write_dump(path, recs, step=step, rank=0)


class BadStepsCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.bench, self.cmp = os.path.join(d, "bench"), os.path.join(d, "cmp")
        write_root(self.bench, (0, 1, 2), seed=1)
        write_root(self.cmp, (0, 1, 2), seed=2)
        self.truncated = os.path.join(self.cmp, "step1", "rank0", "dump.h5")
        size = os.path.getsize(self.truncated)
        subprocess.run(["truncate", "-s", str(size // 2), self.truncated], check=True)
        self.empty = os.path.join(self.cmp, "step2", "rank0", "dump.h5")
        subprocess.run(["truncate", "-s", "0", self.empty], check=True)
        self.out = os.path.join(d, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def test_compare_skips_each_bad_step_with_one_warning_and_compares_the_rest(self):
        p = subprocess.run([BIN, "compare", "-b", self.bench, "-c", self.cmp, "-o", self.out],
                           capture_output=True, text=True)
        # the intact step was compared, the two bad ones were not: exit 3, and
        # stdout names each step not compared
        self.assertEqual(p.returncode, 3, p.stderr)
        not_compared = [ln for ln in p.stdout.splitlines() if ln.startswith("not compared: ")]
        self.assertEqual(len(not_compared), 2, p.stdout)
        self.assertTrue(not_compared[0].startswith("not compared: step 1 rank 0"), p.stdout)
        self.assertIn(self.truncated, not_compared[0])
        self.assertTrue(not_compared[1].startswith("not compared: step 2 rank 0"), p.stdout)
        self.assertIn(self.empty, not_compared[1])
        warnings = [ln for ln in p.stderr.splitlines() if ln.startswith("msprobe: warning:")]
        for bad, why in ((self.truncated, "truncated"), (self.empty, "")):
            mine = [ln for ln in warnings if bad in ln]
            self.assertEqual(len(mine), 1, p.stderr)
            self.assertIn(why, mine[0])
        self.assertTrue(all(ln.startswith("msprobe: ") for ln in p.stderr.splitlines()), p.stderr)
        wb = openpyxl.load_workbook(os.path.join(self.out, "result.xlsx"), read_only=True)
        ws = wb["details"]
        rows = list(ws.iter_rows(values_only=True))
        col = rows[0].index("NPU Name")
        names = sorted(r[col] for r in rows[1:] if r[col])
        # step 0 only: two records of an input and an output each
        want = sorted(f"{rec}.{role}" for rec in RECORDS for role in ("input.0", "output.0"))
        self.assertEqual(names, want)

    def test_ls_lists_the_intact_steps_and_names_both_bad_files(self):
        p = subprocess.run([BIN, "ls", self.cmp], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn(self.truncated, p.stderr)
        self.assertIn(self.empty, p.stderr)
        headers = [ln for ln in p.stdout.splitlines() if ln.startswith("step ")]
        self.assertEqual(len(headers), 1, p.stdout)
        self.assertTrue(headers[0].startswith("step 0 rank 0:"), headers[0])


if __name__ == "__main__":
    unittest.main()
