"""result.html and result.xlsx's chart for a real planted run, read back
independently: a small GPT trained under the real preload shim (dump_mode
mix), fp32 "other hardware" noise, GELU approximate="tanh" planted in one
block (tests/compare/culprit_models.py). The page is loaded in headless
Chromium (tests/lib/msp_browser.py, command line only) and its DOM read back:
the suspect the chart marks is the planted record (found with h5py, as the
culprit suite does), the tree node of its module (the record's 'parent'
attribute, read with h5py) is coloured by the worst error under it
(recomputed with numpy from the dumped tensors), and the card's numbers are
the xlsx's (openpyxl). A screenshot of the page lands in this test's build
folder (html_report_planted.png; docs/compare_report.png is a copy)."""
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
import numpy as np
import openpyxl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import culprit_suite as S  # noqa: E402
import msp_browser as B  # noqa: E402

RUN = ("gpt", "fp32", "gelu_tanh")
SHOT = os.path.join(os.getcwd(), "html_report_planted.png")


def setUpModule():
    global WORK, BENCH, CMP, OUT, STDOUT, PLANTED, DOM, CONSOLE
    if not S.PRELOAD or not os.path.exists(S.PRELOAD):
        raise unittest.SkipTest("MSPROBE_PRELOAD_LIB not set (run through ctest)")
    WORK = tempfile.mkdtemp(prefix="msp-html-")
    BENCH = S.run_dump(WORK, RUN[0], "bench", "none", mode="mix")
    CMP = S.run_dump(WORK, *RUN, mode="mix")
    OUT = os.path.join(WORK, "cmp")
    p = subprocess.run([S.BIN, "compare", "-b", BENCH, "-c", CMP, "-o", OUT, "--top", "5"],
                       capture_output=True, text=True, timeout=600)
    if p.returncode not in (0, 1):
        raise RuntimeError("compare failed (%d): %s" % (p.returncode, p.stderr))
    STDOUT = p.stdout
    PLANTED = S.planted_record(BENCH, CMP)
    DOM, CONSOLE = B.load(os.path.join(OUT, "result.html"))


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
        if not np.array_equal(odd_n, odd_b):
            return float("inf")
        n[odd_n] = 0
        b[odd_b] = 0
    d, nb = np.linalg.norm(n - b), np.linalg.norm(b)
    if nb == 0:
        return 0.0 if d == 0 else float("inf")
    return float(d / nb)


def out_errors(step=0):
    """Record name -> worst output error of step `step`, rank 0, from h5py."""
    errs = {}
    path = "step%d/rank0/dump.h5" % step
    with h5py.File(os.path.join(BENCH, path), "r") as fb, \
            h5py.File(os.path.join(CMP, path), "r") as fc:
        for name in fc:
            g = fc[name]
            if not isinstance(g, h5py.Group) or name not in fb:
                continue
            worst = float("nan")
            for role in g:
                if not role.startswith("output") or role not in fb[name]:
                    continue
                e = rel_err(g[role][()], fb[name][role][()])
                if not math.isnan(e) and (math.isnan(worst) or e > worst):
                    worst = e
            errs[name] = worst
    return errs


def attrs(step=0):
    with h5py.File(os.path.join(CMP, "step%d/rank0/dump.h5" % step), "r") as f:
        return {k: {a: (v.decode() if isinstance(v, bytes) else v) for a, v in f[k].attrs.items()}
                for k in f if isinstance(f[k], h5py.Group)}


def details_rows():
    wb = openpyxl.load_workbook(os.path.join(OUT, "result.xlsx"), read_only=True)
    ws = wb["details"]
    rows = ws.iter_rows(values_only=True)
    head = next(rows)
    return [dict(zip(head, r)) for r in rows]


