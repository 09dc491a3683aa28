"""A compared row's names come from blocks its result holds (issue 42): the
NPU and bench names (RECORD.ROLE), the data names (/RECORD/ROLE) and the
producer of every row, and each record's names, were malloc'd one by one and
freed one by one, a third of a statistics compare's allocations; now they
are carved from a few blocks freed with the result.

Two statistics trees of msprobe-gen's, 50 and 450 layers (one rank and
step), compared by msprobe with a library preloaded (fmt_call_count.c) that
counts msprobe's own malloc calls: the larger tree's 2,000 more rows (800
more records) cost fewer than 4 calls each (57bd4f6 made 5.4; now 2.6). What
the report names is what the dumps hold: every details row of result.xlsx
(openpyxl) names RECORD.ROLE of a row h5py reads in each dump, each once,
and on a tensor tree Data_name is [/RECORD/ROLE, /RECORD/ROLE]."""
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import openpyxl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
from msp_build import GEN, sanitized_build  # noqa: E402
from msp_h5dump import stats_rows  # noqa: E402

COUNTER = None  # fmt_call_count's path, from the command line


class RowNames(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="msp-row-names-")
        cls.addClassCleanup(shutil.rmtree, cls.work, ignore_errors=True)

    def setUp(self):
        if not os.access(GEN, os.X_OK):
            self.skipTest("no msprobe-gen (MSPROBE_BENCH=OFF)")

    def tree(self, name, layers, task, numel):
        d = os.path.join(self.work, name)
        if not os.path.isdir(d):
            subprocess.run([GEN, "--out", d, "--steps", "1", "--ranks", "1", "--layers",
                            str(layers), "--numel", str(numel), "--task", task, "--dtype", "bf16",
                            "--plant", "10", "--magnitude", "0.3", "--seed", "5"],
                           check=True, stdout=subprocess.DEVNULL)
        return d

    def compare(self, tree, out):
        """msprobe compare of tree into out: (its details rows as dicts,
        msprobe's own malloc calls or None in a sanitized build)"""
        log = os.path.join(self.work, "calls.log")
        if os.path.exists(log):
            os.unlink(log)
        env = dict(os.environ, MSP_CALL_COUNT_LOG=log, MSP_CALL_COUNT_AT_EXIT="1")
        counted = not sanitized_build()
        if counted:
            env["LD_PRELOAD"] = COUNTER
        p = subprocess.run([os.environ["MSPROBE_BIN"], "compare", "-b",
                            os.path.join(tree, "bench"), "-c", os.path.join(tree, "npu"), "-o",
                            out, "--replay", "off", "--no-html"],
                           capture_output=True, text=True, timeout=600, env=env)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        calls = None
        if counted:
            with open(log) as f:
                mine = [int(w[2]) for w in (line.split() for line in f)
                        if w[0] == "malloc" and w[3] == "msprobe"]
            self.assertEqual(len(mine), 1, mine)
            calls = mine[0]
        ws = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)["details"]
        rows = ws.iter_rows(values_only=True)
        head = list(next(rows))
        return [dict(zip(head, r)) for r in rows], calls

    def dump_names(self, tree, side):
        path = os.path.join(tree, side, "step0", "rank0", "dump.h5")
        with h5py.File(path, "r") as f:
            return sorted((r["record"], r["role"]) for r in stats_rows(f) if r["role"])

    def test_names_are_the_dumps_and_cost_no_malloc_each(self):
        small, large = self.tree("s50", 50, "statistics", 256), self.tree("s450", 450,
                                                                          "statistics", 256)
        rows_s, calls_s = self.compare(small, os.path.join(self.work, "o50"))
        rows_l, calls_l = self.compare(large, os.path.join(self.work, "o450"))
        for tree, rows in ((small, rows_s), (large, rows_l)):
            for side, col in (("npu", "NPU Name"), ("bench", "Bench Name")):
                want = sorted(rec + "." + role for rec, role in self.dump_names(tree, side))
                self.assertEqual(sorted(r[col] for r in rows), want, (tree, side))
        self.assertEqual(len(rows_l) - len(rows_s), 2000)
        if calls_s is None:
            self.skipTest("a preloaded library cannot come before AddressSanitizer's runtime")
        per_row = (calls_l - calls_s) / (len(rows_l) - len(rows_s))
        print("malloc calls a row: %.2f" % per_row, file=sys.stderr)
        self.assertLess(per_row, 4)

    def test_data_names_of_a_tensor_tree(self):
        tree = self.tree("t4", 4, "tensor", 64)
        rows, _ = self.compare(tree, os.path.join(self.work, "ot"))
        want = self.dump_names(tree, "npu")
        self.assertEqual(len(rows), len(want))
        for r in rows:
            data = ast.literal_eval(r["Data_name"])
            rec, role = r["NPU Name"], None
            for w_rec, w_role in want:
                if w_rec + "." + w_role == r["NPU Name"]:
                    rec, role = w_rec, w_role
            self.assertIsNotNone(role, r["NPU Name"])
            self.assertEqual(data, ["/%s/%s" % (rec, role)] * 2)


if __name__ == "__main__":
    COUNTER = sys.argv.pop(1)
    unittest.main()
