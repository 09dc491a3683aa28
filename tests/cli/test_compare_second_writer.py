"""A second process that wrote rank R gets its own directory rankR-K
(msprobe-dump(5)); compare pairs rankR-K with rankR-K and ls lists it, so
what it wrote is compared and not silently left out. Dumps are written with
h5py (msp_h5dump); expected metrics come from numpy."""
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


def write(path, x, y):
    os.makedirs(os.path.dirname(path))
    msp_h5dump.write_dump(path, [("Functional.relu.0.forward", 0,
                                  {"input.0": x, "output.0": y})], step=0, rank=0)


class SecondWriter(unittest.TestCase):
    def test_rank_k_directories_pair_and_list(self):
        rng = np.random.default_rng(3)
        x = rng.standard_normal(64).astype(np.float32)
        y = np.maximum(x, 0)
        y2 = y.copy()
        y2[5] += 0.5  # only the second writer's compare side differs
        with tempfile.TemporaryDirectory() as d:
            b, c = os.path.join(d, "bench"), os.path.join(d, "cmp")
            write(os.path.join(b, "step0", "rank0", "dump.h5"), x, y)
            write(os.path.join(c, "step0", "rank0", "dump.h5"), x, y)
            write(os.path.join(b, "step0", "rank0-1", "dump.h5"), x, y)
            write(os.path.join(c, "step0", "rank0-1", "dump.h5"), x, y2)
            p = subprocess.run([BIN, "ls", c], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(os.path.join("rank0-1", "dump.h5"), p.stdout)
            out = os.path.join(d, "out")
            p = subprocess.run([BIN, "compare", "-b", b, "-c", c, "-o", out],
                               capture_output=True, text=True)
            self.assertIn(p.returncode, (0, 1), p.stderr)
            ws = openpyxl.load_workbook(os.path.join(out, "result.xlsx"))["details"]
            hdr = [v.value for v in ws[1]]
            rows = [r for r in ws.iter_rows(min_row=2, values_only=True)
                    if r[hdr.index("NPU Name")] == "Functional.relu.0.forward.output.0"]
            self.assertEqual(len(rows), 2, "both writers' files compared")
            got = sorted(r[hdr.index("MaxAbsErr")] for r in rows)
            self.assertEqual(got[0], 0.0)
            self.assertAlmostEqual(got[1], float(np.abs(y2 - y).max()), places=6)


if __name__ == "__main__":
    unittest.main()
