"""result.csv is formatted by several threads at once (issue 42). On a
statistics tree the csv was the last report to finish, alone on one core
while the others stood idle: each pair's rows are now cut into pieces between
records, each formatted on a thread of its own into a buffer of msprobe's
that lives from part to part, then written in order.

msprobe-gen's statistics tree of 2 ranks x 2,000 layers (10,000 tensor rows a
rank), rank 1 planted, compared with --csv by msprobe with a library
preloaded (fmt_call_count.c) that counts msprobe's open_memstream calls:
OMP_NUM_THREADS=4 cuts each rank's rows into 4 pieces, OMP_NUM_THREADS=1
into one, and neither formats through a stdio memory stream any more (4
pieces made 6 calls before, and stdio's per-field work was a fifth of the
csv's CPU). Both files are the same bytes, and they say what the dumps
hold: one row a tensor of each rank, ranks in order and each rank's records
in execution order across the pieces' seams, with each side's max, min,
mean and norm as h5py reads them."""
import csv
import os
import sys
import unittest

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
from msp_build import GenTree  # noqa: E402
from msp_h5dump import stats_rows  # noqa: E402

COUNTER = None  # fmt_call_count's path, from the command line
LAYERS = 2000
RANKS = 2


class CsvPieces(GenTree, unittest.TestCase):
    GEN_PREFIX = "msp-csv-pieces-"
    GEN_ARGS = ("--steps", "1", "--ranks", str(RANKS), "--layers", str(LAYERS), "--numel", "256",
                "--task", "statistics", "--dtype", "bf16", "--plant", "300", "--plant-rank", "1",
                "--magnitude", "0.3", "--seed", "9")

    def compare(self, out, threads):
        """msprobe compare --csv into out with OMP_NUM_THREADS=threads: its
        open_memstream calls (None in a sanitized build)"""
        p, calls = self.compare_counted(COUNTER, "open_memstream", out, "--csv", "--no-html",
                                        env={"OMP_NUM_THREADS": str(threads)})
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # the plant fails records
        self.assertIn("first introduced error: step 0 rank 1", p.stdout)
        return calls

    def test_pieces_formatted_by_threads_make_the_same_file(self):
        four = self.compare(os.path.join(self.work, "four"), 4)
        one = self.compare(os.path.join(self.work, "one"), 1)
        with open(os.path.join(self.work, "four", "result.csv"), "rb") as f:
            text4 = f.read()
        with open(os.path.join(self.work, "one", "result.csv"), "rb") as f:
            text1 = f.read()
        self.assertEqual(text4, text1)
        if four is None:
            self.skipTest("a preloaded library cannot come before AddressSanitizer's runtime")
        self.assertEqual((four, one), (0, 0))

    def test_rows_say_what_the_dumps_hold(self):
        out = os.path.join(self.work, "read")
        self.compare(out, 4)
        side = {}
        for name in ("bench", "npu"):
            for rank in range(RANKS):
                path = os.path.join(self.work, name, "step0", f"rank{rank}", "dump.h5")
                with h5py.File(path, "r") as f:
                    for r in stats_rows(f):
                        side[(name, rank, r["record"] + "." + r["role"])] = r
        with open(os.path.join(out, "result.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), len(side) // 2)
        seen = set()
        last = (-1, -1)
        for row in rows:
            rank = int(row["Rank"])
            key = row["NPU Name"]
            self.assertEqual(row["Bench Name"], key)
            self.assertEqual(row["Step"], "0")
            n, b = side[("npu", rank, key)], side[("bench", rank, key)]
            at = (rank, n["order"])
            self.assertGreaterEqual(at, last, key)  # no piece out of its place
            last = at
            self.assertNotIn((rank, key), seen)
            seen.add((rank, key))
            for col, s in (("NPU", n), ("Bench", b)):
                self.assertEqual((float(row[col + " max"]), float(row[col + " min"]),
                                  float(row[col + " mean"]), float(row[col + " l2norm"])),
                                 (s["max"], s["min"], s["mean"], s["norm"]), key)
        self.assertEqual(len(seen), len(rows))


if __name__ == "__main__":
    COUNTER = sys.argv.pop(1)
    unittest.main()
