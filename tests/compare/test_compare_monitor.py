"""msprobe compare on two monitor outputs (msprobe-compare(1), MONITOR OUTPUTS):
the first divergent step by the documented rule, on hand-made CSVs in
msprobe's layout (thresholds recomputed here from the rule's text) and on
monitor outputs msprobe's own TrainerMon wrote (fixtures/monitor/compare:
checked against the CSVs read with the csv module), and the reports read
back with openpyxl (and Chromium for the page, when there is one)."""
import csv
import glob
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import openpyxl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import msp_msprobe as M  # noqa: E402

FIX = os.path.join(M.SOURCE, "fixtures", "monitor", "compare")
METRICS = ["min", "max", "mean", "norm", "nans"]
STEPS = 40
# The rule's constants (msprobe-compare(1), MONITOR OUTPUTS).
W, P, K, B, F = 16, 3, 8.0, 8.0, 0.01


def write_run(root, rows, decimals=6, rank_dir="Dec03_00-00-00-rank0-0a1b2c3d"):
    """A monitor output in msprobe's layout: rows is {kind: {name: {metric:
    values over STEPS}}}; values written with `decimals` digits, as msprobe's
    ndigits rounds them. Returns the values as written (floats read back)."""
    d = os.path.join(root, rank_dir)
    os.makedirs(d)
    written = {}
    for kind, names in rows.items():
        micro = kind.startswith("actv")
        header = ["vpp_stage", "name", "step"] + (["micro_step"] if micro else []) + METRICS
        with open(os.path.join(d, "%s_0-%d.csv" % (kind, STEPS - 1)), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            for step in range(STEPS):
                for name, m in names.items():
                    vals = ["%.*f" % (decimals, m[k][step]) for k in METRICS]
                    for k, v in zip(METRICS, vals):
                        written.setdefault((kind, name, k), []).append(float(v))
                    w.writerow(["0", name, str(step)] + (["0"] if micro else []) + vals)
    return written


def base_rows(seed=0):
    """Three modules: enc (its weight, its output), norm (its output), head
    (its weight, its output): activations noisy from step to step, weights
    drifting slowly."""
    rng = np.random.default_rng(seed)

    def series(level, noise, drift=0.0):
        n = level + drift * np.arange(STEPS) + rng.normal(0, noise, STEPS)
        return {"min": -n / 20, "max": n / 10, "mean": rng.normal(0, noise / 50, STEPS),
                "norm": n, "nans": np.zeros(STEPS)}
    return {
        "param_origin": {"enc.weight": series(10, 0.001, 0.01), "head.weight": series(5, 0.001, 0.02)},
        "actv": {"enc.output": series(100, 1.0), "norm.output": series(50, 0.2),
                 "head.output": series(20, 0.5)},
    }


def scaled(rows, kind, name, factor, steps, metrics=("min", "max", "norm")):
    out = {k: {n: {m: v.copy() for m, v in ms.items()} for n, ms in names.items()}
           for k, names in rows.items()}
    for m in metrics:
        out[kind][name][m][steps] *= factor
    return out


def jittered(rows, rel=1e-4, seed=7):
    """rows with every value moved by about rel of itself, from the first
    step on: runs that differ from the start (another precision), so that
    the noise rule, not bit-for-bit agreement, decides."""
    rng = np.random.default_rng(seed)
    return {k: {n: {m: (v * (1 + rel * rng.standard_normal(len(v))) if m != "nans" else v.copy())
                    for m, v in ms.items()} for n, ms in names.items()}
            for k, names in rows.items()}


def median(v):
    return float(np.median(v)) if len(v) else 0.0


def thresholds(vb, vc, metric, quantum, mx=None, mn=None):
    """The rule's threshold at every step, from its text: K x the median
    |x[k] - x[k-1]| of both runs over the W steps before (the first W steps'
    while fewer than 4 such changes came before), B x the median difference
    over the W steps before, F x the value (a mean against its tensor's
    largest magnitude), and 2 units of the last written digit."""
    n = len(vb)
    d = [abs(a - b) for a, b in zip(vb, vc)]
    out = []
    for i in range(n):
        ch = [abs(x[k] - x[k - 1]) for k in range(max(1, i - W + 1), i) for x in (vb, vc)]
        if len(ch) < 4:
            ch = [abs(x[k] - x[k - 1]) for k in range(1, min(n, W + 1)) for x in (vb, vc)]
        base = d[max(0, i - W):i]
        scale = max(abs(vb[i]), abs(vc[i]))
        if metric == "mean":
            scale = max(scale, abs(mx[i]), abs(mn[i]))
        floor = 0.5 if metric == "nans" else F * scale
        out.append(max(K * median(ch), B * median(base), floor, 2 * quantum))
    return d, out


class CompareMonitor(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-moncmp-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def pair(self, bench_rows, cmp_rows, decimals=6):
        b, c = os.path.join(self.work, "bench"), os.path.join(self.work, "cmp")
        wb = write_run(b, bench_rows, decimals)
        wc = write_run(c, cmp_rows, decimals)
        return b, c, wb, wc

    def compare(self, b, c, out="out"):
        out = os.path.join(self.work, out)
        p = M.msprobe("compare", "-b", b, "-c", c, "-o", out)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        return p, out

    def test_a_step_change_in_two_modules_is_named_where_it_starts(self):
        rows = base_rows()
        # norm's output 10 % down (50 times its step-to-step noise), head's 30 %
        cmp = scaled(scaled(rows, "actv", "norm.output", 0.9, slice(25, None)),
                     "actv", "head.output", 0.7, slice(25, None))
        b, c, wb, wc = self.pair(rows, cmp)
        p, out = self.compare(b, c)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertRegex(p.stdout, r"first divergent step: 25 rank 0 norm \(actv norm.output "
                                   r"(min|max|norm)")
        self.assertIn("the runs agree bit for bit before this step", p.stdout)
        # the threshold in the workbook is the rule's, recomputed here
        key = ("actv", "norm.output", "norm")
        d, thr = thresholds(wb[key], wc[key], "norm", 1e-6)
        self.assertTrue(all(x == 0 for x in d[:25]))
        self.assertGreater(d[25], thr[25])
        ws = openpyxl.load_workbook(os.path.join(out, "result.xlsx"))["series"]
        hdr = [c.value for c in ws[1]]
        for r in ws.iter_rows(min_row=2, values_only=True):
            row = dict(zip(hdr, r))
            if (row["Kind"], row["Name"], row["Metric"]) == key:
                self.assertEqual(row["First divergent step"], 25)
                self.assertAlmostEqual(row["Threshold"] / thr[25], 1.0, places=9)
                self.assertAlmostEqual(row["Difference"] / d[25], 1.0, places=9)
                break
        else:
            self.fail("no series row for %s" % (key,))
        # the heat map: nothing before step 25, the divergent cell beyond 1
        heat = openpyxl.load_workbook(os.path.join(out, "result.xlsx"))["heatmap"]
        mods = [c.value for c in heat[1]][1:]
        col = mods.index("norm") + 1
        for r in heat.iter_rows(min_row=2, values_only=True):
            if r[0] < 25:
                self.assertTrue(all(v in (0, None) for v in r[1:]), r)
            elif r[0] == 25:
                self.assertGreater(r[col], 1)

    def test_identical_runs_part_at_their_first_difference_however_small(self):
        # one statistic 0.01 % off from step 25: far inside every threshold,
        # but runs equal bit for bit before it cannot part by chance
        rows = base_rows()
        cmp = scaled(rows, "actv", "head.output", 1.0001, slice(25, None), ("norm",))
        b, c, _, _ = self.pair(rows, cmp)
        p, _ = self.compare(b, c)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertRegex(p.stdout, r"(?m)^first divergent step: 25 rank 0 head \(actv head.output "
                                   r"norm: .*the runs agree bit for bit before this step, 1 series")
        # a difference that does not last is not one
        shutil.rmtree(self.work)
        os.makedirs(self.work)
        cmp = scaled(rows, "actv", "head.output", 1.0001, slice(25, 26), ("norm",))
        b, c, _, _ = self.pair(rows, cmp)
        p, _ = self.compare(b, c)
        self.assertEqual(p.returncode, 0, p.stdout)

    def test_one_statistic_alone_is_not_a_divergence(self):
        rows = base_rows()
        cmp = scaled(jittered(rows), "param_origin", "head.weight", 1.5, slice(25, None),
                     ("max",))
        b, c, _, _ = self.pair(rows, cmp)
        p, _ = self.compare(b, c)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("no divergent step", p.stdout)
        self.assertRegex(p.stdout, r"largest lone difference: step 2[5-7] rank 0 param_origin "
                                   r"head\.weight max")

    def test_differences_under_one_percent_are_not_counted(self):
        # the weights barely move from step to step (noise 0.001 on 10): only
        # the 1 % floor stands between a difference and a divergence
        rows = base_rows()
        near = jittered(rows)
        cmp = scaled(scaled(near, "param_origin", "enc.weight", 1.005, slice(25, None)),
                     "param_origin", "head.weight", 1.005, slice(25, None))
        b, c, wb, wc = self.pair(rows, cmp)
        p, _ = self.compare(b, c)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("no divergent step", p.stdout)
        key = ("param_origin", "enc.weight", "norm")
        d, thr = thresholds(wb[key], wc[key], "norm", 1e-6)
        self.assertAlmostEqual(thr[25] / (F * max(wb[key][25], wc[key][25])), 1.0, places=9)
        self.assertLess(d[25], thr[25])
        # and 3 % is one
        shutil.rmtree(self.work)
        os.makedirs(self.work)
        cmp = scaled(scaled(near, "param_origin", "enc.weight", 1.03, slice(25, None)),
                     "param_origin", "head.weight", 1.03, slice(25, None))
        b, c, wb, wc = self.pair(rows, cmp)
        p, _ = self.compare(b, c)
        self.assertIn("first divergent step: 25 rank 0 enc (param_origin enc.weight ", p.stdout)
        self.assertIn("over its threshold", p.stdout)

    def test_runs_that_differ_from_the_start_have_no_divergent_step(self):
        rows = base_rows()
        cmp = rows
        for kind, names in rows.items():
            for name in names:
                cmp = scaled(cmp, kind, name, 1.03, slice(0, None))
        b, c, _, _ = self.pair(rows, cmp)
        p, _ = self.compare(b, c)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertRegex(p.stdout, r"differ from the first step: \d+ series")
        self.assertIn("no divergent step", p.stdout)

    def test_a_difference_that_does_not_last_is_not_a_divergence(self):
        rows = base_rows()
        cmp = scaled(scaled(jittered(rows), "actv", "norm.output", 0.5, slice(25, 26)),
                     "actv", "head.output", 0.5, slice(25, 27))
        b, c, _, _ = self.pair(rows, cmp)
        p, _ = self.compare(b, c)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("no divergent step", p.stdout)

    def test_first_nan_of_each_run_is_named(self):
        rows = base_rows()
        cmp = scaled(rows, "actv", "head.output", 1.0, slice(0, None))
        cmp["actv"]["head.output"]["nans"][30:] = 3
        b, c, _, _ = self.pair(rows, cmp)
        p, _ = self.compare(b, c)
        self.assertIn("first NaN/Inf (compare): step 30 rank 0 actv head.output nans", p.stdout)
        self.assertNotIn("first NaN/Inf (bench)", p.stdout)

    def test_two_runs_of_one_rank_in_one_directory_are_refused(self):
        rows = base_rows()
        b, c, _, _ = self.pair(rows, rows)
        write_run(c, rows, rank_dir="Dec03_00-00-09-rank0-99999999")
        p = M.msprobe("compare", "-b", b, "-c", c, "-o", os.path.join(self.work, "o"))
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("two runs of rank 0", p.stderr)
        self.assertIn("rank0-99999999", p.stderr)

    def test_ranks_are_paired_and_the_diverging_rank_named(self):
        rows = base_rows()
        cmp1 = scaled(scaled(rows, "actv", "norm.output", 0.8, slice(25, None)),
                      "actv", "head.output", 0.5, slice(25, None))
        b, c = os.path.join(self.work, "bench"), os.path.join(self.work, "cmp")
        for rank, cmp_rows in ((0, rows), (1, cmp1)):
            write_run(b, rows, rank_dir="Dec03_00-00-00-rank%d-0000000%d" % (rank, rank))
            write_run(c, cmp_rows, rank_dir="Dec03_00-00-01-rank%d-1000000%d" % (rank, rank))
        p, _ = self.compare(b, c)
        self.assertRegex(p.stdout, r"(?m)^first divergent step: 25 rank 1 norm ")
        self.assertIn("50 series paired", p.stdout)

    def test_a_monitor_output_against_a_dump_is_refused(self):
        rows = base_rows()
        b = os.path.join(self.work, "bench")
        write_run(b, rows)
        p = M.msprobe("compare", "-b", b, "-c", os.path.join(M.SOURCE, "fixtures", "npu"),
                      "-o", os.path.join(self.work, "o"))
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("is a monitor output and", p.stderr)

    def test_msprobe_written_eps_change_named_at_its_step(self):
        p, out = self.compare(os.path.join(FIX, "bench"), os.path.join(FIX, "eps16"))
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertRegex(p.stdout, r"first divergent step: 16 rank 0 h\.1\.ln_2 \(actv "
                                   r"h\.1\.ln_2\.output ")
        # read independently: every value equal before step 16, ln_2's output
        # norm more than 1 % apart at step 16
        def rows(side, kind):
            (f,) = glob.glob(os.path.join(FIX, side, "*", kind + "_0-23.csv"))
            with open(f, newline="") as fh:
                return list(csv.DictReader(fh))
        for kind in ("actv", "actv_grad", "grad_reduced", "param_origin", "exp_avg"):
            a, b = rows("bench", kind), rows("eps16", kind)
            self.assertEqual(len(a), len(b))
            for x, y in zip(a, b):
                if int(x["step"]) < 16:
                    self.assertEqual(x, y)
        m = re.search(r"\(actv h\.1\.ln_2\.output (\w+): bench ([\d.e+-]+), compare "
                      r"([\d.e+-]+)", p.stdout)
        metric = m.group(1)
        a = {(r["name"], r["step"]): float(r[metric]) for r in rows("bench", "actv")}
        b = {(r["name"], r["step"]): float(r[metric]) for r in rows("eps16", "actv")}
        k = ("h.1.ln_2.output", "16")
        self.assertNotEqual(a[k], b[k])
        self.assertAlmostEqual(float(m.group(2)), a[k], places=5)
        self.assertAlmostEqual(float(m.group(3)), b[k], places=5)
        # and the norm of that output more than 1 % apart: the noise rule
        # alone would name it too
        an = {(r["name"], r["step"]): float(r["norm"]) for r in rows("bench", "actv")}
        bn = {(r["name"], r["step"]): float(r["norm"]) for r in rows("eps16", "actv")}
        self.assertGreater(abs(an[k] - bn[k]) / an[k], 0.01)

    def test_msprobe_written_bf16_has_no_divergent_step(self):
        p, _ = self.compare(os.path.join(FIX, "bench"), os.path.join(FIX, "bf16"))
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("no divergent step", p.stdout)

    def test_a_run_directory_itself_is_a_monitor_output(self):
        (b,) = glob.glob(os.path.join(FIX, "bench", "*-rank0-*"))
        (c,) = glob.glob(os.path.join(FIX, "eps16", "*-rank0-*"))
        p, _ = self.compare(b, c)
        self.assertIn("first divergent step: 16 rank 0 h.1.ln_2", p.stdout)

    def test_page_marks_the_divergent_step(self):
        try:
            import msp_browser
        except ImportError:
            self.skipTest("no msp_browser")
        if not msp_browser.CHROMIUM:
            self.skipTest("no chromium")
        _, out = self.compare(os.path.join(FIX, "bench"), os.path.join(FIX, "eps16"))
        dom, console = msp_browser.load(os.path.join(out, "result.html"))
        body = dom.find("body")
        self.assertEqual(body.attrs.get("data-ready"), "1", console)
        self.assertEqual(body.attrs.get("data-divergent-step"), "16")
        self.assertIn("first divergent step: 16 rank 0 h.1.ln_2",
                      dom.find("h2", id="verdict").text())


if __name__ == "__main__":
    unittest.main()
