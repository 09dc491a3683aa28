"""result.html's edges, on dumps written with h5py alone (no shim): record
names that look like HTML stay text, a step of more records than a chart
holds is aggregated to the bound and says so (the planted record still
marked), and a statistics-only dump gives a page without element samples.
Each page is loaded in headless Chromium (tests/lib/msp_browser.py)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmp_h5 as H  # noqa: E402
import msp_browser as B  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
MAX_POINTS = 4000   # msprobe-compare(1), HTML REPORT


def chain(names, planted, magnitude, seed=0, numel=8):
    """Two runs of a chain of ops: each output feeds the next op; the compare
    side's output of `planted` is off by `magnitude` (relative), later ops
    inherit it through their input."""
    rng = np.random.default_rng(seed)
    bench, cmp = [], []
    x_b = x_c = rng.standard_normal(numel).astype(np.float32)
    for name in names:
        y_b = (np.tanh(x_b) * 1.5 + 0.25).astype(np.float32)
        y_c = (np.tanh(x_c) * 1.5 + 0.25).astype(np.float32)
        if name == planted:
            y_c = (y_c * (1 + magnitude)).astype(np.float32)
        bench.append((name, {"input.0": x_b, "output.0": y_b}))
        cmp.append((name, {"input.0": x_c, "output.0": y_c}))
        x_b, x_c = y_b, y_c
    return bench, cmp


def compare(work, bench, cmp, stats_only=False):
    b, c = os.path.join(work, "b.h5"), os.path.join(work, "c.h5")
    H.write_dump(b, bench, stats_only=stats_only)
    H.write_dump(c, cmp, stats_only=stats_only)
    out = os.path.join(work, "out")
    p = subprocess.run([BIN, "compare", "-b", b, "-c", c, "-o", out], capture_output=True,
                       text=True, timeout=600)
    if p.returncode not in (0, 1):
        raise AssertionError(p.stderr)
    return B.load(os.path.join(out, "result.html"))


class HtmlBounds(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-html-bounds-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_record_names_that_look_like_html_stay_text(self):
        # HDF5 group names cannot hold '/': no "</script>" here (html.c escapes
        # every '<' of the data anyway)
        evil = 'Functional.x<img src=x onerror="document.title=1"><!--&amp;.0.forward'
        names = ["Functional.relu.%d.forward" % i for i in range(4)] + [evil] + \
                ["Tensor.add.%d.forward" % i for i in range(4)]
        dom, console = compare(self.work, *chain(names, evil, 0.3))
        self.assertEqual(console, [])
        self.assertEqual(dom.find("body").attrs.get("data-ready"), "1")
        self.assertEqual(dom.find_all("img"), [])
        first = dom.find("ol", id="flow-marks").find("li")
        self.assertEqual(first.attrs["data-record"], evil)
        self.assertEqual(dom.find("div", id="suspect-1").attrs["data-record"], evil)

    def test_more_records_than_a_chart_holds_are_aggregated(self):
        n = 4500
        names = ["Functional.linear.%d.forward" % i for i in range(n)]
        planted = names[3001]
        dom, console = compare(self.work, *chain(names, planted, 0.3, numel=2))
        self.assertEqual(console, [])
        note = dom.find(id="flow-note").text()
        self.assertTrue(note.startswith("Aggregated: %d records" % n), note)
        canvas = dom.find("canvas", id="flow-canvas")
        marks = dom.find("ol", id="flow-marks").find_all("li")
        self.assertLessEqual(int(canvas.attrs["data-charted"]), MAX_POINTS + len(marks))
        self.assertGreater(int(canvas.attrs["data-charted"]), MAX_POINTS // 2)
        self.assertEqual(marks[0].attrs["data-record"], planted)
        self.assertEqual(dom.find(id="n-records").text(), str(n))

    def test_a_large_suspect_is_sampled_by_runs_as_replay_samples(self):
        """A suspect past 65,536 elements: its histogram is of every k-th run of
        1,024 elements (k the least that keeps 65,536 at most, the last run
        short), binned here by numpy over the same runs; the card says so."""
        numel, run = 300500, 1024
        names = ["Functional.relu.%d.forward" % i for i in range(4)]
        bench, cmp = chain(names, names[1], 0.3, numel=numel)
        dom, console = compare(self.work, bench, cmp)
        self.assertEqual(console, [])
        with open(os.path.join(self.work, "out", "result.html"), encoding="utf-8") as f:
            m = re.search(r'"sample":(\{"numel":.*?\]),"npu"', f.read())
        got = json.loads(m.group(1) + "}")
        runs = -(-numel // run)
        every = -(-runs // (65536 // run))
        idx = np.concatenate([np.arange(j * run, min((j + 1) * run, numel))
                              for j in range(0, runs, every)])
        n = dict(cmp)[names[1]]["output.0"].astype(np.float64)[idx]
        b = dict(bench)[names[1]]["output.0"].astype(np.float64)[idx]
        e = np.abs(n - b)
        k = np.floor((np.log10(e[e > 0]) + 12) * 4).astype(np.int64)
        self.assertEqual((got["numel"], got["every"], got["counted"]), (numel, every, idx.size))
        self.assertLessEqual(idx.size, 65536)
        self.assertEqual((got["zero"], got["below"], got["above"], got["nonfinite"]),
                         (int((e == 0).sum()), int((k < 0).sum()), int((k >= 64).sum()), 0))
        inside = k[(k >= 0) & (k < 64)]
        self.assertEqual(got["bins"], np.bincount(inside, minlength=64).tolist())
        card = dom.find("div", id="suspect-1")
        self.assertEqual(card.attrs["data-record"], names[1])
        self.assertEqual(int(card.find("canvas", class_="hist").attrs["data-total"]), idx.size)
        self.assertIn("%d of %d elements (every %dth run of 1024)" % (idx.size, numel, every),
                      card.text())

    def test_statistics_dump_page_has_no_samples(self):
        names = ["Functional.relu.%d.forward" % i for i in range(6)]
        dom, console = compare(self.work, *chain(names, names[2], 0.5), stats_only=True)
        self.assertEqual(console, [])
        self.assertEqual(dom.find("body").attrs.get("data-ready"), "1")
        self.assertEqual(dom.find_all("canvas", class_="hist"), [])
        # no module records, no parent attribute: the tree groups records by API
        self.assertIn("grouped by API", dom.find(id="tree-note").text())


if __name__ == "__main__":
    unittest.main(verbosity=2)
