"""merge_result over the per-rank workbooks msprobe 8.3.3 and 26 wrote
themselves (fixtures/msprobe/compare_results, named as msprobe names them:
compare_result_rank{N}_{timestamp}.xlsx), written by pandas through openpyxl
(inline strings) and through XlsxWriter (shared strings). What each merged sheet must hold is
rebuilt here from those workbooks read with openpyxl."""
import os
import shutil
import subprocess
import tempfile
import unittest

import openpyxl

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
SOURCE = os.environ.get("MSPROBE_SOURCE_DIR",
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
RESULTS = os.path.join(SOURCE, "fixtures", "msprobe", "compare_results")
APIS = ["Functional.linear", "Functional.relu", "Torch.matmul"]
INDEX = ["Cosine", "MaxAbsErr", "One Thousandth Err Ratio"]
CFG = "api:\n" + "".join("  - %s\n" % a for a in APIS) + \
      "compare_index:\n" + "".join("  - %s\n" % i for i in INDEX)


def msprobe_rows(path):
    """The first sheet of an msprobe workbook as dicts by column name."""
    wb = openpyxl.load_workbook(path, read_only=True)
    rows = list(wb.worksheets[0].iter_rows(values_only=True))
    wb.close()
    return [dict(zip(rows[0], r)) for r in rows[1:]]


def expected(files):
    """{index: [("NPU Name", "rank0", ...), rows...]}: the rows naming an API,
    first seen first, one column per rank (None where a rank lacks the row)."""
    per_rank, order = {}, []
    for rank, path in files:
        for r in msprobe_rows(path):
            name = r["NPU Name"]
            if not any(a in name for a in APIS):
                continue
            if name not in order:
                order.append(name)
            per_rank.setdefault(rank, {})[name] = r
    ranks = sorted(per_rank)
    out = {}
    for ix in INDEX:
        head = ("NPU Name",) + tuple("rank%d" % k for k in ranks)
        body = [(n,) + tuple(per_rank[k].get(n, {}).get(ix) for k in ranks) for n in order]
        out[ix] = [head] + body
    return out


class MergeMsprobeOwnWorkbooks(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="msp-merge-own-")
        self.cfg = os.path.join(self.tmp, "merge.yaml")
        with open(self.cfg, "w") as f:
            f.write(CFG)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def merge(self, indir):
        out = os.path.join(self.tmp, "merged")
        p = subprocess.run([BIN, "merge_result", "-i", indir, "-o", out, "-config", self.cfg],
                           capture_output=True, text=True, timeout=120)
        return p, out

    def check(self, version, rename=None):
        src = os.path.join(RESULTS, version)
        names = sorted(n for n in os.listdir(src) if n.endswith(".xlsx"))
        self.assertEqual(len(names), 2, names)
        indir = os.path.join(self.tmp, "in")
        os.makedirs(indir)
        files = []
        for n in names:
            rank = int(n[len("compare_result_rank"):].split("_")[0])
            dst = rename(n, rank) if rename else n
            shutil.copy(os.path.join(src, n), os.path.join(indir, dst))
            files.append((rank, os.path.join(indir, dst)))
        # msprobe's own merge_result passes over any other workbook with a warning
        p, out = self.merge(indir)
        self.assertEqual(p.returncode, 0, p.stderr)
        want = expected(files)
        wb = openpyxl.load_workbook(os.path.join(out, "multi_ranks_compare_merge.xlsx"),
                                    read_only=True)
        self.assertEqual(wb.sheetnames, INDEX)
        for ix in INDEX:
            got = list(wb[ix].iter_rows(values_only=True))
            self.assertEqual(got, want[ix], ix)
        wb.close()
        # the workbooks hold rows of every API asked for but Torch.matmul
        self.assertGreater(len(want["Cosine"]), 10)
        return want

    def test_msprobe_833_workbooks_as_it_names_them(self):
        want = self.check("v833")
        # rank 1 had one more relu call: its relu rows differ from rank 0's
        relu = [r for r in want["Cosine"][1:] if r[0].startswith("Functional.relu.1")]
        self.assertTrue(relu and all(r[1] is None and r[2] is not None for r in relu), relu)

    def test_msprobe_26_workbooks_as_it_names_them(self):
        want = self.check("v26")
        shape = [r for r in want["Cosine"][1:] if r[2] == "shape unmatched"]
        self.assertTrue(shape, want["Cosine"])

    def test_the_spelling_msprobe_merge_result_also_takes(self):
        self.check("v26", lambda n, k: n.replace("rank%d_" % k, "rank%d-rank%d_" % (k, k)))

    def test_workbooks_pandas_wrote_through_xlsxwriter(self):
        # where XlsxWriter is installed pandas picks it: shared strings (the
        # string-search reader before 09fff9a said "a cell names a shared
        # string that does not exist" of these)
        for v in ("v833_xlsxwriter", "v26_xlsxwriter"):
            with self.subTest(v=v):
                self.check(v)
                shutil.rmtree(os.path.join(self.tmp, "in"))
                self.check(v, lambda n, k: n.replace("rank%d_" % k, "rank%d-rank%d_" % (k, k)))
                shutil.rmtree(os.path.join(self.tmp, "in"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
