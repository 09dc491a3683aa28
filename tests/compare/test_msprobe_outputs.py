"""compare given msprobe's own command line writes msprobe's files and exits
as msprobe does (--msprobe-outputs): compare_result_rank{N}_{stamp}.csv per
rank (.xlsx with --xlsx or 8.x's -i), compare_result_{stamp} for two files,
the rank/proc directory's name for one, ./output by default, exit 0 whatever
the verdicts; -da writes diff_analyze_{ns}.json. Our own command line keeps
result.xlsx and exit 1. The rows are checked against the workbooks msprobe
26 wrote for the same dumps (fixtures/msprobe/compare_results) and the
diff_analyze values against numpy."""
import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import openpyxl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmp_h5 as H  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
SOURCE = os.environ.get("MSPROBE_SOURCE_DIR",
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FIX = os.path.join(SOURCE, "fixtures", "msprobe")
STAMP = r"(\d{14})"


def msprobe(*args, cwd=None):
    return subprocess.run([BIN, *args, "--replay", "off"], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def rank_dir(v):
    (p,) = glob.glob(os.path.join(FIX, v, "step0", "*", "dump.json"))
    return os.path.dirname(p)


def csv_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def xlsx_rows(path):
    wb = openpyxl.load_workbook(path, read_only=True)
    rows = list(wb.worksheets[0].iter_rows(values_only=True))
    wb.close()
    return [dict(zip(rows[0], r)) for r in rows[1:]]


def num(v):
    try:
        f = float(v)
        return f if f == f else None
    except (TypeError, ValueError):
        return None


class MsprobeFileNames(unittest.TestCase):
    """The two-rank layout msprobe 26's own workbooks were made from."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="msp-outputs-")
        for side, dirs in (("npu", ("v26", "v833_extra_relu")), ("bench", ("v26", "v26"))):
            for k, v in enumerate(dirs):
                shutil.copytree(rank_dir(v), os.path.join(self.tmp, side, "rank%d" % k))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_theirs(self, *extra, out=None):
        before = time.strftime("%Y%m%d%H%M%S")
        p = msprobe("compare", "-tp", "npu", "-gp", "bench", *extra, cwd=self.tmp)
        after = time.strftime("%Y%m%d%H%M%S")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        names = sorted(os.listdir(os.path.join(self.tmp, out or "output")))
        return p, names, before, after

    def test_msprobe_26_names_default_directory_and_exit_status(self):
        p, names, before, after = self.run_theirs()
        # one csv a rank, one stamp (local time), result.html; no result.xlsx
        got = [re.fullmatch(r"compare_result_rank(\d)_%s\.csv" % STAMP, n) for n in names]
        self.assertEqual(names[2:], ["result.html"], names)
        self.assertTrue(got[0] and got[1], names)
        self.assertEqual([m.group(1) for m in got[:2]], ["0", "1"])
        stamp = got[0].group(2)
        self.assertEqual(got[1].group(2), stamp)
        self.assertTrue(before <= stamp <= after, (before, stamp, after))
        self.assertIn("report: ./output/" + names[0], p.stdout)
        # the rows: tensors msprobe's own compare listed for that rank, with
        # the same cosine where both computed one
        for k in (0, 1):
            ours = csv_rows(os.path.join(self.tmp, "output", names[k]))
            (mine,) = glob.glob(os.path.join(FIX, "compare_results", "v26",
                                             "compare_result_rank%d_*.xlsx" % k))
            theirs = {r["NPU Name"]: r for r in xlsx_rows(mine)}
            named = [r for r in ours if r["NPU Name"] != "N/A"]
            self.assertGreater(len(named), 60)
            compared = 0
            for r in named:
                self.assertIn(r["NPU Name"], theirs)
                a, b = num(r["Cosine"]), num(theirs[r["NPU Name"]]["Cosine"])
                if a is not None and b is not None:
                    self.assertAlmostEqual(a, b, places=6, msg=r["NPU Name"])
                    compared += 1
            self.assertGreater(compared, 40)
        # rank 1's extra relu call is a failing record: msprobe still exits 0
        self.assertNotIn("failing records 0", p.stdout)
        # merge_result takes the per-rank csv files as they are
        with open(os.path.join(self.tmp, "m.yaml"), "w") as f:
            f.write("api: [Functional.relu]\ncompare_index: [Cosine]\n")
        m = subprocess.run([BIN, "merge_result", "-i", "output", "-o", "merged", "-config",
                            "m.yaml"], capture_output=True, text=True, cwd=self.tmp, timeout=120)
        self.assertEqual(m.returncode, 0, m.stderr)
        self.assertIn("merged 2 ranks from 2 files", m.stdout)
        wb = openpyxl.load_workbook(os.path.join(self.tmp, "merged",
                                                 "multi_ranks_compare_merge.xlsx"), read_only=True)
        sheet = list(wb["Cosine"].iter_rows(values_only=True))
        wb.close()
        # our csv has a Step column: the merged rows are (step, name, rank0, rank1)
        self.assertEqual(sheet[0], ("Step", "NPU Name", "rank0", "rank1"))
        merged = {r[1]: r[2:] for r in sheet[1:]}
        self.assertTrue(all(r[0] == 0 for r in sheet[1:]))
        for k in (0, 1):
            for r in csv_rows(os.path.join(self.tmp, "output", names[k])):
                if "Functional.relu" in r["NPU Name"]:
                    a, b = num(merged[r["NPU Name"]][k]), num(r["Cosine"])
                    if b is None:  # a text cell (N/A, unsupported) stays that text
                        self.assertEqual(merged[r["NPU Name"]][k], r["Cosine"] or None)
                    else:  # libxlsxwriter writes 16 significant digits
                        self.assertAlmostEqual(a, b, delta=1e-15 * max(1.0, abs(b)))

    def test_our_command_line_keeps_result_xlsx_and_exit_1(self):
        p = msprobe("compare", "-c", "npu", "-b", "bench", cwd=self.tmp)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(sorted(os.listdir(os.path.join(self.tmp, "compare_result"))),
                         ["result.html", "result.xlsx"])
        # the switch itself, with our spelling
        p = msprobe("compare", "-c", "npu", "-b", "bench", "--msprobe-outputs", "-o", "o",
                    cwd=self.tmp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(len([n for n in os.listdir(os.path.join(self.tmp, "o"))
                              if n.startswith("compare_result_rank")]), 2)
        p = msprobe("compare", "-c", "npu", "-b", "bench", "--xlsx", cwd=self.tmp)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--xlsx", p.stderr)

    def test_xlsx_holds_the_csv_rows_in_its_first_sheet(self):
        _, csvs, _, _ = self.run_theirs("-o", "c", out="c")
        _, books, _, _ = self.run_theirs("--xlsx", "-o", "x", out="x")
        books = [n for n in books if n.endswith(".xlsx")]
        self.assertEqual(len(books), 2, books)
        for k in (0, 1):
            self.assertTrue(re.fullmatch(r"compare_result_rank%d_\d{14}\.xlsx" % k, books[k]))
            a = csv_rows(os.path.join(self.tmp, "c", csvs[k]))
            b = xlsx_rows(os.path.join(self.tmp, "x", books[k]))
            self.assertEqual([r["NPU Name"] for r in a], [r["NPU Name"] for r in b])
            self.assertEqual([num(r["MaxAbsErr"]) for r in a], [num(r["MaxAbsErr"]) for r in b])

    def test_msprobe_8x_compare_json_writes_workbooks(self):
        cj = os.path.join(self.tmp, "compare.json")
        with open(cj, "w") as f:
            json.dump({"npu_path": os.path.join(self.tmp, "npu"),
                       "bench_path": os.path.join(self.tmp, "bench")}, f)
        p = msprobe("-f", "pytorch", "compare", "-i", cj, "-o", "o8", cwd=self.tmp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        names = sorted(os.listdir(os.path.join(self.tmp, "o8")))
        self.assertTrue(all(re.fullmatch(r"compare_result_rank%d_\d{14}\.xlsx" % k, names[k])
                            for k in (0, 1)), names)


class MsprobeSingleNames(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="msp-outputs-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def names(self, *args):
        p = msprobe("compare", *args, "-o", "o", cwd=self.tmp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        out = os.path.join(self.tmp, "o")
        names = sorted(n for n in os.listdir(out) if n != "result.html")
        shutil.rmtree(out)
        return names

    def test_two_files_and_msprobe_single_rank_directories(self):
        # acc_compare.py: 'compare_result' + suffix, suffix '' for two files
        # and '_' + the rank directory's name for directories
        js = [os.path.join(rank_dir(v), "dump.json") for v in ("v26", "v833")]
        (n,) = self.names("-tp", js[0], "-gp", js[1])
        self.assertRegex(n, r"^compare_result_\d{14}\.csv$")
        (n,) = self.names("-tp", os.path.join(FIX, "v833_extra_relu", "step0"), "-gp",
                          os.path.join(FIX, "v833", "step0"))
        self.assertRegex(n, r"^compare_result_rank_\d{14}\.csv$")
        pid = os.path.basename(rank_dir("v26"))
        (n,) = self.names("-tp", os.path.join(FIX, "v26", "step0"), "-gp",
                          os.path.join(FIX, "v26", "step0"))
        self.assertRegex(n, r"^compare_result_%s_\d{14}\.csv$" % pid)


def f32(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class DiffAnalyze(unittest.TestCase):
    def test_each_rank_first_error_of_its_own(self):
        tmp = tempfile.mkdtemp(prefix="msp-da-")
        self.addCleanup(shutil.rmtree, tmp, True)
        x, w = f32((16, 32), 1), f32((8, 32), 2)
        y = (x @ w.T).astype(np.float32)
        bad = (y + 0.5 * f32(y.shape, 3)).astype(np.float32)
        z = np.tanh(y).astype(np.float32)
        for side in ("bench", "npu"):
            for k in (0, 1):
                out = bad if side == "npu" and k == 1 else y
                recs = [("Functional.linear.6.forward",
                         {"input.0": x, "input.1": w, "output.0": out}),
                        ("Torch.tanh.0.forward",
                         {"input.0": out, "output.0": np.tanh(out).astype(np.float32)
                          if out is bad else z})]
                d = os.path.join(tmp, side, "step0", "rank%d" % k)
                os.makedirs(d)
                H.write_dump(os.path.join(d, "dump.h5"), recs, rank=k)
        p = msprobe("compare", "-tp", os.path.join("npu", "step0"), "-gp",
                    os.path.join("bench", "step0"), "-da", "-o", "o", cwd=tmp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        out = os.path.join(tmp, "o")
        (da,) = [n for n in os.listdir(out) if n.startswith("diff_analyze_")]
        self.assertRegex(da, r"^diff_analyze_\d{19}\.json$")
        self.assertLess(abs(int(da[len("diff_analyze_"):-len(".json")]) - time.time_ns()), 600 * 10 ** 9)
        with open(os.path.join(out, da)) as f:
            got = json.load(f)
        self.assertEqual(list(got), ["rank_1"])
        (node,) = got["rank_1"]
        self.assertEqual(node["op_name"], "Functional.linear.6.forward")

        def stats(t):
            t = t.astype(np.float64)
            return {"NPU max": float(t.max()), "NPU min": float(t.min()),
                    "NPU mean": float(t.mean()), "NPU l2norm": float(np.linalg.norm(t))}
        want = {"input": {"Functional.linear.6.forward.input.0": stats(x),
                          "Functional.linear.6.forward.input.1": stats(w)},
                "output": {"Functional.linear.6.forward.output.0": stats(bad)}}
        self.assertEqual(set(node["data_info"]), {"input", "output"})
        for io in ("input", "output"):
            self.assertEqual(set(node["data_info"][io]), set(want[io]))
            for name, m in want[io].items():
                for key, v in m.items():
                    self.assertAlmostEqual(node["data_info"][io][name][key], v, delta=1e-4 *
                                           max(1.0, abs(v)), msg=(name, key))
        self.assertIn("stack_info", node)
        # the per-rank results are there too
        self.assertEqual(len([n for n in os.listdir(out) if n.startswith("compare_result_rank")]),
                         2)
        # no introduced error: no file, as msprobe
        p = msprobe("compare", "-tp", os.path.join("bench", "step0"), "-gp",
                    os.path.join("bench", "step0"), "-da", "-o", "o2", cwd=tmp)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertFalse([n for n in os.listdir(os.path.join(tmp, "o2"))
                          if n.startswith("diff_analyze_")])


if __name__ == "__main__":
    unittest.main(verbosity=2)
