"""A statistics tree's workbook, whose rows are deflated on a thread of their
own once they fill a buffer (src/report/rep_sheet.c), after its pairs went
through the spool, written on a thread of its own (src/compare/cmp_spool.c):
every row lands in its column with the dump's own values, dtypes and shapes
(read back with openpyxl, checked against h5py; the repeating texts are
shared strings, each once in xl/sharedStrings.xml), and a disk that fills while the rows or
the spool are written is one clear error naming what and where, with no
workbook left half written and no hang (the preloaded full_disk helper
refuses every write to the temp files named)."""
import os
import re
import subprocess
import sys
import tempfile
import unittest
import zipfile

import h5py
import openpyxl

MSPROBE = os.environ.get("MSPROBE_BIN", "msprobe")
GEN = os.environ.get("MSPROBE_GEN") or os.path.join(
    os.environ.get("MSPROBE_BUILD_DIR", "build"), "bench", "compare", "msprobe-gen")
FULL_DISK = sys.argv.pop(1) if len(sys.argv) > 1 and sys.argv[1].endswith(".so") else ""


def stats_rows(path):
    """{record.role: (max, min, mean, norm, dtype, shape text)} of a compact
    statistics dump (msprobe-dump(5))."""
    with h5py.File(path, "r") as f:
        strs = bytes(f["strings"][...]).split(b"\0")  # string k is piece k (msprobe-dump(5))

        def s(k):
            return strs[k].decode()
        values = f["values"][...]
        out = {}
        for row in f["stats"][...]:
            v = values[row["values"]]
            shape = "[" + ", ".join(str(int(d)) for d in row["shape"][:row["ndim"]]) + "]"
            out[s(row["record"]) + "." + s(row["role"])] = (
                float(v["max"]), float(v["min"]), float(v["mean"]), float(v["norm"]),
                s(row["dtype"]), shape)
        return out


class ReportFullDisk(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="msp-full-disk-")
        # 2 ranks x 1,200 records: several MB of rows, far past one buffer
        subprocess.run([GEN, "--out", cls.work, "--steps", "1", "--ranks", "2", "--layers", "600",
                        "--numel", "64", "--task", "statistics", "--dtype", "bf16",
                        "--plant", "200", "--plant-rank", "1", "--magnitude", "0.3",
                        "--seed", "7"], check=True, stdout=subprocess.DEVNULL)
        cls.bench = os.path.join(cls.work, "bench")
        cls.npu = os.path.join(cls.work, "npu")

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["rm", "-rf", cls.work])

    def compare(self, out, env=None, reports=("--no-html",)):
        return subprocess.run([MSPROBE, "compare", "-b", self.bench, "-c", self.npu, "-o", out,
                               "--replay", "off", *reports], capture_output=True, text=True,
                              env=env, timeout=300)

    def test_every_row_in_its_column_with_the_dumps_values(self):
        out = os.path.join(self.work, "ok")
        r = self.compare(out)
        self.assertEqual(r.returncode, 1, r.stderr)  # the planted error fails records
        want = {}
        for rank in (0, 1):
            for key, v in stats_rows(os.path.join(self.npu, "step0", f"rank{rank}", "dump.h5")).items():
                want[(rank, key)] = v
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = wb["details"].iter_rows(values_only=True)
        head = list(next(rows))
        col = {name: head.index(name) for name in ("NPU Name", "Rank", "NPU max", "NPU min",
                                                    "NPU mean", "NPU l2norm", "NPU Dtype",
                                                    "NPU Tensor Shape", "Bench Dtype")}
        seen = 0
        for row in rows:
            key = (int(row[col["Rank"]]), row[col["NPU Name"]])
            self.assertIn(key, want)
            got = tuple(float(row[col[c]]) for c in ("NPU max", "NPU min", "NPU mean", "NPU l2norm"))
            got += (row[col["NPU Dtype"]], row[col["NPU Tensor Shape"]])
            self.assertEqual(got, want.pop(key), key)
            self.assertEqual(row[col["Bench Dtype"]], "torch.float32")  # msprobe-gen's bench side
            seen += 1
        wb.close()
        self.assertEqual(want, {})  # every tensor of both ranks has its row
        self.assertGreater(seen, 5000)
        # the repeating texts went to the shared strings table, once each
        with zipfile.ZipFile(os.path.join(out, "result.xlsx")) as z:
            sst = z.read("xl/sharedStrings.xml").decode()
            self.assertIn("sharedStrings", z.read("[Content_Types].xml").decode())
        items = re.findall(r"<si><t[^>]*>(.*?)</t></si>", sst)
        self.assertEqual(len(items), len(set(items)))
        self.assertIn("torch.bfloat16", items)
        self.assertIn("torch.float32", items)

    @unittest.skipUnless(FULL_DISK and os.path.exists(FULL_DISK), "no full_disk helper built")
    def test_a_full_disk_while_the_rows_deflate_is_one_clear_error(self):
        out = os.path.join(self.work, "full")
        env = dict(os.environ, LD_PRELOAD=FULL_DISK, FULL_DISK_PATHS=".msprobe-rows.")
        r = self.compare(out, env)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        book = os.path.join(out, "result.xlsx")
        self.assertIn(f"cannot write {book}: its rows' temp file in {out}: "
                      "No space left on device", r.stderr)
        self.assertEqual(r.stderr.count("No space left on device"), 1, r.stderr)
        self.assertEqual([n for n in os.listdir(out) if "xlsx" in n or n.startswith(".msprobe")], [])
        # beside result.csv and the page, which read the spool with it: the
        # workbook stops, they go on to their end, and nothing waits for it
        out = os.path.join(self.work, "full-all")
        r = self.compare(out, env, ("--csv",))
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(f"cannot write {os.path.join(out, 'result.xlsx')}: its rows' temp file",
                      r.stderr)
        self.assertEqual(r.stderr.count("No space left on device"), 1, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "result.xlsx")))

    @unittest.skipUnless(FULL_DISK and os.path.exists(FULL_DISK), "no full_disk helper built")
    def test_a_full_disk_under_the_spool_is_one_clear_error_before_any_report(self):
        out = os.path.join(self.work, "spool")
        spool = os.path.join(self.work, "tmp")
        os.makedirs(spool, exist_ok=True)
        env = dict(os.environ, LD_PRELOAD=FULL_DISK, FULL_DISK_PATHS=".msprobe-compare-spool.",
                   TMPDIR=spool)
        r = self.compare(out, env)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(f"compare: cannot write its temporary file in {spool}: "
                      "No space left on device", r.stderr)
        self.assertEqual(r.stderr.count("No space left on device"), 1, r.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "result.xlsx")))
        self.assertEqual(os.listdir(spool), [])  # the spool was unlinked from the start


if __name__ == "__main__":
    unittest.main()
