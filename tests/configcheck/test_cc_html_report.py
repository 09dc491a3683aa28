"""config_check's result.html loaded in headless Chromium: two static packs
of this environment, the second with two variables set that the first lacks;
the page's items, pass/fail and differences are read from its DOM and
checked against result.xlsx read back with openpyxl (and the variables the
test set). --no-html writes no page."""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cc_testlib as T  # noqa: E402
import msp_browser as B  # noqa: E402

SET = {"HCCL_ALGO": "level0:ring", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}


def setUpModule():
    global WORK, OUT, DOM, CONSOLE, STDOUT
    WORK = tempfile.mkdtemp(prefix="msp-cc-html-")
    a, b = os.path.join(WORK, "a.zip"), os.path.join(WORK, "b.zip")
    env = T.clean_env(MSPROBE_PYTHON=T.PYTHON)
    for k in SET:
        env.pop(k, None)
    for path, extra in ((a, {}), (b, SET)):
        p = T.msprobe("config_check", "-d", "-o", path, env=dict(env, **extra))
        if p.returncode != 0:
            raise RuntimeError(p.stderr)
    OUT = os.path.join(WORK, "out")
    p = T.msprobe("config_check", "-c", a, b, "-o", OUT, env=env)
    if p.returncode != 1:
        raise RuntimeError("config_check: %d %s" % (p.returncode, p.stderr))
    STDOUT = p.stdout
    DOM, CONSOLE = B.load(os.path.join(OUT, "result.html"))


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


class ConfigCheckPage(unittest.TestCase):
    def test_loads_without_console_message(self):
        self.assertEqual(CONSOLE, [])
        self.assertEqual(DOM.find("body").attrs.get("data-ready"), "1")
        self.assertIn("report: %s/result.html" % OUT, STDOUT)

    def test_items_and_pass_fail_are_the_xlsx_summary(self):
        want = T.summary(os.path.join(OUT, "result.xlsx"))
        rows = DOM.find("table", id="items").find_all("tr", data_item=True)
        got = {r.attrs["data-item"]: r.attrs["data-status"] for r in rows}
        words = {True: "pass", False: "fail", "N/A": "n/a"}
        self.assertEqual(got, {k: words[v] for k, v in want.items()})
        self.assertEqual(got["env"], "fail")

    def test_env_differences_name_the_variables_set(self):
        sec = DOM.find("section", id="item-env")
        lines = [li.text() for li in sec.find("ul", class_="diffs failed").find_all("li")]
        self.assertEqual(len(lines), len(SET))
        for k, v in SET.items():
            self.assertTrue(any(l.startswith(k + ":") and v in l for l in lines), (k, lines))
        # the table rows of the page are the env sheet's
        sheet = T.sheet_rows(os.path.join(OUT, "result.xlsx"), "env")
        table = sec.find("table", class_="item-table")
        page = [[td.text() for td in tr.find_all("td")] for tr in table.find_all("tr")[1:]]
        self.assertEqual(page, [["" if v is None else str(v) for v in r.values()] for r in sheet])

    def test_no_html_writes_no_page(self):
        out = os.path.join(WORK, "out-nohtml")
        p = T.msprobe("config_check", "-c", os.path.join(WORK, "a.zip"),
                      os.path.join(WORK, "b.zip"), "-o", out, "--no-html")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertTrue(os.path.exists(os.path.join(out, "result.xlsx")))
        self.assertFalse(os.path.exists(os.path.join(out, "result.html")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
