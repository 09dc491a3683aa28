"""result.html and result.xlsx's chart for real planted runs, read back
independently. A small GPT (tests/compare/culprit_models.py) trained under the
real preload shim, dump_mode mix, two planted runs of the culprit suite:
 - DEMO, what scripts/demo.sh shows: bf16 autocast, one LayerNorm eps=1.0,
   compared with -l api (API records only; the tree's modules come from each
   record's parent attribute);
 - FULL: fp32 "other hardware" noise, GELU approximate="tanh" in one block,
   every record compared (module records in the tree).
Each page is loaded in headless Chromium (tests/lib/msp_browser.py, command
line only) and its DOM read back: the suspect the chart marks is the planted
record (found with h5py, as the culprit suite does), the tree node of its
module (the record's 'parent' attribute, read with h5py) is coloured by the
worst error under it (recomputed with numpy from the dumped tensors), and the
card's numbers are the xlsx's (openpyxl). A screenshot of the DEMO page lands
in this test's build folder (html_report_planted.png; docs/compare_report.png
in the README is a copy)."""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

import h5py
from msp_h5dump import record_attrs
import numpy as np
import openpyxl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cmp_h5 as H  # noqa: E402
import culprit_suite as S  # noqa: E402
import msp_browser as B  # noqa: E402

SHOT = os.path.join(os.getcwd(), "html_report_planted.png")


class Run:
    """One planted run: dumps, compare, the page loaded in Chromium."""

    def __init__(self, work, run, level):
        self.run, self.level = run, level
        self.bench = S.run_dump(work, run[0], "bench", "none", level="mix")
        self.cmp = S.run_dump(work, *run, level="mix")
        self.out = os.path.join(work, "cmp-" + "-".join(run) + "-" + level)
        p = subprocess.run([S.BIN, "compare", "-b", self.bench, "-c", self.cmp, "-o", self.out,
                            "--top", "3", "-l", level], capture_output=True, text=True, timeout=600)
        if p.returncode not in (0, 1):
            raise RuntimeError("compare failed (%d): %s" % (p.returncode, p.stderr))
        self.stdout = p.stdout
        self.planted = S.planted_record(self.bench, self.cmp)
        self.page = os.path.join(self.out, "result.html")
        self.dom, self.console = B.load(self.page)


def setUpModule():
    global WORK, DEMO, FULL
    if not S.PRELOAD or not os.path.exists(S.PRELOAD):
        raise unittest.SkipTest("MSPROBE_PRELOAD_LIB not set (run through ctest)")
    WORK = tempfile.mkdtemp(prefix="msp-html-")
    DEMO = Run(WORK, ("gpt", "bf16", "ln_eps"), "api")
    FULL = Run(WORK, ("gpt", "fp32", "gelu_tanh"), "all")


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


# ---- independent numbers: numpy over the dumped tensors -----------------------

def rel_err(n, b):
    """||n - b|| / ||b|| in float64, as msprobe-compare(1) defines it: NaN and
    Inf at the same places with the same values on both sides count as 0,
    anywhere else make the error infinite."""
    n = np.asarray(n, dtype=np.float64).ravel().copy()
    b = np.asarray(b, dtype=np.float64).ravel().copy()
    if n.size == 0:
        return float("nan")
    odd_n, odd_b = ~np.isfinite(n), ~np.isfinite(b)
    if odd_n.any() or odd_b.any():
        if not np.array_equal(odd_n, odd_b) or not np.array_equal(n[odd_n], b[odd_b]):
            return float("inf")
        n[odd_n] = 0
        b[odd_b] = 0
    d, nb = np.linalg.norm(n - b), np.linalg.norm(b)
    if nb == 0:
        return 0.0 if d == 0 else float("inf")
    return float(d / nb)


def values(ds):
    """A dataset as float64; bfloat16 (an HDF5 float type numpy lacks) by its bits."""
    if ds.attrs.get("dtype") in ("torch.bfloat16", b"torch.bfloat16"):
        raw = np.empty(ds.shape, dtype=np.uint16)
        ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=H.bf16_type())
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return ds[()]


