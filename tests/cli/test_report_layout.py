"""The report writers on hand-made results, without the compare engine:
report_from_json turns a JSON description of an msp_compare_result_t into
result.xlsx and result.csv; here they are read back with openpyxl and csv and
checked against the description itself.

Usage: test_report_layout.py PATH/TO/msp_report_from_json [unittest args]
"""
import csv
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zipfile

import openpyxl

# tests/lib is on PYTHONPATH under ctest; this keeps a run by hand working too
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
from msp_report_layout import (RED, STATS_HEADER, SUMMARY_HEADER,  # noqa: E402
                               TENSOR_HEADER, YELLOW)

DRIVER = sys.argv.pop(1) if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else \
    os.environ.get("MSPROBE_REPORT_FROM_JSON", "")

TENSOR_FIELDS = ["cosine", "euc_dist", "max_abs_err", "max_rel_err", "one_thousandth_ratio",
                 "five_thousandths_ratio"]
STATS_FIELDS = ["max_diff", "min_diff", "mean_diff", "norm_diff", "max_rel_diff",
                "min_rel_diff", "mean_rel_diff", "norm_rel_diff"]
SIDE_FIELDS = ["npu_max", "npu_min", "npu_mean", "npu_norm", "bench_max", "bench_min",
               "bench_mean", "bench_norm"]
VERDICT = {0: "Yes", 1: "No", 2: "Warning"}
CAUSE = {0: None, 1: "introduced", 2: "inherited"}


def cell_text(v):
    """What a metric must look like in the sheet: number, or N/A / inf text."""
    if isinstance(v, str):
        return {"nan": "N/A", "inf": "inf", "-inf": "-inf"}[v]
    return v


def tensor(name, bench=True, role_out=False, verdict=0, highlight=0, msg="", **metrics):
    t = {"npu_name": name, "bench_name": name if bench else None,
         "npu_dtype": "torch.bfloat16", "bench_dtype": "torch.float32" if bench else "",
         "npu_shape": "[2, 3]", "bench_shape": "[2, 3]" if bench else "",
         "is_output": int(role_out), "verdict": verdict, "highlight": highlight,
         "err_message": msg}
    base = 0.25
    for f in TENSOR_FIELDS + STATS_FIELDS + SIDE_FIELDS:
        base += 0.125
        t[f] = base
    t.update(metrics)
    return t


def tensor_spec():
    """Five records over two steps; record 1 is the root cause."""
    recs, tens = [], []

    def rec(name, step, rank, order, ts, bench=True, **kw):
        r = {"name": name, "bench_name": name if bench else None, "step": step,
             "rank": rank, "order": order, "first_tensor": len(tens), "n_tensors": len(ts),
             "worst_cosine": 0.5, "worst_max_abs": 0.25, "verdict": 0, "cause": 0,
             "is_root_cause": 0, "highlight": 0}
        r.update(kw)
        recs.append(r)
        tens.extend(ts)

    rec("Functional.linear.0.forward", 0, 0, 0, [
        tensor("Functional.linear.0.forward.input.0"),
        tensor("Functional.linear.0.forward.output.0", role_out=True, cosine=1.0)],
        worst_cosine=1.0, worst_max_abs=0.0)
    rec("Functional.relu.0.forward", 0, 0, 1, [
        tensor("Functional.relu.0.forward.input.0"),
        tensor("Functional.relu.0.forward.output.0", role_out=True, verdict=1, highlight=2,
               cosine=0.912345, max_abs_err=1.5)],
        worst_cosine=0.912345, worst_max_abs=1.5, verdict=1, cause=1, is_root_cause=1,
        highlight=2)
    rec("Tensor.mul.0.forward", 0, 0, 2, [
        tensor("Tensor.mul.0.forward.input.0", verdict=1),
        tensor("Tensor.mul.0.forward.output.0", role_out=True, verdict=1, highlight=1,
               cosine="nan", max_abs_err="inf", npu_min="-inf",
               msg='NaN/Inf at different places, "npu" side')],
        worst_cosine="nan", worst_max_abs="inf", verdict=1, cause=2, highlight=1)
    rec("Tensor.only_npu.0.forward", 0, 0, 3, [
        tensor("Tensor.only_npu.0.forward.output.0", bench=False, role_out=True, verdict=1,
               cosine="nan", msg="missing on the bench side,\nno match")],
        bench=False, worst_cosine="nan", worst_max_abs="nan", verdict=1)
    rec("Module.layer1.Linear.backward.0", 1, 3, 0, [
        tensor("Module.layer1.Linear.backward.0.input.0", euc_dist=123456789.125),
        tensor("Module.layer1.Linear.backward.0.output.0", role_out=True)])
    return {"stats_mode": 0, "root_record": 1, "root_tensor": 3, "records": recs,
            "tensors": tens}


