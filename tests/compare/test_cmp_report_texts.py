"""The workbook and result.csv print a details row's numbers from one set of
texts when both are written (src/report/rep_texts.c, issue 42): made a chunk
of 256 rows at a time by whichever report comes first, copied by the other.
Statistics dumps written with h5py alone (tests/lib/msp_h5dump.py), 2 ranks
of 300 records, hold values of every kind a text can take: ones that need 17
digits, integers, -0, the smallest and largest normals, NaN and both
infinities. In both reports every side's statistic is the value written,
each finite difference is npu - bench as numpy works it out (the others
the same in both), NaN reads "N/A" and
the infinities "inf" and "-inf" (text cells in the workbook, numbers
otherwise), and the workbook written beside the csv is the workbook
written alone, cell for cell."""
import csv
import math
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import openpyxl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
import msp_h5dump as H  # noqa: E402

MSPROBE = os.environ.get("MSPROBE_BIN", "msprobe")
RECORDS = 300
KINDS = [float(np.float32(0.1)), 2.0, -0.0, 2.2250738585072014e-308, 1.7976931348623157e308,
         float("nan"), float("inf"), float("-inf"), -3.25, float(np.float32(1) / np.float32(3))]


def side_values(rank, rec, side):
    """(max, min, mean, norm) of a tensor: kinds in turn, and some plain
    values that differ between the sides"""
    k = (rank * RECORDS + rec) * 4
    vals = []
    for i in range(4):
        v = KINDS[(k + i) % len(KINDS)] if (rec + i) % 3 == 0 else (rec + i) * 0.001
        if side == "npu" and (rec + i) % 3 != 0:
            v = float(np.float32(v * 1.0001))
        vals.append(v)
    return vals


def text_of(v):
    return "N/A" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else None


class ReportTexts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="msp-report-texts-")
        for side in ("bench", "npu"):
            for rank in range(2):
                recs = []
                for r in range(RECORDS):
                    mx, mn, mean, norm = side_values(rank, r, side)
                    recs.append((f"Torch.op.{r}.forward", r,
                                 {"output.0": H.Stats("torch.float32", (4,), mx, mn, mean, norm)}))
                H.write_dump(os.path.join(cls.work, side, "step0", f"rank{rank}", "dump.h5"),
                             recs, task="statistics", rank=rank, world_size=2)

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["rm", "-rf", cls.work])

    def compare(self, out, *extra):
        r = subprocess.run([MSPROBE, "compare", "-b", os.path.join(self.work, "bench"), "-c",
                            os.path.join(self.work, "npu"), "-o", out, "--replay", "off",
                            "--no-html", *extra], capture_output=True, text=True, timeout=300)
        self.assertIn(r.returncode, (0, 1), r.stdout + r.stderr)

    def test_both_reports_print_the_same_numbers_right(self):
        both, alone = os.path.join(self.work, "both"), os.path.join(self.work, "alone")
        self.compare(both, "--csv")
        self.compare(alone)
        with open(os.path.join(both, "result.csv"), newline="") as f:
            rows = list(csv.reader(f))
        head, rows = rows[0], rows[1:]
        wb = openpyxl.load_workbook(os.path.join(both, "result.xlsx"), read_only=True)
        cells = list(wb["details"].iter_rows(values_only=True))
        wb.close()
        self.assertEqual(list(cells[0]), head)
        cells = cells[1:]
        wb = openpyxl.load_workbook(os.path.join(alone, "result.xlsx"), read_only=True)
        self.assertEqual(list(wb["details"].iter_rows(values_only=True))[1:], cells)
        wb.close()
        self.assertEqual(len(rows), 2 * RECORDS)
        col = {n: head.index(n) for n in head}
        sides = ("max", "min", "mean", "l2norm")
        kinds = set()
        for row, cell in zip(rows, cells):
            rank, rec = int(row[col["Rank"]]), int(row[col["NPU Name"]].split(".")[2])
            npu, bench = side_values(rank, rec, "npu"), side_values(rank, rec, "bench")
            want = {f"NPU {s}": v for s, v in zip(sides, npu)}
            want.update({f"Bench {s}": v for s, v in zip(sides, bench)})
            with np.errstate(invalid="ignore", over="ignore"):
                diffs = np.array(npu) - np.array(bench)
            for n, d in zip(("Max diff", "Min diff", "Mean diff", "L2norm diff"), diffs):
                if np.isfinite(d):
                    want[n] = float(d)
                else:  # compare's own rules for what is not finite: the two agree
                    text, got = row[col[n]], cell[col[n]]
                    self.assertEqual(text, got if isinstance(got, str) else text, (rank, rec, n))
                    if not isinstance(got, str):
                        self.assertEqual(float(text), got, (rank, rec, n))
            for name, v in want.items():
                text, got = row[col[name]], cell[col[name]]
                if text_of(v) is not None:
                    kinds.add(text_of(v))
                    self.assertEqual((text, got), (text_of(v), text_of(v)), (rank, rec, name))
                else:
                    kinds.add("number")
                    self.assertIsInstance(got, (int, float), (rank, rec, name))
                    self.assertEqual(float(text), v, (rank, rec, name, text))
                    self.assertEqual(float(got), v, (rank, rec, name))
                    self.assertEqual(math.copysign(1, float(text)), math.copysign(1, v))
            for name in ("MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"):
                self.assertEqual(row[col[name]], cell[col[name]], (rank, rec, name))
        self.assertEqual(kinds, {"number", "N/A", "inf", "-inf"})


if __name__ == "__main__":
    unittest.main()
