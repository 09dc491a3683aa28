"""What compare's reports read, seen from outside msprobe by the preloaded
read_spy helper (tests/compare/read_spy.c): result.xlsx, result.csv and
result.html take every pair's rows from one read of the compare's spool
(src/compare/cmp_feed.c), and the page's suspect cards take their samples
from the pair's files while compare has them open (src/compare/cmp_sample.c),
not by opening the dumps again. The trees are msprobe-gen's (bench/compare)."""
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np
import openpyxl

MSPROBE = os.environ.get("MSPROBE_BIN", "msprobe")
GEN = os.environ.get("MSPROBE_GEN") or os.path.join(
    os.environ.get("MSPROBE_BUILD_DIR", "build"), "bench", "compare", "msprobe-gen")
READ_SPY = sys.argv.pop(1) if len(sys.argv) > 1 and sys.argv[1].endswith(".so") else ""
ROWS = os.environ.get("CMP_REPORT_ROWS")


def spied(log):
    """{(kind, path): (count, size)} from read_spy's log (msprobe's own lines)."""
    out = {}
    if os.path.exists(log):
        with open(log) as f:
            for line in f:
                kind, n, size, path = line.rstrip("\n").split("\t", 3)
                out[(kind, path)] = (int(n), int(size))
        os.unlink(log)
    return out