def stats_spec():
    t0 = tensor("Functional.conv2d.0.forward.input.0")
    t1 = tensor("Functional.conv2d.0.forward.output.0", role_out=True, verdict=2,
                highlight=1, norm_rel_diff=0.75, max_diff=-2.5)
    return {"stats_mode": 1, "root_record": -1, "root_tensor": -1,
            "records": [{"name": "Functional.conv2d.0.forward",
                         "bench_name": "Functional.conv2d.0.forward", "step": 2, "rank": 1,
                         "order": 7, "first_tensor": 0, "n_tensors": 2, "worst_cosine": "nan",
                         "worst_max_abs": "nan", "verdict": 2, "cause": 0,
                         "is_root_cause": 0, "highlight": 1}],
            "tensors": [t0, t1]}


def fill_of(cell):
    f = cell.fill
    return f.fgColor.rgb if f is not None and f.fill_type == "solid" else None


@unittest.skipUnless(DRIVER and os.path.exists(DRIVER), "msp_report_from_json not built")
class ReportLayout(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="msp_report_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, spec, name):
        path = os.path.join(self.tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(spec, f)
        out = os.path.join(self.tmp, name, "nested", "out")   # created by the writer
        r = subprocess.run([DRIVER, "json", path, out], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        return out

    def check_details(self, ws, spec, header, fields):
        rows = list(ws.iter_rows(values_only=False))
        self.assertEqual([c.value for c in rows[0]], header)
        self.assertEqual(len(rows), 1 + len(spec["tensors"]))
        for rec in spec["records"]:
            for k in range(rec["n_tensors"]):
                ti = rec["first_tensor"] + k
                t = spec["tensors"][ti]
                row = rows[1 + ti]   # records are contiguous and in order here
                v = {h: c.value for h, c in zip(header, row)}
                self.assertEqual(v["NPU Name"], t["npu_name"])
                self.assertEqual(v["Bench Name"], t["bench_name"] or "N/A")
                self.assertEqual(v["NPU Dtype"], t["npu_dtype"])
                self.assertEqual(v["Bench Dtype"], t["bench_dtype"] or "N/A")
                self.assertEqual(v["Bench Tensor Shape"], t["bench_shape"] or "N/A")
                for h, f in zip(header[6:6 + len(fields)] + header[6 + len(fields):14 + len(fields)],
                                fields + SIDE_FIELDS):
                    want = cell_text(t[f])
                    if h.endswith("RelativeErr") and "Max diff" in header:
                        # msprobe 26 writes the statistics relative errors as "x%"
                        want = want if isinstance(want, str) else "%.15g%%" % want
                    self.assertEqual(v[h], want, f"{t['npu_name']} {h}")
                self.assertEqual(v["Accuracy Reached or Not"], VERDICT[t["verdict"]])
                self.assertEqual(v["Err_message"], t["err_message"] or None)
                self.assertEqual(v["Error Origin"], CAUSE[rec["cause"]])
                self.assertEqual(v["Step"], rec["step"])
                self.assertEqual(v["Rank"], rec["rank"])
                want_fill = {0: None, 1: YELLOW, 2: RED}[t["highlight"]]
                for c in row:
                    self.assertEqual(fill_of(c), want_fill, f"{c.coordinate} fill")
                    self.assertEqual(bool(c.font.b), ti == spec["root_tensor"],
                                     f"{c.coordinate} bold")

    def check_common_sheet(self, ws, ncols, nrows):
        self.assertEqual(ws.freeze_panes, "A2")
        last = openpyxl.utils.get_column_letter(ncols)
        self.assertEqual(ws.auto_filter.ref, f"A1:{last}{nrows + 1}")

    def test_tensor_mode_sheets_values_fills_links(self):
        spec = tensor_spec()
        out = self.write(spec, "tensor")
        self.assertEqual(sorted(os.listdir(out)), ["result.csv", "result.xlsx"])  # no temp left
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"))
        # the error-flow chart sheet and its data follow (test_cmp_html_report.py checks them)
        self.assertEqual(wb.sheetnames, ["summary", "details", "error_flow", "error_flow_data"])
        s, d = wb["summary"], wb["details"]
        self.check_common_sheet(s, len(SUMMARY_HEADER), len(spec["records"]))
        self.check_common_sheet(d, len(TENSOR_HEADER), len(spec["tensors"]))
        self.assertEqual([c.value for c in s[1]], SUMMARY_HEADER)
        for i, rec in enumerate(spec["records"]):
            row = s[i + 2]
            v = {h: c.value for h, c in zip(SUMMARY_HEADER, row)}
            self.assertEqual(v["Step"], rec["step"])
            self.assertEqual(v["Rank"], rec["rank"])
            self.assertEqual(v["Name"], rec["name"])
            self.assertEqual(v["Bench Name"], rec["bench_name"] or "N/A")
            self.assertEqual(v["Order"], rec["order"])
            self.assertEqual(v["Worst Output Cosine"], cell_text(rec["worst_cosine"]))
            self.assertEqual(v["Worst Output MaxAbsErr"], cell_text(rec["worst_max_abs"]))
            self.assertEqual(v["Accuracy Reached or Not"], VERDICT[rec["verdict"]])
            self.assertEqual(v["Error Origin"], CAUSE[rec["cause"]])
            self.assertEqual(v["Root Cause"], "ROOT CAUSE" if rec["is_root_cause"] else None)
            link = row[10].hyperlink
            self.assertIsNotNone(link, f"summary row {i + 2} has no link")
            target = rec["first_tensor"] + 2
            self.assertEqual(link.location, f"details!A{target}")
            self.assertTrue(d[f"A{target}"].value.startswith(rec["name"] + "."))
            want_fill = {0: None, 1: YELLOW, 2: RED}[rec["highlight"]]
            for c in row:
                self.assertEqual(fill_of(c), want_fill, f"summary {c.coordinate}")
                self.assertEqual(bool(c.font.b), bool(rec["is_root_cause"]),
                                 f"summary {c.coordinate}")
        self.check_details(d, spec, TENSOR_HEADER, TENSOR_FIELDS)

    def test_statistics_mode_uses_summary_columns(self):
        spec = stats_spec()
        out = self.write(spec, "stats")
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"))
        d = wb["details"]
        self.check_common_sheet(d, len(STATS_HEADER), 2)
        self.check_details(d, spec, STATS_HEADER, STATS_FIELDS)
        self.assertEqual(wb["summary"]["H2"].value, "Warning")

    def test_csv_holds_the_details_rows_rfc4180(self):
        spec = tensor_spec()
        out = self.write(spec, "csv")
        with open(os.path.join(out, "result.csv"), newline="") as f:
            raw = f.read()
        self.assertTrue(raw.startswith(",".join(TENSOR_HEADER) + "\r\n"))
        rows = list(csv.reader(raw.splitlines(keepends=True)))
        self.assertEqual(rows[0], TENSOR_HEADER)
        self.assertEqual(len(rows), 1 + len(spec["tensors"]))
        for ti, t in enumerate(spec["tensors"]):
            v = dict(zip(TENSOR_HEADER, rows[1 + ti]))
            self.assertEqual(v["NPU Name"], t["npu_name"])
            self.assertEqual(v["Bench Name"], t["bench_name"] or "N/A")
            self.assertEqual(v["Err_message"], t["err_message"])   # commas, quotes, newline
            for h, f in zip(TENSOR_HEADER[6:20], TENSOR_FIELDS + SIDE_FIELDS):
                want = t[f]
                if isinstance(want, str):
                    self.assertEqual(v[h], cell_text(want))
                else:
                    self.assertEqual(float(v[h]), want, f"{t['npu_name']} {h}")
        rec4 = spec["records"][4]
        self.assertEqual(rows[1 + rec4["first_tensor"]][-9:-7], ["1", "3"])  # Step, Rank

    def test_rows_past_a_full_sheet_continue_on_numbered_sheets(self):
        """With 4 data rows per sheet (Excel's 1,048,575 lowered for the test),
        5 records and 9 tensors spread over summary, summary_2 and details,
        details_2, details_3; every link points at the right sheet and row."""
        self.check_split(self.write_split("split"))

    def test_zip64_workbook_holds_the_same_rows(self):
        """Past the rows that need ZIP64 (1,000,000, lowered to 1 here) every
        entry carries ZIP64 sizes and offsets, the archive ends with the ZIP64
        end records, every CRC holds, and the sheets read as without it."""
        out = self.write_split("zip64", "1")
        path = os.path.join(out, "result.xlsx")
        with zipfile.ZipFile(path) as z:
            self.assertIsNone(z.testzip())
            infos = z.infolist()
            self.assertGreater(len(infos), 10)
            for info in infos:
                # the extra field's first header: ZIP64 (0x0001), 3 x 8 bytes
                self.assertEqual(struct.unpack("<HH", info.extra[:4]), (1, 24), info.filename)
        with open(path, "rb") as f:
            data = f.read()
        self.assertIn(b"PK\x06\x06", data[-200:])  # ZIP64 end of central directory
        self.assertIn(b"PK\x06\x07", data[-200:])  # and its locator
        self.check_split(out)

    def write_split(self, name, zip64_rows=None):
        per = 4
        path = os.path.join(self.tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(tensor_spec(), f)
        out = os.path.join(self.tmp, name)
        cmd = [DRIVER, "json", path, out, str(per)] + ([zip64_rows] if zip64_rows else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return out

    def check_split(self, out):
        spec = tensor_spec()
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"))
        self.assertEqual(wb.sheetnames, ["summary", "summary_2", "details", "details_2",
                                         "details_3", "error_flow", "error_flow_data"])
        details = []
        for name in ("details", "details_2", "details_3"):
            ws = wb[name]
            rows = list(ws.iter_rows(values_only=True))
            self.assertEqual(list(rows[0]), TENSOR_HEADER, name)
            self.check_common_sheet(ws, len(TENSOR_HEADER), len(rows) - 1)
            details += [(name, i + 2, row) for i, row in enumerate(rows[1:])]
        self.assertEqual([d[2][0] for d in details], [t["npu_name"] for t in spec["tensors"]])
        summary = []
        for name in ("summary", "summary_2"):
            ws = wb[name]
            self.assertEqual([c.value for c in ws[1]], SUMMARY_HEADER, name)
            self.check_common_sheet(ws, len(SUMMARY_HEADER), ws.max_row - 1)
            summary += list(ws.iter_rows(min_row=2))
        self.assertEqual([row[2].value for row in summary], [r["name"] for r in spec["records"]])
        for rec, row in zip(spec["records"], summary):
            sheet, rownum, _ = details[rec["first_tensor"]]
            self.assertEqual(row[10].hyperlink.location, f"{sheet}!A{rownum}", rec["name"])
            self.assertEqual(row[10].value, f"{sheet}!A{rownum}")
        self.assertEqual([len(list(wb[n].iter_rows())) - 1 for n in wb.sheetnames[:5]],
                         [4, 1, 4, 4, 1])

    def test_output_dir_that_is_a_file_is_an_error_naming_it(self):
        path = os.path.join(self.tmp, "spec.json")
        with open(path, "w") as f:
            json.dump(stats_spec(), f)
        blocker = os.path.join(self.tmp, "blocker")
        open(blocker, "w").close()
        r = subprocess.run([DRIVER, "json", path, os.path.join(blocker, "out")],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(blocker, r.stderr)

    def test_large_result_past_the_hyperlink_cap(self):
        """70,000 records (140,000 tensors): every summary row links to its details
        row; past Excel's 65,530 hyperlinks per sheet the link is a HYPERLINK formula."""
        n = 70000
        out = os.path.join(self.tmp, "large")
        r = subprocess.run([DRIVER, "generate", str(n), out], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        s = wb["summary"]
        self.assertEqual(s.max_row, n + 1)
        count = 0
        for i, row in enumerate(s.iter_rows(min_row=2, values_only=True)):
            count += 1
            name = f"Functional.op.{i}.forward"
            self.assertEqual(row[2], name)
            self.assertEqual(row[0], i // 1000)
            self.assertEqual(row[4], i % 1000)
            # libxlsxwriter writes numbers with 16 significant digits
            self.assertTrue(math.isclose(row[5], 1.0 - (2 * i + 2) * 1e-9, rel_tol=1e-15))
            self.assertEqual(row[7], "No" if i % 7 == 3 else "Yes")
            target = f"details!A{2 * i + 2}"
            if i < 65530:
                self.assertEqual(row[10], target)
            else:
                self.assertEqual(row[10], f'=HYPERLINK("#{target}","{target}")')
        self.assertEqual(count, n)
        self.assertEqual(wb["details"].max_row, 2 * n + 1)
        wb.close()
        # The hyperlink records themselves: exactly the first 65,530 rows.
        with zipfile.ZipFile(os.path.join(out, "result.xlsx")) as z:
            xml = z.read("xl/worksheets/sheet1.xml").decode()
        self.assertEqual(xml.count("<hyperlink "), 65530)
        self.assertIn('<hyperlink ref="K65531" location="details!A131060"', xml)
        # Far-down details rows, through the CSV (same rows, faster to read).
        with open(os.path.join(out, "result.csv"), newline="") as f:
            rows = list(csv.reader(f))
        self.assertEqual(len(rows), 2 * n + 1)
        j = 2 * n - 1
        self.assertEqual(rows[1 + j][0], f"Functional.op.{n - 1}.forward.output.0")
        self.assertEqual(float(rows[1 + j][8]), (j + 1) * 1e-6)
        self.assertEqual(float(rows[1 + j][6]), 1.0 - (j + 1) * 1e-9)  # CSV round-trips


if __name__ == "__main__":
    unittest.main(verbosity=2)
