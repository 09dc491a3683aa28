"""msprobe compare end to end: dumps written with h5py (msp_dumpmaker), the
report read back with openpyxl and csv, every value checked against a numpy
re-computation of the rules in msprobe-compare(1):

  metrics     float64 over the whole tensor, NaN/Inf in the same places zeroed
  verdict     No if (cos < 0.99 and maxabs > 0.001) or cos < 0.9 or maxabs > 1
  agree       |n-b| <= atol + rtol*|b| everywhere (fp32: 1e-5, 1.3e-6)
  cause       error-origin model: rel err = ||n-b||/||b||; an output error above
              the float32 floor (8 * 2^-24 + 1e-5) is introduced when it is
              > 8x the worst input's, else inherited; suspects rank by step,
              forward before backward, then output err / max(8 * input err, floor)
  highlight   output rows: red if the compare side has NaN/Inf or error > 1e10,
              or every input is Yes and the output is not; yellow if the error
              is >= 10x the largest input error, or cosine fell by > 0.1
"""
import csv
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import openpyxl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# tests/lib is on PYTHONPATH under ctest; this keeps a run by hand working too
sys.path.append(os.path.join(HERE, os.pardir, "lib"))
import msp_dumpmaker  # noqa: E402
from msp_report_layout import RED, STATS_HEADER, SUMMARY_HEADER, YELLOW  # noqa: E402
from msp_report_layout import TENSOR_HEADER as DETAILS_HEADER  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
SRC = os.environ.get("MSPROBE_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))


# ---- reference implementation (numpy) -----------------------------------

def metrics(n, b):
    # msprobe 26 adds the eps of result_type(n, b, float32) at bench zeros
    small = ("float16", "float32")
    eps_zero = (np.finfo(np.float32).eps if np.asarray(n).dtype.name in small and
                np.asarray(b).dtype.name in small else np.finfo(np.float64).eps)
    n = np.asarray(n, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    bad_n, bad_b = ~np.isfinite(n), ~np.isfinite(b)   # same places in these chains
    n = np.where(bad_n, 0.0, n)
    b = np.where(bad_b, 0.0, b)
    nn, nb = np.linalg.norm(n), np.linalg.norm(b)
    if nn == 0 and nb == 0:
        cos = 1.0
    elif nn == 0 or nb == 0:
        cos = float("nan")
    else:
        cos = float(np.dot(n, b) / (nn * nb))
    d = np.abs(n - b)
    z = np.where(b == 0, eps_zero, 0.0)
    rel = np.abs((n + z) - (b + z)) / (np.abs(b) + z)
    return {"Cosine": cos, "EucDist": float(np.linalg.norm(n - b)),
            "MaxAbsErr": float(d.max()), "MaxRelativeErr": float(rel.max()),
            "One Thousandth Err Ratio": float((rel < 0.001).mean()),
            "Five Thousandths Err Ratio": float((rel < 0.005).mean())}


def agrees(n, b, rtol=1.3e-6, atol=1e-5):
    n = np.asarray(n, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if not (np.isnan(n) == np.isnan(b)).all():
        return False
    fin = np.isfinite(b)
    if not (n[~fin] == b[~fin]).all() and not np.isnan(b[~fin]).all():
        return False
    return bool((np.abs(n[fin] - b[fin]) <= atol + rtol * np.abs(b[fin])).all())


def rel_err(n, b):
    n = np.asarray(n, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    n = np.where(np.isfinite(n), n, 0.0)
    b = np.where(np.isfinite(b), b, 0.0)
    d, nb = np.linalg.norm(n - b), np.linalg.norm(b)
    return d / nb if nb > 0 else (math.inf if d > 0 else 0.0)


FLOOR32 = 8 * 2.0 ** -24 + 1e-5


def verdict(m):
    cos, mx = m["Cosine"], m["MaxAbsErr"]
    if math.isnan(cos) or math.isnan(mx):
        return "No"
    return "No" if (cos < 0.99 and mx > 0.001) or cos < 0.9 or mx > 1 else "Yes"


def expected(planted=True):
    """Per record, in execution order: rows of (role, n, b, metrics, verdict, agree)."""
    bench = {name: (order, t) for name, order, t in msp_dumpmaker.chain(False)}
    cmp_ = {name: (order, t) for name, order, t in msp_dumpmaker.chain(planted)}
    out = []
    for name in sorted(bench, key=lambda k: bench[k][0]):
        order, bt = bench[name]
        ct = cmp_[name][1]
        roles = sorted(bt, key=lambda r: (not r.startswith("input"), r))
        rows = []
        for role in roles:
            m = metrics(ct[role], bt[role])
            rows.append({"role": role, "n": ct[role], "b": bt[role], "m": m,
                         "verdict": verdict(m), "agree": agrees(ct[role], bt[role]),
                         "out": role.startswith("output")})
        ins = [r for r in rows if not r["out"]]
        outs = [r for r in rows if r["out"]]
        cause, score = None, 0.0
        e_in = max(rel_err(r["n"], r["b"]) for r in ins)
        e_out = max(rel_err(r["n"], r["b"]) for r in outs)
        if e_out > FLOOR32:
            base = max(8 * e_in, FLOOR32)
            cause = "introduced" if e_out > base else "inherited"
            score = e_out / base
        in_err = max(r["m"]["MaxAbsErr"] for r in ins)
        in_cos = min(r["m"]["Cosine"] for r in ins)
        for r in rows:
            r["hl"] = None
            if not r["out"]:
                continue
            err = r["m"]["MaxAbsErr"]
            nd = np.asarray(r["n"], dtype=np.float64)
            if not np.isfinite(nd).all() or err > 1e10:
                r["hl"] = RED
            elif all(i["verdict"] == "Yes" for i in ins) and r["verdict"] != "Yes":
                r["hl"] = RED
            elif err > 0 and err >= 10 * in_err:
                r["hl"] = YELLOW
            elif r["m"]["Cosine"] < in_cos - 0.1:
                r["hl"] = YELLOW
        hls = [r["hl"] for r in rows]
        rec_hl = RED if RED in hls else YELLOW if YELLOW in hls else None
        out.append({"name": name, "order": order, "rows": rows, "cause": cause,
                    "verdict": "No" if any(r["verdict"] == "No" for r in rows) else "Yes",
                    "hl": rec_hl, "score": score,
                    "backward": not name.endswith(".forward"),
                    "worst_cos": min(r["m"]["Cosine"] for r in outs),
                    "worst_abs": max(r["m"]["MaxAbsErr"] for r in outs)})
    sus = sorted((i for i, r in enumerate(out) if r["cause"] == "introduced"),
                 key=lambda i: (out[i]["backward"], -out[i]["score"], out[i]["order"]))
    for k, i in enumerate(sus):
        out[i]["mark"] = "ROOT CAUSE" if k == 0 else "suspect %d" % (k + 1)
    root = sus[0] if sus else None
    return out, root


def close(a, b):
    if isinstance(b, float) and math.isnan(b):
        return a == "N/A"
    return isinstance(a, (int, float)) and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def fill_of(cell):
    f = cell.fill
    return f.fgColor.rgb if f is not None and f.fill_type == "solid" else None


class CompareReport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="msp_cmp_report_")
        msp_dumpmaker.make_pair(os.path.join(cls.tmp, "planted"), planted=True)
        cls.out = os.path.join(cls.tmp, "out")
        cls.proc = subprocess.run([BIN, "compare", "-b", os.path.join(cls.tmp, "planted", "bench"),
                                  "-c", os.path.join(cls.tmp, "planted", "cmp"),
                                  "-o", cls.out, "--csv"], capture_output=True, text=True)
        cls.exp, cls.root = expected()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.assertEqual(self.proc.returncode, 1, self.proc.stderr)
        self.wb = openpyxl.load_workbook(os.path.join(self.out, "result.xlsx"))

    def test_planted_op_is_the_root_cause(self):
        self.assertEqual(self.exp[self.root]["name"], msp_dumpmaker.RELU_ROOT)
        r = self.exp[self.root]["rows"][-1]
        line = (f"first introduced error: step 0 rank 0 {msp_dumpmaker.RELU_ROOT} output.0 "
                f"(cosine {r['m']['Cosine']:.6f}, max abs err {r['m']['MaxAbsErr']:.6g})")
        self.assertIn(line + "\n", self.proc.stdout)

    def test_totals_count_records_and_their_rate(self):
        # records: one per record the dump maker planted; the rate is that
        # count over the seconds printed (rounded to 1 ms, hence the bounds)
        n = len(self.exp)
        self.assertIn(f"records {n},", self.proc.stdout)
        line = [ln for ln in self.proc.stdout.splitlines() if ln.startswith("compared ")][0]
        secs = float(line.split(" in ")[1].split(" s ")[0])
        rate = float(line.rsplit(", ", 1)[1].split(" records/s)")[0])
        lo = n / (secs + 0.0005)
        hi = n / (secs - 0.0005) if secs > 0.0005 else math.inf
        self.assertTrue(lo - 1 <= rate <= hi + 1, (line, n, lo, hi))

    def test_sheets_headers_frozen_pane_and_filters(self):
        self.assertEqual(self.wb.sheetnames, ["summary", "details", "error_flow", "error_flow_data"])
        s, d = self.wb["summary"], self.wb["details"]
        self.assertEqual([c.value for c in s[1]], SUMMARY_HEADER)
        self.assertEqual([c.value for c in d[1]], DETAILS_HEADER)
        n_tensors = sum(len(r["rows"]) for r in self.exp)
        self.assertEqual(s.max_row, 1 + len(self.exp))
        self.assertEqual(d.max_row, 1 + n_tensors)
        for ws, cols, rows in ((s, "Q", len(self.exp)), (d, "AG", n_tensors)):
            self.assertEqual(ws.freeze_panes, "A2")
            self.assertEqual(ws.auto_filter.ref, f"A1:{cols}{rows + 1}")

    def test_summary_rows_verdicts_causes_and_links(self):
        s, d = self.wb["summary"], self.wb["details"]
        row_of = 2
        for i, rec in enumerate(self.exp):
            row = s[i + 2]
            v = {h: c.value for h, c in zip(SUMMARY_HEADER, row)}
            self.assertEqual((v["Step"], v["Rank"], v["Name"], v["Bench Name"], v["Order"]),
                             (0, 0, rec["name"], rec["name"], rec["order"]))
            self.assertTrue(close(v["Worst Output Cosine"], rec["worst_cos"]), rec["name"])
            self.assertTrue(close(v["Worst Output MaxAbsErr"], rec["worst_abs"]), rec["name"])
            self.assertEqual(v["Accuracy Reached or Not"], rec["verdict"], rec["name"])
            self.assertEqual(v["Error Origin"], rec["cause"], rec["name"])
            self.assertEqual(v["Root Cause"], rec.get("mark"))
            self.assertEqual(row[10].hyperlink.location, f"details!A{row_of}")
            self.assertEqual(d[f"A{row_of}"].value, f"{rec['name']}.{rec['rows'][0]['role']}")
            for c in row:
                self.assertEqual(fill_of(c), rec["hl"], f"{rec['name']} {c.coordinate}")
                self.assertEqual(bool(c.font.b), i == self.root, f"{rec['name']} {c.coordinate}")
            row_of += len(rec["rows"])
        # The chain as planted: relu introduces, mul inherits, add amplifies its
        # input error 50x (introduced, second suspect), the rest agree.
        causes = {r["name"]: r["cause"] for r in self.exp}
        self.assertEqual(causes, {"Functional.linear.0.forward": None,
                                  "Functional.relu.0.forward": "introduced",
                                  "Tensor.mul.0.forward": "inherited",
                                  "Tensor.add.0.forward": "introduced",
                                  "Functional.softmax.0.forward": None,
                                  "Functional.relu.0.backward": None})
        # Every highlight rule fires at least once in this chain.
        hls = {r["name"]: r["hl"] for r in self.exp}
        self.assertEqual(hls["Functional.relu.0.forward"], RED)       # accuracy lost
        self.assertEqual(hls["Functional.softmax.0.forward"], RED)    # NaN
        self.assertEqual(hls["Tensor.add.0.forward"], YELLOW)         # error amplified

    def test_details_rows_match_numpy(self):
        d = self.wb["details"]
        r = 2
        for rec in self.exp:
            for t in rec["rows"]:
                row = d[r]
                v = {h: c.value for h, c in zip(DETAILS_HEADER, row)}
                name = f"{rec['name']}.{t['role']}"
                self.assertEqual(v["NPU Name"], name)
                self.assertEqual(v["Bench Name"], name)
                self.assertEqual(v["NPU Dtype"], "torch.float32")
                self.assertEqual(v["NPU Tensor Shape"], str(list(t["n"].shape)))
                self.assertEqual(v["Bench Tensor Shape"], str(list(t["b"].shape)))
                for k, want in t["m"].items():
                    self.assertTrue(close(v[k], want), f"{name} {k}: {v[k]} != {want}")
                for side, arr in (("NPU", t["n"]), ("Bench", t["b"])):
                    mx, mn, mean, norm = msp_dumpmaker.stats(arr)
                    for k, want in (("max", mx), ("min", mn), ("mean", mean), ("l2norm", norm)):
                        self.assertTrue(close(v[f"{side} {k}"], want), f"{name} {side} {k}")
                self.assertEqual(v["Accuracy Reached or Not"], t["verdict"], name)
                self.assertEqual(v["Error Origin"], rec["cause"], name)
                self.assertEqual((v["Step"], v["Rank"]), (0, 0))
                for c in row:
                    self.assertEqual(fill_of(c), t["hl"], f"{name} {c.coordinate}")
                root_row = (rec is self.exp[self.root] and t["out"] and not t["agree"])
                self.assertEqual(bool(row[0].font.b), root_row, name)
                r += 1

    def test_csv_has_the_details_rows(self):
        with open(os.path.join(self.out, "result.csv"), newline="") as f:
            rows = list(csv.reader(f))
        self.assertEqual(rows[0], DETAILS_HEADER)
        flat = [(rec, t) for rec in self.exp for t in rec["rows"]]
        self.assertEqual(len(rows), 1 + len(flat))
        for row, (rec, t) in zip(rows[1:], flat):
            v = dict(zip(DETAILS_HEADER, row))
            self.assertEqual(v["NPU Name"], f"{rec['name']}.{t['role']}")
            for k, want in t["m"].items():
                got = v[k] if v[k] == "N/A" else float(v[k])
                self.assertTrue(close(got, want), f"{v['NPU Name']} {k}")
            self.assertEqual(v["Accuracy Reached or Not"], t["verdict"])
            self.assertEqual(v["Error Origin"], rec["cause"] or "")


class StatisticsReport(unittest.TestCase):
    """task=statistics dumps (null dataspaces): msprobe's summary-mode columns,
    npu - bench of the four statistics and |diff| / max(|npu|, |bench|), equal
    non-finite statistics counting as no difference; Warning when a relative
    difference passes --stats-warn (0.4 here: the planted +2 gives 0.446)."""

    def test_statistics_columns_values_and_warning(self):
        tmp = tempfile.mkdtemp(prefix="msp_cmp_stats_")
        self.addCleanup(shutil.rmtree, tmp, True)
        msp_dumpmaker.make_pair(tmp, planted=True, task="statistics")
        out = os.path.join(tmp, "out")
        r = subprocess.run([BIN, "compare", "-b", os.path.join(tmp, "bench"),
                            "-c", os.path.join(tmp, "cmp"), "-o", out, "--stats-warn", "0.4"],
                           capture_output=True, text=True)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"))
        d = wb["details"]
        self.assertEqual([c.value for c in d[1]], STATS_HEADER)
        bench = {n: t for n, _, t in msp_dumpmaker.chain(False)}
        cmp_ = {n: t for n, _, t in msp_dumpmaker.chain(True)}
        warned = set()
        rows = list(d.iter_rows(min_row=2, values_only=True))
        self.assertEqual(len(rows), sum(len(t) for t in bench.values()))
        for row in rows:
            v = dict(zip(STATS_HEADER, row))
            rec, role = v["NPU Name"].rsplit(".", 2)[0], ".".join(v["NPU Name"].rsplit(".", 2)[1:])
            ns = msp_dumpmaker.stats(cmp_[rec][role])
            bs = msp_dumpmaker.stats(bench[rec][role])
            worst = 0.0
            for i, k in enumerate(("Max", "Min", "Mean", "L2norm")):
                if math.isnan(ns[i]) and math.isnan(bs[i]):
                    want, rel, pct = 0.0, 0.0, "0%"
                else:
                    want = ns[i] - bs[i]
                    big = max(abs(ns[i]), abs(bs[i]))
                    rel = abs(want) / (big + 1e-10)   # msprobe 26's warning measure
                    # msprobe 26's *RelativeErr: |diff / bench| x 100 as "x%"
                    pct = "N/A" if bs[i] == 0 else abs(want / bs[i]) * 100
                rel_col = {"L2norm": "NormRelativeErr"}.get(k, f"{k}RelativeErr")
                self.assertTrue(close(v[f"{k} diff"], want), f"{v['NPU Name']} {k} diff")
                if isinstance(pct, str):
                    self.assertEqual(v[rel_col], pct, f"{v['NPU Name']} {rel_col}")
                else:
                    self.assertTrue(v[rel_col].endswith("%"), v[rel_col])
                    self.assertTrue(close(float(v[rel_col][:-1]), pct), f"{v['NPU Name']} {rel_col}")
                worst = max(worst, rel)
            want_v = "Warning" if worst > 0.4 else "Yes"
            self.assertEqual(v["Accuracy Reached or Not"], want_v, v["NPU Name"])
            if want_v == "Warning":
                warned.add(rec)
        self.assertEqual(warned, {"Functional.relu.0.forward", "Tensor.mul.0.forward"})
        summary = {row[2]: row[7] for row in wb["summary"].iter_rows(min_row=2, values_only=True)}
        self.assertEqual({k for k, v in summary.items() if v == "Warning"}, warned)
        self.assertEqual(r.returncode, 1, r.stderr)   # a Warning fails the run


@unittest.skipUnless(os.path.isdir(os.path.join(SRC, "fixtures", "bench")) and
                     os.path.isdir(os.path.join(SRC, "fixtures", "npu")),
                     "fixtures/bench and fixtures/npu not committed")
class Fixtures(unittest.TestCase):
    """The committed fixture dumps (fixtures/README.md): in step 1 the npu side's
    Tensor.mul.0.forward introduced the error; Functional.gelu.0, Functional.linear.1
    and Torch.mul.1 (forward, step 1) inherit it; nothing else has an origin."""

    ROOT = (1, 0, "Tensor.mul.0.forward")
    INHERITED = {(1, 0, "Functional.gelu.0.forward"), (1, 0, "Functional.linear.1.forward"),
                 (1, 0, "Torch.mul.1.forward")}

    def test_fixture_root_cause_and_inheritors_are_marked(self):
        tmp = tempfile.mkdtemp(prefix="msp_cmp_fix_")
        self.addCleanup(shutil.rmtree, tmp, True)
        r = subprocess.run([BIN, "compare", "-b", os.path.join(SRC, "fixtures", "bench"),
                            "-c", os.path.join(SRC, "fixtures", "npu"), "-o", tmp],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        step, rank, name = self.ROOT
        self.assertIn(f"\nfirst introduced error: step {step} rank {rank} {name} output.0 (",
                      r.stdout)
        s = openpyxl.load_workbook(os.path.join(tmp, "result.xlsx"))["summary"]
        rows = list(s.iter_rows(min_row=2, values_only=True))
        self.assertEqual(len(rows), 24)   # 2 steps x (6 forward + 6 backward)
        origin = {(row[0], row[1], row[2]): row[8] for row in rows}
        marked = [(row[0], row[1], row[2]) for row in rows if row[9] == "ROOT CAUSE"]
        self.assertEqual(marked, [self.ROOT])
        self.assertEqual({k for k, v in origin.items() if v == "introduced"}, {self.ROOT})
        self.assertEqual({k for k, v in origin.items() if v == "inherited"}, self.INHERITED)
        failing = {(row[0], row[1], row[2]) for row in rows if row[7] != "Yes"}
        self.assertEqual(failing, {self.ROOT} | self.INHERITED)


if __name__ == "__main__":
    unittest.main(verbosity=2)