def out_errors(run, step=0):
    """Record name -> worst output error of step `step`, rank 0, from h5py."""
    errs = {}
    path = "step%d/rank0/dump.h5" % step
    with h5py.File(os.path.join(run.bench, path), "r") as fb, \
            h5py.File(os.path.join(run.cmp, path), "r") as fc:
        for name in fc:
            g = fc[name]
            if not isinstance(g, h5py.Group) or name not in fb:
                continue
            worst = float("nan")
            for role in g:
                if not role.startswith("output") or role not in fb[name]:
                    continue
                e = rel_err(values(g[role]), values(fb[name][role]))
                if not math.isnan(e) and (math.isnan(worst) or e > worst):
                    worst = e
            errs[name] = worst
    return errs


def attrs(run, step=0):
    """{record: its attributes and "order"}, of the records holding tensors."""
    with h5py.File(os.path.join(run.cmp, "step%d/rank0/dump.h5" % step), "r") as f:
        ra = record_attrs(f)
        return {r["record"].decode(): dict(ra.get(r["record"].decode(), {}), order=int(r["order"]))
                for r in f["index"][()] if r["role"]}


def details_rows(run):
    wb = openpyxl.load_workbook(os.path.join(run.out, "result.xlsx"), read_only=True)
    rows = wb["details"].iter_rows(values_only=True)
    head = next(rows)
    out = [dict(zip(head, r)) for r in rows]
    wb.close()
    return out


def runs():
    return (("demo", DEMO), ("full", FULL))


class PageLoads(unittest.TestCase):
    def test_no_console_message_and_no_script_error(self):
        for tag, r in runs():
            with self.subTest(tag):
                self.assertEqual(r.console, [])
                self.assertEqual(r.dom.find("body").attrs.get("data-ready"), "1")
                self.assertEqual(r.dom.find(id="msp-errors").text(), "")

    def test_page_is_self_contained(self):
        with open(DEMO.page, encoding="utf-8") as f:
            html = f.read()
        # no file, script or style is fetched: everything is inline
        self.assertIsNone(re.search(r"<(script|link|img)[^>]+(src|href)=", html))
        self.assertIn("Chart.js v3", html)

    def test_compare_prints_the_page_path(self):
        self.assertIn("report: %s/result.html" % DEMO.out, DEMO.stdout)


class ErrorFlow(unittest.TestCase):
    def test_first_marked_suspect_is_the_planted_record(self):
        for tag, r in runs():
            with self.subTest(tag):
                self.assertIsNotNone(r.planted)
                marks = r.dom.find("ol", id="flow-marks").find_all("li")
                self.assertTrue(marks)
                first = marks[0]
                self.assertEqual(first.attrs["data-record"], r.planted)
                self.assertEqual(first.attrs["data-place"], "1")
                self.assertEqual(first.attrs["data-step"], "0")
                # drawn: Chart.js placed the point inside the canvas
                self.assertGreater(int(first.attrs["data-px"]), 0)
                self.assertGreater(int(first.attrs["data-py"]), 0)
                # and linked to its card
                self.assertEqual(first.find("a").attrs["href"], "#suspect-1")
                # numpy's output error of the planted record
                want = out_errors(r)[r.planted]
                self.assertAlmostEqual(float(first.attrs["data-out"]) / want, 1.0, places=6)

    def test_every_record_of_the_step_is_charted(self):
        for tag, r in runs():
            with self.subTest(tag):
                # ~140 records a step: far below the aggregation bound
                note = r.dom.find(id="flow-note").text()
                self.assertTrue(note.startswith("Every record of step 0 rank 0"), note)
                errs = out_errors(r)
                kept = [n for n in errs if r.level == "all" or not n.startswith("Module.")]
                drawn = sum(1 for n in kept if not math.isnan(errs[n]))
                self.assertIn("(%d points)" % drawn, note)


