"""The ranks as one: compare of two four-rank dumps of a real gloo job
(ranks_dumps.py) names the rank the error started on, says which ranks
inherited it through communication and from whom, and writes one workbook
with a per-rank sheet on top. Every expectation comes from the dumps
themselves (h5py, numpy): the first record of each rank whose tensors differ.

Also: when the details do not fit one sheet (lowered by cmp_report_rows) the
rows go into one workbook per rank, with the ranks and suspects in
result.xlsx.
"""
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import openpyxl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ranks_dumps as R  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
ROWS = os.environ.get("CMP_REPORT_ROWS", "")


def setUpModule():
    global WORK, BENCH, CMP
    if not R.PRELOAD or not os.path.exists(R.PRELOAD):
        raise unittest.SkipTest("MSPROBE_PRELOAD_LIB not set (run through ctest)")
    WORK = tempfile.mkdtemp(prefix="msp-cmp-ranks-")
    BENCH = R.dump(os.path.join(WORK, "bench"), 0)
    CMP = R.dump(os.path.join(WORK, "cmp"), 1e-3)


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


def compare(b, c, out, *extra):
    p = subprocess.run([BIN, "compare", "-b", b, "-c", c, "-o", out, "--csv"] + list(extra),
                       capture_output=True, text=True, timeout=900)
    if p.returncode not in (0, 1):
        raise AssertionError("compare failed (%d): %s" % (p.returncode, p.stderr))
    return p


def sheet(path, name):
    wb = openpyxl.load_workbook(path, read_only=True)
    rows = list(wb[name].iter_rows(values_only=True))
    names = wb.sheetnames
    wb.close()
    return names, [dict(zip(rows[0], r)) for r in rows[1:]]


class RanksAsOne(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = os.path.join(WORK, "out")
        cls.p = compare(BENCH, CMP, cls.out)
        cls.first = {r: R.first_difference(BENCH, CMP, r) for r in range(R.WORLD)}

    def test_the_planted_rank_differs_first_and_only_through_its_own_compute(self):
        # the premise, from the dumps alone
        self.assertIsNone(self.first[0])
        self.assertIsNone(self.first[1])
        self.assertFalse(self.first[2][1].startswith("Distributed."), self.first[2])
        self.assertTrue(self.first[3][1].startswith("Distributed."), self.first[3])

    def test_first_introduced_error_and_first_rank_are_the_planted_rank(self):
        step, rec = self.first[2]
        line = [l for l in self.p.stdout.splitlines() if l.startswith("first introduced error")][0]
        self.assertRegex(line, r"^first introduced error: step %d rank 2 (before )?%s " %
                         (step, re.escape(rec)))
        self.assertIn("ranks: 4, error first on rank 2 (step %d %s); inherited through "
                      "communication by rank 3 from rank 2 via %s" %
                      (step, rec, self.first[3][1]), self.p.stdout)

    def test_ranks_sheet_comes_first_with_one_row_per_rank(self):
        names, rows = sheet(os.path.join(self.out, "result.xlsx"), "ranks")
        self.assertEqual(names[:3], ["ranks", "summary", "details"])
        self.assertEqual([r["Rank"] for r in rows], [0, 1, 2, 3])
        for r in rows:
            recs, tens = R.counts(CMP, r["Rank"])
            self.assertEqual((r["Pairs"], r["Records"], r["Tensors"]), (R.STEPS, recs, tens))
        by = {r["Rank"]: r for r in rows}
        self.assertEqual(by[0]["Error Origin"], "none")
        self.assertEqual(by[1]["Error Origin"], "none")
        self.assertEqual(by[2]["Error Origin"], "introduced (first)")
        self.assertEqual((by[2]["Step"], by[2]["Record"]), self.first[2])
        self.assertEqual(by[3]["Error Origin"], "inherited")
        self.assertEqual(by[3]["From Rank"], 2)
        self.assertEqual((by[3]["Step"], by[3]["Record"]), self.first[3])

    def test_failing_records_per_rank_add_up_to_the_summary(self):
        _, ranks = sheet(os.path.join(self.out, "result.xlsx"), "ranks")
        _, summary = sheet(os.path.join(self.out, "result.xlsx"), "summary")
        for r in ranks:
            mine = [s for s in summary if s["Rank"] == r["Rank"]]
            self.assertEqual(r["Records"], len(mine))
            self.assertEqual(r["Failing Records"],
                             sum(s["Accuracy Reached or Not"] != "Yes" for s in mine))

    def test_a_collective_that_only_passed_the_error_on_is_marked_inherited(self):
        _, summary = sheet(os.path.join(self.out, "result.xlsx"), "summary")
        rows = {(s["Step"], s["Rank"], s["Name"]): s for s in summary}
        step, rec = self.first[3]
        via = rows[(step, 3, rec)]
        self.assertIn("inherited from rank 2 through this call", via["Reason"])
        self.assertNotEqual(via["Root Cause"], "ROOT CAUSE")
        root = [s for s in summary if s["Root Cause"] == "ROOT CAUSE"]
        self.assertEqual([(s["Step"], s["Rank"]) for s in root], [(self.first[2][0], 2)])

    def test_details_rows_carry_their_rank(self):
        with open(os.path.join(self.out, "result.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        for rank in range(R.WORLD):
            self.assertEqual(sum(r["Rank"] == str(rank) for r in rows), R.counts(CMP, rank)[1])


@unittest.skipUnless(ROWS, "CMP_REPORT_ROWS not set (run through ctest)")
class PerRankWorkbooks(unittest.TestCase):
    def test_past_one_sheet_each_rank_gets_a_workbook(self):
        out = os.path.join(WORK, "split")
        p = subprocess.run([ROWS, BENCH, CMP, out, "--rows", "1000"],
                           capture_output=True, text=True, timeout=900)
        self.assertEqual(p.returncode, 0, p.stderr)
        names, ranks = sheet(os.path.join(out, "result.xlsx"), "ranks")
        # the top workbook: ranks, suspects and the first step's error-flow chart
        self.assertEqual(names, ["ranks", "suspects", "error_flow", "error_flow_data"])
        _, suspects = sheet(os.path.join(out, "result.xlsx"), "suspects")
        self.assertEqual(suspects[0]["Rank"], 2)
        with open(os.path.join(out, "result.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        for r in ranks:
            rank = r["Rank"]
            self.assertEqual(r["Details"], "result_rank%d.xlsx" % rank)
            book = openpyxl.load_workbook(os.path.join(out, "result_rank%d.xlsx" % rank),
                                          read_only=True)
            recs, tens = R.counts(CMP, rank)
            # each sheet holds at most 1000 data rows: details_2, ... continue it
            self.assertEqual(book.sheetnames[0], "summary")
            det = [n for n in book.sheetnames if n.startswith("details")]
            self.assertEqual(len(det), (tens + 999) // 1000)
            got = []
            for n in det:
                got += list(book[n].iter_rows(values_only=True))[1:]
            book.close()
            self.assertEqual(len(got), tens)
            # the same rows the csv has for this rank, in the same order
            mine = [r2 for r2 in rows if r2["Rank"] == str(rank)]
            self.assertEqual([g[0] for g in got], [m["NPU Name"] for m in mine])


if __name__ == "__main__":
    unittest.main(verbosity=2)