@unittest.skipUnless(READ_SPY and os.path.exists(READ_SPY), "no read_spy helper built")
class ReportReads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="msp-report-reads-")
        cls.log = os.path.join(cls.work, "spy.txt")

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["rm", "-rf", cls.work])

    def gen(self, name, *args):
        root = os.path.join(self.work, name)
        subprocess.run([GEN, "--out", root, "--steps", "1", "--ranks", "2", *args], check=True,
                       stdout=subprocess.DEVNULL)
        return os.path.join(root, "bench"), os.path.join(root, "npu")

    def compare(self, bench, npu, out, *extra, **env):
        env = dict(os.environ, LD_PRELOAD=READ_SPY, READ_SPY_LOG=self.log, **env)
        r = subprocess.run([MSPROBE, "compare", "-b", bench, "-c", npu, "-o", out, "--replay",
                            "off", *extra], capture_output=True, text=True, env=env, timeout=600)
        self.assertIn(r.returncode, (0, 1), r.stdout + r.stderr)  # 1: the plant fails records
        self.assertIn("first introduced error: step 0 rank 1", r.stdout)
        return r

    def test_the_spool_is_read_once_for_the_workbook_csv_and_page(self):
        """Each writer reading the spool for itself read it 3.5 times (the
        workbook once more for its chart): the bytes pread from it are now at
        most its size."""
        bench, npu = self.gen("stats", "--layers", "600", "--numel", "64", "--task",
                              "statistics", "--dtype", "bf16", "--plant", "200",
                              "--plant-rank", "1", "--magnitude", "0.3", "--seed", "7")
        spool = os.path.join(self.work, "tmp-once")
        os.makedirs(spool, exist_ok=True)
        out = os.path.join(self.work, "once")
        self.compare(bench, npu, out, "--csv", "--print-log",
                     READ_SPY_PATHS=".msprobe-compare-spool.", TMPDIR=spool)
        for name in ("result.xlsx", "result.csv", "result.html"):
            self.assertGreater(os.path.getsize(os.path.join(out, name)), 100000, name)
        reads = [v for (kind, _), v in spied(self.log).items() if kind == "read"]
        self.assertEqual(len(reads), 1, reads)  # a statistics compare: the final spool alone
        read, size = reads[0]
        self.assertGreater(size, 1000000)
        self.assertGreaterEqual(read, size * 0.9)  # every pair's rows were read...
        self.assertLessEqual(read, size)           # ...once
        # and the csv holds every tensor of both ranks, one line each
        tensors = {}
        for k in (0, 1):
            with h5py.File(os.path.join(npu, "step0", f"rank{k}", "dump.h5"), "r") as f:
                tensors[k] = f["stats"].shape[0]
        with open(os.path.join(out, "result.csv"), newline="") as f:
            self.assertEqual(sum(1 for _ in csv.reader(f)), sum(tensors.values()) + 1)
        # msprobe's own files (one a rank), its -da file, result.csv and the
        # page: once too
        out = os.path.join(self.work, "once-msprobe")
        r = subprocess.run([MSPROBE, "compare", "-b", bench, "-c", npu, "-o", out, "--replay",
                            "off", "--msprobe-outputs", "--csv", "--diff-analyze"],
                           capture_output=True, text=True,
                           timeout=600, env=dict(os.environ, LD_PRELOAD=READ_SPY, TMPDIR=spool,
                                                 READ_SPY_LOG=self.log,
                                                 READ_SPY_PATHS=".msprobe-compare-spool."))
        self.assertEqual(r.returncode, 0, r.stderr)  # msprobe's exit, whatever the verdicts
        reads = [v for (kind, _), v in spied(self.log).items() if kind == "read"]
        self.assertEqual(len(reads), 1, reads)
        self.assertLessEqual(reads[0][0], reads[0][1])
        for k in (0, 1):
            [name] = [n for n in os.listdir(out) if n.startswith(f"compare_result_rank{k}_")]
            with open(os.path.join(out, name), newline="") as f:
                self.assertEqual(sum(1 for _ in csv.reader(f)), tensors[k] + 1, name)
        self.assertTrue(os.path.exists(os.path.join(out, "result.html")))
        # -da names rank 1's first error (the plant) with its rows' statistics
        [da] = [n for n in os.listdir(out) if n.startswith("diff_analyze_")]
        with open(os.path.join(out, da)) as f:
            nodes = json.load(f)
        self.assertEqual(list(nodes), ["rank_1"])
        self.assertTrue(nodes["rank_1"][0]["data_info"]["output"])

    @unittest.skipUnless(ROWS, "CMP_REPORT_ROWS not set (run through ctest)")
    def test_per_rank_workbooks_of_one_step_read_the_spool_with_the_csv(self):
        """Past one sheet (lowered to 500 rows by cmp_report_rows) each rank
        gets a workbook. With one step a rank's rows are one part, in the
        order the csv reads them, so the books take them from the same read:
        the spool is read once. With two steps a rank's parts lie a step
        apart and its book reads them again: twice, no more."""
        for steps, times in ((1, 1), (2, 2)):
            with self.subTest(steps=steps):
                root = os.path.join(self.work, f"books{steps}")
                subprocess.run([GEN, "--out", root, "--steps", str(steps), "--ranks", "3",
                                "--layers", "200", "--numel", "64", "--task", "statistics",
                                "--plant", "50", "--plant-rank", "1", "--magnitude", "0.3",
                                "--seed", "11"], check=True, stdout=subprocess.DEVNULL)
                spool = os.path.join(self.work, f"tmp-books{steps}")
                os.makedirs(spool, exist_ok=True)
                out = os.path.join(self.work, f"books-out{steps}")
                env = dict(os.environ, LD_PRELOAD=READ_SPY, READ_SPY_LOG=self.log, TMPDIR=spool,
                           READ_SPY_PATHS=".msprobe-compare-spool.", READ_SPY_NAME="cmp_report_rows")
                r = subprocess.run([ROWS, os.path.join(root, "bench"), os.path.join(root, "npu"),
                                    out, "--rows", "500", "--replay", "off"], capture_output=True,
                                   text=True, env=env, timeout=600)
                self.assertEqual(r.returncode, 0, r.stderr)
                reads = [v for (kind, _), v in spied(self.log).items() if kind == "read"]
                self.assertEqual(len(reads), 1, reads)
                read, size = reads[0]
                self.assertGreaterEqual(read, size * times * 0.9)
                self.assertLessEqual(read, size * times)
                for rank in range(3):
                    want = 0
                    for step in range(steps):
                        with h5py.File(os.path.join(root, "npu", f"step{step}", f"rank{rank}",
                                                    "dump.h5"), "r") as f:
                            want += f["stats"].shape[0]
                    book = openpyxl.load_workbook(
                        os.path.join(out, f"result_rank{rank}.xlsx"), read_only=True)
                    got = sum(book[n].max_row - 1 for n in book.sheetnames
                              if n.startswith("details"))
                    book.close()
                    self.assertEqual(got, want, rank)

    def test_the_suspect_cards_samples_open_no_dump_again(self):
        """The page's cards plot the suspects' element pairs; compare samples
        them while it has their pair open, so each dump file is opened as
        often with the page as without it (with each card reopening its
        pair, the suspect's two files were opened once more)."""
        bench, npu = self.gen("tensors", "--layers", "30", "--numel", "20000", "--dtype", "fp32",
                              "--plant", "11", "--magnitude", "0.01", "--plant-rank", "1",
                              "--seed", "5")
        opens = {}
        for tag, extra in (("page", ()), ("no-page", ("--no-html",))):
            self.compare(bench, npu, os.path.join(self.work, tag), *extra, READ_SPY_OPENS="dump.h5")
            opens[tag] = {path: n for (kind, path), (n, _) in spied(self.log).items()
                          if kind == "open"}
        self.assertEqual(len(opens["no-page"]), 4, opens)  # 2 ranks x 2 sides
        self.assertEqual(opens["page"], opens["no-page"])
        # the first card's sample: every 10th element pair of the planted
        # output (20,000 elements, 2,000 points), as h5py reads them
        with open(os.path.join(self.work, "page", "result.html"), encoding="utf-8") as f:
            page = f.read()
        m = re.search(r'"suspects":\[\{"place":1,.*?"name":("[^"]*").*?"sample":(\{"numel":.*?\]\})',
                      page)
        self.assertIsNotNone(m, "no sample on the first card")
        name, sample = json.loads(m.group(1)), json.loads(m.group(2))
        path = os.path.join("step0", "rank1", "dump.h5")
        with h5py.File(os.path.join(npu, path), "r") as fc, \
                h5py.File(os.path.join(bench, path), "r") as fb:
            n = np.asarray(fc[name]["output.0"][...], dtype=np.float64).ravel()
            b = np.asarray(fb[name]["output.0"][...], dtype=np.float64).ravel()
        self.assertEqual((sample["numel"], sample["stride"]), (20000, 10))
        np.testing.assert_allclose(sample["npu"], n[::10], rtol=1e-8)
        np.testing.assert_allclose(sample["bench"], b[::10], rtol=1e-8)