class PageLoads(unittest.TestCase):
    def test_no_console_message_and_no_script_error(self):
        self.assertEqual(CONSOLE, [])
        body = DOM.find("body")
        self.assertEqual(body.attrs.get("data-ready"), "1")
        self.assertEqual(DOM.find(id="msp-errors").text(), "")

    def test_page_is_self_contained(self):
        with open(os.path.join(OUT, "result.html"), encoding="utf-8") as f:
            html = f.read()
        # no file, script or style is fetched: everything is inline
        self.assertIsNone(re.search(r"<(script|link|img)[^>]+(src|href)=", html))
        self.assertIn("Chart.js v3", html)

    def test_compare_prints_the_page_path(self):
        self.assertIn("report: %s/result.html" % OUT, STDOUT)


class ErrorFlow(unittest.TestCase):
    def test_first_marked_suspect_is_the_planted_record(self):
        self.assertIsNotNone(PLANTED)
        marks = DOM.find("ol", id="flow-marks").find_all("li")
        self.assertTrue(marks)
        first = marks[0]
        self.assertEqual(first.attrs["data-record"], PLANTED)
        self.assertEqual(first.attrs["data-place"], "1")
        self.assertEqual(first.attrs["data-step"], "0")
        # drawn: Chart.js placed the point inside the canvas
        self.assertGreater(int(first.attrs["data-px"]), 0)
        self.assertGreater(int(first.attrs["data-py"]), 0)
        # and linked to its card
        self.assertEqual(first.find("a").attrs["href"], "#suspect-1")

    def test_marked_output_error_is_numpys(self):
        first = DOM.find("ol", id="flow-marks").find("li")
        want = out_errors()[PLANTED]
        self.assertAlmostEqual(float(first.attrs["data-out"]) / want, 1.0, places=6)

    def test_every_record_of_the_step_is_charted(self):
        # 141-odd records per step: far below the aggregation bound
        note = DOM.find(id="flow-note").text()
        self.assertTrue(note.startswith("Every record of step 0 rank 0"), note)
        errs = out_errors()
        drawn = sum(1 for e in errs.values() if not math.isnan(e))
        self.assertIn("(%d points)" % drawn, note)


class ModelTree(unittest.TestCase):
    def test_module_of_the_planted_record_is_coloured_by_its_worst_error(self):
        a = attrs()
        module = a[PLANTED]["parent"]
        self.assertTrue(module.startswith("Module.blocks."), module)
        node = DOM.find("span", data_node=module)
        self.assertIsNotNone(node, module)
        self.assertIn("root", node.attrs["data-mark"].split())
        self.assertNotEqual(node.attrs["data-color"], "#e3e8ee")
        self.assertEqual(node.attrs["style"].replace(" ", ""),
                         "background:" + node.attrs["data-color"].replace(" ", ""))
        # worst output error of every record under the module (forward records
        # whose parent chain reaches it, and their backward records)
        def under(name):
            p = a[name].get("parent")
            while p:
                if p == module:
                    return True
                p = a.get(p, {}).get("parent")
            return False
        fwd = {n for n in a if n.endswith(".forward") or ".forward." in n}
        members = {n for n in fwd if n == module or under(n)}
        members |= {re.sub(r"\.forward(\.\d+)?$", lambda m: ".backward" + (m.group(1) or ""), n)
                    for n in members}
        errs = out_errors()
        want = max(errs[n] for n in members if n in errs and not math.isnan(errs[n]))
        self.assertAlmostEqual(float(node.attrs["data-worst"]) / want, 1.0, places=6)

    def test_planted_record_sits_under_its_module(self):
        # the root-cause branch is opened, down to the planted module
        node = DOM.find("span", data_node=attrs()[PLANTED]["parent"])
        p, opened = node.parent, []
        while p is not None:
            if p.tag == "details":
                opened.append("open" in p.attrs)
            p = p.parent
        self.assertTrue(opened and all(opened[1:]), opened)


