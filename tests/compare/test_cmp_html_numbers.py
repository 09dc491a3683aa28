"""result.html's numbers are printed without printf (issue 42). A page lists
a dozen numbers for every record (ids, step, rank, order, errors) and more for
each suspect's tensors; glibc's vsnprintf, through msp_buf_printf, was a
tenth of a 160,000-record compare's instructions. The page now prints them
as printf would (common's msp_fmt_g and msp_i64_digits; unit_dtoa checks
msp_fmt_g against printf at every precision), each without a format to parse.

msprobe-gen's statistics dump of 800 records, one planted, compared by
msprobe with a library preloaded (fmt_call_count.c) that counts msprobe's
vsnprintf calls: writing the page costs fewer than one call in 20 records
(the same compare with --no-html is the baseline; 5a110a0 made about 14 a
record). What the page says is what the dumps hold: the records' names and
orders as h5py reads them from each file, step and rank 0, and for every
tensor row on the page the maxima and minima of both sides exactly (17
significant digits read back as the same double) and its max diff as their
difference."""
import json
import os
import re
import sys
import unittest

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
from msp_build import GenTree  # noqa: E402
from msp_h5dump import stats_rows  # noqa: E402

COUNTER = None  # fmt_call_count's path, from the command line
LAYERS = 400


class HtmlNumbers(GenTree, unittest.TestCase):
    GEN_PREFIX = "msp-html-numbers-"
    GEN_ARGS = ("--steps", "1", "--ranks", "1", "--layers", str(LAYERS), "--numel", "256",
                "--task", "statistics", "--dtype", "bf16", "--plant", "100", "--magnitude", "0.3",
                "--seed", "5")

    def compare(self, out, *extra):
        """msprobe compare into out: msprobe's own vsnprintf calls (None in a
        sanitized build, where no library may come first)"""
        p, calls = self.compare_counted(COUNTER, "vsnprintf", out, *extra)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        return calls

    def test_page_numbers_cost_no_printf_each(self):
        with_page = self.compare(os.path.join(self.work, "page"))
        without = self.compare(os.path.join(self.work, "nopage"), "--no-html")
        self.assertTrue(os.path.exists(os.path.join(self.work, "page", "result.html")))
        self.assertFalse(os.path.exists(os.path.join(self.work, "nopage", "result.html")))
        if with_page is None:
            self.skipTest("a preloaded library cannot come before AddressSanitizer's runtime")
        self.assertLess(with_page - without, 2 * LAYERS / 20)

    def test_page_says_what_the_dumps_hold(self):
        out = os.path.join(self.work, "read")
        self.compare(out)
        with open(os.path.join(out, "result.html")) as f:
            page = f.read()
        side = {}
        for name in ("bench", "npu"):
            with h5py.File(os.path.join(self.work, name, "step0", "rank0", "dump.h5"), "r") as f:
                side[name] = {(r["record"], r["role"]): r for r in stats_rows(f)}
        orders = {rec: r["order"] for (rec, _), r in side["npu"].items()}
        rec = page[page.index('"rec":{'):]
        names = json.loads(re.search(r'"name":(\[.*?\]),"step"', rec).group(1))
        col = {k: json.loads(re.search(r'"%s":(\[[-0-9,]*\])' % k, rec).group(1))
               for k in ("step", "rank", "order")}
        self.assertEqual(len(names), 2 * LAYERS)
        self.assertEqual(col["order"], [orders[n] for n in names])
        self.assertEqual(col["step"], [0] * len(names))
        self.assertEqual(col["rank"], [0] * len(names))
        rows = [json.loads("{" + m + "}") for m in re.findall(r'("row":[^}]*)}', page)]
        self.assertGreater(len(rows), 0)
        for t in rows:
            key = (t["name"][:-len(t["role"]) - 1], t["role"])
            n, b = side["npu"][key], side["bench"][key]
            self.assertEqual((t["nmax"], t["nmin"], t["bmax"], t["bmin"]),
                             (n["max"], n["min"], b["max"], b["min"]), key)
            self.assertEqual(t["maxdiff"], n["max"] - b["max"], key)


if __name__ == "__main__":
    COUNTER = sys.argv.pop(1)
    unittest.main()