class SmallTensorsReadInRuns(unittest.TestCase):
    """Small tensors that lie side by side in both files are read a run at a
    time (src/compare/cmp_data.c, issue 42): two pread calls a row were a
    third of compare's CPU on files of 4 KiB tensors. The read calls are
    counted by the kernel (/proc/PID/io's syscr of the shell that waits for
    msprobe and its helpers); the metrics still match numpy's on the bytes
    h5py reads."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-small-runs-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.work])

    def test_a_run_of_small_tensors_is_one_read_a_side(self):
        root = os.path.join(self.work, "tree")
        subprocess.run([GEN, "--out", root, "--steps", "1", "--ranks", "1", "--layers", "200",
                        "--numel", "1024", "--dtype", "bf16", "--plant", "60", "--magnitude",
                        "0.3", "--seed", "3"], check=True, stdout=subprocess.DEVNULL)
        bench, npu = os.path.join(root, "bench"), os.path.join(root, "npu")
        out = os.path.join(self.work, "out")
        line = "'%s' compare -b '%s' -c '%s' -o '%s' --replay off --csv --no-html" % (
            MSPROBE, bench, npu, out)
        p = subprocess.run(["sh", "-c", line + ' >/dev/null; echo rc=$?; grep "^syscr:" /proc/$$/io'],
                           capture_output=True, text=True, timeout=600)
        if "syscr:" not in p.stdout:
            self.skipTest("no /proc/PID/io here: " + p.stderr.strip())
        self.assertIn(p.stdout.split()[0], ("rc=0", "rc=1"), p.stdout + p.stderr)
        calls = int(p.stdout.split("syscr:")[1].split()[0])
        path = os.path.join("step0", "rank0", "dump.h5")
        with h5py.File(os.path.join(npu, path), "r") as fc, \
                h5py.File(os.path.join(bench, path), "r") as fb:
            pairs = {}
            for rec in fc:
                if isinstance(fc[rec], h5py.Group):
                    for role in fc[rec]:
                        pairs["%s.%s" % (rec, role)] = (
                            np.asarray(fc[rec][role][...], dtype=np.float64).ravel(),
                            np.asarray(fb[rec][role][...], dtype=np.float64).ravel())
        self.assertGreater(len(pairs), 500)
        # one read a tensor a side was at least 2 x rows calls
        self.assertLess(calls, len(pairs) // 2, calls)
        with open(os.path.join(out, "result.csv"), newline="") as f:
            rows = {r["NPU Name"]: r for r in csv.DictReader(f)}
        self.assertEqual(set(rows), set(pairs))
        for name, (n, b) in pairs.items():
            cos = float(np.dot(n, b) / (np.linalg.norm(n) * np.linalg.norm(b)))
            self.assertAlmostEqual(float(rows[name]["Cosine"]), cos, places=9, msg=name)
            self.assertEqual(float(rows[name]["MaxAbsErr"]), float(np.max(np.abs(n - b))), name)


if __name__ == "__main__":
    unittest.main()