class SuspectCard(unittest.TestCase):
    def card(self):
        c = DOM.find("div", id="suspect-1")
        self.assertIsNotNone(c)
        return c

    def test_card_names_the_planted_record_and_its_module(self):
        c = self.card()
        self.assertEqual(c.attrs["data-record"], PLANTED)
        self.assertEqual(c.find("code", class_="module").text(), attrs()[PLANTED]["parent"])
        self.assertTrue(c.find("p", class_="reason").text())

    def test_card_numbers_equal_the_xlsx_details(self):
        rows = {r["NPU Name"]: r for r in details_rows() if r["Step"] == 0}
        trs = self.card().find_all("tr", data_name=True)
        self.assertTrue(trs)
        for tr in trs:
            name = tr.attrs["data-name"]
            self.assertIn(name, rows)
            cells = tr.find_all("td")
            # Tensor, Dtype, Shape, Error, Cosine, MaxAbsErr, MaxRelativeErr, ...
            for col, idx in (("Cosine", 4), ("MaxAbsErr", 5), ("MaxRelativeErr", 6)):
                want, got = rows[name][col], cells[idx].attrs["data-value"]
                self.assertTrue(math.isclose(float(got), float(want), rel_tol=1e-12, abs_tol=0),
                                "%s %s: page %s, xlsx %s" % (name, col, got, want))
                # and the text shown is that number, rounded
                shown = float(cells[idx].text())
                self.assertTrue(math.isclose(shown, float(want), rel_tol=1e-3), (shown, want))
            self.assertEqual(cells[2].text(), rows[name]["NPU Tensor Shape"])

    def test_output_error_is_numpys(self):
        out = self.card().find("b", class_="out-err")
        want = out_errors()[PLANTED]
        self.assertTrue(math.isclose(float(out.attrs["data-value"]), want, rel_tol=1e-9))

    def test_histogram_counts_every_element_and_scatter_is_bounded(self):
        c = self.card()
        with h5py.File(os.path.join(CMP, "step0/rank0/dump.h5"), "r") as f:
            numel = int(np.prod(f[PLANTED]["output.0"].shape))
        self.assertEqual(int(c.find("canvas", class_="hist").attrs["data-total"]), numel)
        stride = -(-numel // 2000)
        self.assertEqual(int(c.find("canvas", class_="scatter").attrs["data-points"]),
                         (numel - 1) // stride + 1)


class AcrossSteps(unittest.TestCase):
    def test_two_steps_give_a_trend_with_the_planted_record(self):
        canvas = DOM.find("canvas", id="trend-canvas")
        self.assertIsNotNone(canvas)
        self.assertGreater(int(canvas.attrs["data-lines"]), 1)


class Screenshot(unittest.TestCase):
    def test_screenshot_of_the_page(self):
        B.screenshot(os.path.join(OUT, "result.html"), SHOT, 1400, 2200)
        with open(SHOT, "rb") as f:
            data = f.read()
        self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")
        self.assertGreater(len(data), 20000)


class XlsxChart(unittest.TestCase):
    def test_error_flow_chart_sheet_is_a_log_scatter_over_its_data(self):
        path = os.path.join(OUT, "result.xlsx")
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
        a = attrs()
        self.assertEqual([r[3] for r in rows], sorted(a, key=lambda n: int(a[n]["order"])))
        errs = out_errors()
        for r in rows:
            want = errs[r[3]]
            if isinstance(r[4], str):
                self.assertEqual(r[4], "=NA()")
                self.assertTrue(math.isnan(want) or want == 0, (r[3], want))
            else:
                self.assertTrue(math.isclose(r[4], want, rel_tol=1e-9), (r[3], r[4], want))
        self.assertIn(PLANTED, [r[3] for r in rows if r[7] == "introduced"])


class NoHtml(unittest.TestCase):
    def test_no_html_writes_no_page(self):
        out = os.path.join(WORK, "cmp-nohtml")
        p = subprocess.run([S.BIN, "compare", "-b", BENCH, "-c", CMP, "-o", out, "--no-html"],
                           capture_output=True, text=True, timeout=600)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        self.assertTrue(os.path.exists(os.path.join(out, "result.xlsx")))
        self.assertFalse(os.path.exists(os.path.join(out, "result.html")))
        self.assertNotIn("result.html", p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