class ModelTree(unittest.TestCase):
    def test_module_of_the_planted_record_is_coloured_by_its_worst_error(self):
        for tag, r in runs():
            with self.subTest(tag):
                a = attrs(r)
                module = a[r.planted]["parent"]
                self.assertTrue(module.startswith("Module.blocks."), module)
                node = r.dom.find("span", data_node=module)
                self.assertIsNotNone(node, module)
                self.assertIn("root", node.attrs["data-mark"].split())
                self.assertNotEqual(node.attrs["data-color"], "#e3e8ee")
                self.assertEqual(node.attrs["style"].replace(" ", ""),
                                 "background:" + node.attrs["data-color"].replace(" ", ""))

                # worst output error of every compared record under the module:
                # forward records whose parent chain reaches it, their backward
                def under(name):
                    p = a[name].get("parent")
                    while p:
                        if p == module:
                            return True
                        p = a.get(p, {}).get("parent")
                    return False
                fwd = {n for n in a if n.endswith(".forward") or ".forward." in n}
                members = {n for n in fwd if n == module or under(n)}
                members |= {re.sub(r"\.forward(\.\d+)?$",
                                   lambda m: ".backward" + (m.group(1) or ""), n)
                            for n in members}
                if r.level == "api":
                    members = {n for n in members if not n.startswith("Module.")}
                errs = out_errors(r)
                want = max(errs[n] for n in members if n in errs and not math.isnan(errs[n]))
                self.assertAlmostEqual(float(node.attrs["data-worst"]) / want, 1.0, places=6)

    def test_branch_of_the_planted_module_is_open(self):
        for tag, r in runs():
            with self.subTest(tag):
                node = r.dom.find("span", data_node=attrs(r)[r.planted]["parent"])
                p, opened = node.parent, []
                while p is not None:
                    if p.tag == "details":
                        opened.append("open" in p.attrs)
                    p = p.parent
                self.assertTrue(opened and all(opened[1:]), opened)


