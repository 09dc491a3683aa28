"""msprobe merge_result: the chosen APIs' compare metrics of every rank side
by side, from msprobe compare's output (result.csv, result.xlsx, per-rank
workbooks) and from msprobe's own per-rank workbooks (written here with
openpyxl, shared strings and all). What each sheet must hold is rebuilt here
from the compare results read with Python's csv and openpyxl."""
import csv
import os
import shutil
import subprocess
import tempfile
import unittest

import openpyxl

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
GEN = os.environ.get("MSPROBE_GEN", "")
ROWS = os.environ.get("CMP_REPORT_ROWS", "")
OUT_NAME = "multi_ranks_compare_merge.xlsx"
TENSOR_INDEX = ["Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                "Five Thousandths Err Ratio"]
STATS_INDEX = ["Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr",
               "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"]


def setUpModule():
    global WORK
    if not GEN:
        raise unittest.SkipTest("MSPROBE_GEN not set (benchmarks not built)")
    WORK = tempfile.mkdtemp(prefix="msp-merge-")


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


def gen_compare(tag, *gen_args):
    root = os.path.join(WORK, tag)
    if not os.path.isdir(root):
        subprocess.run([GEN, "--out", root, "--steps", "2", "--ranks", "4", "--layers", "6",
                        "--numel", "500", "--dtype", "bf16", "--plant", "2", "--plant-rank", "2",
                        "--seed", "11"] + list(gen_args), check=True, timeout=300)
        p = subprocess.run([BIN, "compare", "-b", os.path.join(root, "bench"), "-c",
                            os.path.join(root, "npu"), "-o", os.path.join(root, "out"), "--csv",
                            "--replay", "off"], capture_output=True, text=True, timeout=600)
        assert p.returncode in (0, 1), p.stderr
    return os.path.join(root, "out")


def merge(indir, cfg_text, tag):
    cfg = os.path.join(WORK, tag + ".yaml")
    with open(cfg, "w") as f:
        f.write(cfg_text)
    out = os.path.join(WORK, tag + "-merged")
    p = subprocess.run([BIN, "merge_result", "-i", indir, "-o", out, "-config", cfg],
                       capture_output=True, text=True, timeout=300)
    return p, out


def read_merged(out):
    wb = openpyxl.load_workbook(os.path.join(out, OUT_NAME), read_only=True)
    sheets = {n: list(wb[n].iter_rows(values_only=True)) for n in wb.sheetnames}
    names = wb.sheetnames
    wb.close()
    return names, sheets


def as_cell(text):
    """What a compare's cell text becomes in the merged workbook."""
    if text in (None, ""):
        return None
    try:
        v = float(text)
        if v == v and v not in (float("inf"), float("-inf")):
            return int(v) if v == int(v) and "e" not in text.lower() and "." not in text else v
    except ValueError:
        pass
    return text


def expected_from_csv(path, apis, index):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    ranks = sorted({int(r["Rank"]) for r in rows})
    order, table = [], {}
    for r in rows:
        if not any(a in r["NPU Name"] for a in apis):
            continue
        key = (int(r["Step"]), r["NPU Name"])
        if key not in table:
            table[key] = {}
            order.append(key)
        table[key][int(r["Rank"])] = r[index]
    want_ranks = sorted({k for v in table.values() for k in v})
    head = ("Step", "NPU Name") + tuple("rank%d" % k for k in want_ranks)
    body = [key + tuple(as_cell(table[key].get(k)) for k in want_ranks) for key in order]
    return ranks, [head] + body


class MergeOurResults(unittest.TestCase):
    def check_against_csv(self, out, csv_path, apis, index):
        names, sheets = read_merged(out)
        self.assertEqual(names, [i[:31] for i in index])
        for ix in index:
            _, want = expected_from_csv(csv_path, apis, ix)
            got = sheets[ix[:31]]
            self.assertEqual(got[0], want[0])
            self.assertEqual(len(got), len(want))
            for g, w in zip(got[1:], want[1:]):
                self.assertEqual(g[:2], w[:2])
                for a, b in zip(g[2:], w[2:]):
                    if isinstance(b, float):
                        # the workbook keeps 16 significant digits (libxlsxwriter's %.16G)
                        self.assertAlmostEqual(float(a), b, delta=abs(b) * 1e-15, msg=(ix, g[:2]))
                    else:
                        self.assertEqual(a, b, (ix, g[:2]))

    def test_rows_of_the_named_apis_one_column_per_rank(self):
        out = gen_compare("t")
        cfg = "api:\n  - Functional.linear   # every linear call\n  - 'Torch.mul'\n" \
              "compare_index: [Cosine, MaxAbsErr]\n"
        p, merged = merge(out, cfg, "t")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("merged 4 ranks from 1 file", p.stdout)
        self.check_against_csv(merged, os.path.join(out, "result.csv"),
                               ["Functional.linear", "Torch.mul"], ["Cosine", "MaxAbsErr"])

    def test_without_the_csv_the_workbook_gives_the_same(self):
        out = gen_compare("t")
        only_xlsx = os.path.join(WORK, "t-xlsx")
        shutil.rmtree(only_xlsx, ignore_errors=True)
        os.makedirs(only_xlsx)
        shutil.copy(os.path.join(out, "result.xlsx"), only_xlsx)
        cfg = "api: [Functional.linear]\n"
        p, merged = merge(only_xlsx, cfg, "t-xlsx")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_against_csv(merged, os.path.join(out, "result.csv"), ["Functional.linear"],
                               TENSOR_INDEX)

    def test_any_yaml_spelling_of_the_lists_merges_the_same(self):
        # a flow list over lines and a quoted name holding a comma: YAML that
        # the hand-written reader refused ("'api' must be a list", "a quoted
        # value does not end") and msprobe's own reader (PyYAML) takes
        out = gen_compare("t")
        cfg = "api: [Functional.linear,\n      'Torch.mul', \"Nothing, like this\"]\n" \
              "compare_index: [\n  Cosine,\n  MaxAbsErr]\n"
        p, merged = merge(out, cfg, "t-flow")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_against_csv(merged, os.path.join(out, "result.csv"),
                               ["Functional.linear", "Torch.mul"], ["Cosine", "MaxAbsErr"])

    def test_a_csv_saved_with_a_byte_order_mark_merges_the_same(self):
        # Excel's "CSV UTF-8" starts the file with U+FEFF; before libcsv read
        # result.csv, the first column was named "\ufeffNPU Name"
        out = gen_compare("t")
        bom = os.path.join(WORK, "t-bom")
        os.makedirs(bom, exist_ok=True)
        with open(os.path.join(out, "result.csv"), "rb") as f:
            data = f.read()
        with open(os.path.join(bom, "result.csv"), "wb") as f:
            f.write(b"\xef\xbb\xbf" + data)
        p, merged = merge(bom, "api: [Functional.linear]\ncompare_index: [Cosine]\n", "t-bom")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_against_csv(merged, os.path.join(out, "result.csv"), ["Functional.linear"],
                               ["Cosine"])

    @unittest.skipUnless(ROWS, "CMP_REPORT_ROWS not set")
    def test_per_rank_workbooks_past_one_sheet(self):
        root = os.path.join(WORK, "t")
        gen_compare("t")
        split = os.path.join(WORK, "t-split")
        p = subprocess.run([ROWS, os.path.join(root, "bench"),
                            os.path.join(root, "npu"), split, "--rows", "20", "--replay", "off"],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        books = sorted(f for f in os.listdir(split) if f.startswith("result_rank"))
        self.assertEqual(len(books), 4)
        csv_path = os.path.join(WORK, "t-split.csv")
        shutil.move(os.path.join(split, "result.csv"), csv_path)
        p, merged = merge(split, "api: [Tensor.mul, Functional.gelu]\n", "t-split")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("from 5 files", p.stdout)
        self.check_against_csv(merged, csv_path, ["Tensor.mul", "Functional.gelu"], TENSOR_INDEX)

    def test_a_statistics_compare_merges_its_own_indexes(self):
        out = gen_compare("s", "--task", "statistics")
        p, merged = merge(out, "api:\n- Functional.linear\n", "s")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_against_csv(merged, os.path.join(out, "result.csv"), ["Functional.linear"],
                               STATS_INDEX)


MSPROBE_HEADER = ["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
                  "Bench Tensor Shape", "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr",
                  "One Thousandth Err Ratio", "Five Thousandths Err Ratio", "NPU max", "NPU min",
                  "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean",
                  "Bench l2norm", "Accuracy Reached or Not", "Err_message"]


class MergeMsprobeWorkbooks(unittest.TestCase):
    def test_msprobe_per_rank_workbooks(self):
        d = os.path.join(WORK, "msprobe-results")
        os.makedirs(d, exist_ok=True)
        names = ["Distributed.all_reduce.0.forward.input.0",
                 "Distributed.all_reduce.0.forward.output.0",
                 "Functional.linear.0.forward.output.0",
                 "Distributed.broadcast.0.forward.output.0"]
        want = {}
        for rank in (0, 1, 5):
            wb = openpyxl.Workbook()
            ws = wb.active
            ws.title = "Sheet1"
            ws.append(MSPROBE_HEADER)
            for i, n in enumerate(names):
                if rank == 1 and n.startswith("Distributed.broadcast"):
                    continue  # that rank lacks the row
                vals = [1 - 0.001 * (i + rank), 0.5 * i, 0.25 * rank + i, "N/A" if i == 3 else 0.1,
                        1.0, 1.0]
                ws.append([n, n, "torch.float32", "torch.float32", "[2, 3]", "[2, 3]"] + vals +
                          [0.0] * 8 + ["Yes", ""])
                want[(n, rank)] = vals
            # a file name as msprobe writes it (and one it must pass over)
            wb.save(os.path.join(d, "compare_result_rank%d-rank%d_20250101120000.xlsx" %
                                 (rank, rank)))
        openpyxl.Workbook().save(os.path.join(d, "notes.xlsx"))
        p, merged = merge(d, "api: [Distributed]\n", "msprobe")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("merged 3 ranks from 3 files: 3 rows", p.stdout)
        sheet_names, sheets = read_merged(merged)
        self.assertEqual(sheet_names, [i[:31] for i in TENSOR_INDEX])
        for k, ix in enumerate(TENSOR_INDEX):
            rows = sheets[ix[:31]]
            self.assertEqual(rows[0], ("NPU Name", "rank0", "rank1", "rank5"))  # no Step
            kept = [n for n in names if n.startswith("Distributed")]
            self.assertEqual([r[0] for r in rows[1:]], kept)
            for r in rows[1:]:
                for col, rank in zip(r[1:], (0, 1, 5)):
                    self.assertEqual(col, want[(r[0], rank)][k] if (r[0], rank) in want else None)


class MergeErrors(unittest.TestCase):
    def run_bad(self, cfg, needle, indir=None):
        p, _ = merge(indir or gen_compare("t"), cfg, "bad")
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertEqual(p.stdout, "")
        self.assertTrue(p.stderr.startswith("msprobe: "), p.stderr)
        self.assertIn(needle, p.stderr)

    def test_unknown_key_names_its_line(self):
        self.run_bad("# merge\napis:\n  - Functional.linear\n", "line 2: unknown key 'apis'")

    def test_api_is_required(self):
        self.run_bad("compare_index: [Cosine]\n", "'api' names no API")

    def test_an_index_the_results_lack_is_named(self):
        self.run_bad("api: [Functional.linear]\ncompare_index: [Cosin]\n", "no column 'Cosin'")

    def test_a_scalar_where_a_list_belongs(self):
        self.run_bad("api: Functional.linear\n", "line 1: 'api' must be a list")

    def test_no_row_names_the_apis(self):
        self.run_bad("api: [Nothing.like.this]\n", "names any API")

    def test_an_item_that_is_not_a_name_names_its_line(self):
        # once read as the name "[Functional.linear, Torch.mul]"
        self.run_bad("api:\n  - Torch.mul\n  - [Functional.linear, Torch.mul]\n",
                     "line 3: a list item that is not a name")

    def test_text_that_is_not_yaml_names_where_it_went_wrong(self):
        self.run_bad("api:\n  - 'Functional.linear\n  - Torch.mul\n",
                     "line 2: not YAML: found unexpected end of stream while scanning a quoted "
                     "scalar")

    def test_a_stray_quote_in_result_csv_names_its_line(self):
        # RFC 4180 quotes a field that holds a quote whole; a bare one means
        # the file was cut or hand-edited (before libcsv: read on silently)
        d = os.path.join(WORK, "stray")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "result.csv"), "w", newline="") as f:
            f.write("Rank,Step,NPU Name,Cosine\r\n0,0,Functional.linear.0.forward.output.0,1\r\n"
                    "1,0,Functional.linear.0.forward.output.0,0.5\"9\r\n")
        self.run_bad("api: [Functional.linear]\ncompare_index: [Cosine]\n",
                     "result.csv: line 3: a stray '\"'", d)

    def test_a_directory_without_results(self):
        empty = os.path.join(WORK, "empty")
        os.makedirs(empty, exist_ok=True)
        self.run_bad("api: [Functional.linear]\n", "holds no compare result", empty)


if __name__ == "__main__":
    unittest.main(verbosity=2)