class SuspectCard(unittest.TestCase):
    def test_card_names_the_planted_record_and_its_module(self):
        for tag, r in runs():
            with self.subTest(tag):
                c = r.dom.find("div", id="suspect-1")
                self.assertEqual(c.attrs["data-record"], r.planted)
                self.assertEqual(c.find("code", class_="module").text(),
                                 attrs(r)[r.planted]["parent"])
                self.assertTrue(c.find("p", class_="reason").text())

    def test_card_numbers_equal_the_xlsx_details(self):
        for tag, r in runs():
            with self.subTest(tag):
                rows = {d["NPU Name"]: d for d in details_rows(r) if d["Step"] == 0}
                trs = r.dom.find("div", id="suspect-1").find_all("tr", data_name=True)
                self.assertTrue(trs)
                for tr in trs:
                    name = tr.attrs["data-name"]
                    self.assertIn(name, rows)
                    cells = tr.find_all("td")
                    # Tensor, Dtype, Shape, Error, Cosine, MaxAbsErr, MaxRelativeErr, ...
                    for col, idx in (("Cosine", 4), ("MaxAbsErr", 5), ("MaxRelativeErr", 6)):
                        want, got = rows[name][col], cells[idx].attrs["data-value"]
                        self.assertTrue(math.isclose(float(got), float(want), rel_tol=1e-12),
                                        "%s %s: page %s, xlsx %s" % (name, col, got, want))
                        # and the text shown is that number, rounded
                        shown = float(cells[idx].text())
                        self.assertTrue(math.isclose(shown, float(want), rel_tol=1e-3),
                                        (shown, want))
                    self.assertEqual(cells[2].text(), rows[name]["NPU Tensor Shape"])

    def test_output_error_is_numpys(self):
        for tag, r in runs():
            with self.subTest(tag):
                out = r.dom.find("div", id="suspect-1").find("b", class_="out-err")
                want = out_errors(r)[r.planted]
                self.assertTrue(math.isclose(float(out.attrs["data-value"]), want, rel_tol=1e-9))

    def test_histogram_counts_every_element_and_scatter_is_bounded(self):
        for tag, r in runs():
            with self.subTest(tag):
                c = r.dom.find("div", id="suspect-1")
                with h5py.File(os.path.join(r.cmp, "step0/rank0/dump.h5"), "r") as f:
                    numel = int(np.prod(f[r.planted]["output.0"].shape))
                self.assertEqual(int(c.find("canvas", class_="hist").attrs["data-total"]), numel)
                stride = -(-numel // 2000)
                self.assertEqual(int(c.find("canvas", class_="scatter").attrs["data-points"]),
                                 (numel - 1) // stride + 1)

    def test_histogram_bins_are_numpys(self):
        # suspect 1's sample (the page's first) against |npu - bench| of the
        # planted output binned here: bin floor((log10 e + 12) * 4), 64 bins
        for tag, r in runs():
            with self.subTest(tag):
                with open(r.page, encoding="utf-8") as f:
                    m = re.search(r'"sample":(\{"numel":.*?\]),"npu"', f.read())
                got = json.loads(m.group(1) + "}")
                path = "step0/rank0/dump.h5"
                with h5py.File(os.path.join(r.bench, path), "r") as fb, \
                        h5py.File(os.path.join(r.cmp, path), "r") as fc:
                    n = values(fc[r.planted]["output.0"]).ravel()
                    b = values(fb[r.planted]["output.0"]).ravel()
                ok = np.isfinite(n) & np.isfinite(b)
                e = np.abs(n[ok] - b[ok])
                k = np.floor((np.log10(e[e > 0]) + 12) * 4).astype(np.int64)
                self.assertEqual(got["numel"], n.size)
                self.assertEqual((got["nonfinite"], got["zero"]),
                                 (int((~ok).sum()), int((e == 0).sum())))
                self.assertEqual((got["below"], got["above"]),
                                 (int((k < 0).sum()), int((k >= 64).sum())))
                inside = k[(k >= 0) & (k < 64)]
                self.assertEqual(got["bins"], np.bincount(inside, minlength=64).tolist())


class AcrossSteps(unittest.TestCase):
    def test_two_steps_give_a_trend(self):
        for tag, r in runs():
            with self.subTest(tag):
                canvas = r.dom.find("canvas", id="trend-canvas")
                self.assertIsNotNone(canvas)
                self.assertGreater(int(canvas.attrs["data-lines"]), 1)


class Screenshot(unittest.TestCase):
    def test_screenshot_of_the_demo_page(self):
        B.screenshot(DEMO.page, SHOT, 1400, 2000)
        with open(SHOT, "rb") as f:
            data = f.read()
        self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")
        self.assertGreater(len(data), 20000)


class XlsxChart(unittest.TestCase):
    def test_error_flow_chart_sheet_is_a_log_scatter_over_its_data(self):
        path = os.path.join(FULL.out, "result.xlsx")
        wb = openpyxl.load_workbook(path)
        self.assertEqual(wb.sheetnames[:4], ["summary", "details", "error_flow", "error_flow_data"])
        with zipfile.ZipFile(path) as z:
            self.assertIn("xl/chartsheets/sheet1.xml", z.namelist())
            chart = z.read("xl/charts/chart1.xml").decode()
        self.assertIn("<c:scatterChart>", chart)
        self.assertIn('<c:logBase val="10"/>', chart)
        rows = list(wb["error_flow_data"].iter_rows(min_row=2, values_only=True))
        self.assertIn("error_flow_data!$E$2:$E$%d" % (len(rows) + 1), chart)
        # one row per record of step 0 rank 0, in execution order, errors as numpy's
        a = attrs(FULL)
        self.assertEqual([r[3] for r in rows], sorted(a, key=lambda n: int(a[n]["order"])))
        errs = out_errors(FULL)
        for r in rows:
            want = errs[r[3]]
            if isinstance(r[4], str):
                self.assertEqual(r[4], "=NA()")
                self.assertTrue(math.isnan(want) or want == 0, (r[3], want))
            else:
                self.assertTrue(math.isclose(r[4], want, rel_tol=1e-9), (r[3], r[4], want))
        self.assertIn(FULL.planted, [r[3] for r in rows if r[7] == "introduced"])


class NoHtml(unittest.TestCase):
    def test_no_html_writes_no_page(self):
        out = os.path.join(WORK, "cmp-nohtml")
        p = subprocess.run([S.BIN, "compare", "-b", FULL.bench, "-c", FULL.cmp, "-o", out,
                            "--no-html"], capture_output=True, text=True, timeout=600)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        self.assertTrue(os.path.exists(os.path.join(out, "result.xlsx")))
        self.assertFalse(os.path.exists(os.path.join(out, "result.html")))
        self.assertNotIn("result.html", p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
