"""msprobe 26's Result column (pass / warning / error, its checkers) beside
8.x's "Accuracy Reached or Not"; a changed non-tensor argument and a flipped
requires_grad fail the compare (exit 1) even when every value agrees; the
Data_name and NPU MD5 / BENCH MD5 columns. Hand-made dumps (h5py) for the
rules, real runs under the shim for the stride and requires_grad cases,
msprobe's own md5 dump for the CRC-32 checker."""
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zlib

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmp_h5 as H  # noqa: E402

from msp_msprobe import BIN, FIX, PRELOAD, PYTHON  # noqa: E402


def compare(b, c, out, *extra):
    p = subprocess.run([BIN, "compare", "-b", b, "-c", c, "-o", out, "--csv", *extra],
                       capture_output=True, text=True)
    with open(os.path.join(out, "result.csv"), newline="") as f:
        return p, {r["NPU Name"]: r for r in csv.DictReader(f)}


def set_attrs(path, rec_attrs=None, req_grad=None):
    """rec_attrs: {record: {key: value}}; req_grad: {(record, role): 0/1}."""
    with h5py.File(path, "a") as f:
        for rec, kv in (rec_attrs or {}).items():
            for k, v in kv.items():
                f[rec].attrs[k] = v
        for (rec, role), v in (req_grad or {}).items():
            f[rec][role].attrs["requires_grad"] = np.int8(v)


class ResultRules(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        g = np.random.default_rng(3)
        self.x = g.standard_normal((4, 6)).astype(np.float32)
        self.y = g.standard_normal((4, 6)).astype(np.float32)
        self.z = g.standard_normal((4, 6)).astype(np.float32)

    def tearDown(self):
        self.tmp.cleanup()

    def pair(self, bench, cmp):
        b, c = os.path.join(self.d, "b.h5"), os.path.join(self.d, "c.h5")
        H.write_dump(b, bench)
        H.write_dump(c, cmp)
        return b, c

    def test_each_checker_of_msprobe_26(self):
        x, y, z = self.x, self.y, self.z
        nan_y = y.copy()
        nan_y[0, 0] = np.nan
        bench = [("Functional.conv2d.0.forward", {"input.0": x, "output.0": y}),
                 ("Functional.linear.0.forward", {"input.0": x, "output.0": y}),
                 ("Functional.gelu.0.forward", {"input.0": x, "output.0": y}),
                 ("Functional.relu.0.forward", {"input.0": x, "output.0": y}),
                 ("Torch.mul.0.forward", {"input.0": x, "output.0": y}),
                 ("Tensor.to.0.forward", {"input.0": x, "output.0": y})]
        cmp = [("Functional.conv2d.0.forward", {"input.0": x, "output.0": y}),
               ("Functional.linear.0.forward", {"input.0": x, "output.0": y}),
               ("Functional.gelu.0.forward", {"input.0": x, "output.0": H.BF16(y)}),
               ("Functional.relu.0.forward", {"input.0": x, "output.0": nan_y}),
               ("Torch.mul.0.forward", {"input.0": x, "output.0": z}),
               ("Tensor.to.0.forward", {"input.0": x, "output.0": H.BF16(z)})]
        b, c = self.pair(bench, cmp)
        set_attrs(b, {"Functional.conv2d.0.forward": {"kwarg.stride": "(1, 1)", "input.3": "0"}})
        set_attrs(c, {"Functional.conv2d.0.forward": {"kwarg.stride": "(2, 2)", "input.3": "0"}},
                  {("Functional.linear.0.forward", "input.0"): 1})
        p, rows = compare(b, c, os.path.join(self.d, "o"))
        res = {k: v["Result"] for k, v in rows.items()}
        msg = {k: v["Err_message"] for k, v in rows.items()}
        want = {"Functional.conv2d.0.forward.input.0": "error",    # stride differs
                "Functional.conv2d.0.forward.output.0": "pass",
                "Functional.linear.0.forward.input.0": "error",    # requires_grad flipped
                "Functional.linear.0.forward.output.0": "pass",
                "Functional.gelu.0.forward.input.0": "pass",
                "Functional.gelu.0.forward.output.0": "error",     # dtype differs
                "Functional.relu.0.forward.input.0": "pass",
                "Functional.relu.0.forward.output.0": "error",     # NaN on the NPU side only
                "Torch.mul.0.forward.input.0": "pass",
                "Torch.mul.0.forward.output.0": "error",           # accuracy lost across the op
                "Tensor.to.0.forward.input.0": "pass",             # msprobe ignores "to"
                "Tensor.to.0.forward.output.0": "pass"}
        self.assertEqual(res, want)
        self.assertIn("error: The scalar parameters of NPU and Bench are inconsistent.",
                      msg["Functional.conv2d.0.forward.input.0"])
        self.assertIn("error: The Required_Grad of NPU and Bench are inconsistent",
                      msg["Functional.linear.0.forward.input.0"])
        self.assertIn("error: The dtype of NPU and Bench are inconsistent.",
                      msg["Functional.gelu.0.forward.output.0"])
        self.assertIn("error: There is nan/inf/-inf in the maximum or minimum value of NPU.",
                      msg["Functional.relu.0.forward.output.0"])
        # the two rules of the mul, from numpy: inputs agree to the bit, the
        # output's One Thousandth Err Ratio is < 0.1 and its cosine far below
        rel = np.abs(z.astype(np.float64) - y) / np.abs(y.astype(np.float64))
        self.assertLess(np.mean(rel < 0.001), 0.1)
        cos = float(np.dot(z.ravel(), y.ravel()) / np.linalg.norm(z) / np.linalg.norm(y))
        self.assertLess(cos, 0.9)
        self.assertIn("error: The input/parameters of One Thousandth Err Ratio > 0.9 while the "
                      "output < 0.6.", msg["Torch.mul.0.forward.output.0"])
        self.assertIn("warning: The input/parameters of Cosine > 0.9, and input/parameters - "
                      "output > 0.1", msg["Torch.mul.0.forward.output.0"])
        # verdicts stay 8.x's: the conv and linear agree to the bit
        for name in ("Functional.conv2d.0.forward.output.0", "Functional.linear.0.forward.input.0"):
            self.assertEqual(rows[name]["Accuracy Reached or Not"], "Yes")
        import openpyxl
        wb = openpyxl.load_workbook(os.path.join(self.d, "o", "result.xlsx"), read_only=True)
        summ = list(wb["summary"].iter_rows(values_only=True))
        head = summ[0]
        by = {r[head.index("Name")]: r[head.index("Result")] for r in summ[1:]}
        self.assertEqual(by, {"Functional.conv2d.0.forward": "error",
                              "Functional.linear.0.forward": "error",
                              "Functional.gelu.0.forward": "error",
                              "Functional.relu.0.forward": "error",
                              "Torch.mul.0.forward": "error", "Tensor.to.0.forward": "pass"})

    def test_changed_argument_or_requires_grad_fails_the_compare(self):
        recs = [("Functional.conv2d.0.forward", {"input.0": self.x, "output.0": self.y})]
        for attrs, rg in (({"kwarg.stride": ("1", "2")}, None),
                          ({}, {("Functional.conv2d.0.forward", "output.0"): 1})):
            with self.subTest(attrs=attrs, rg=rg):
                b, c = self.pair(recs, recs)
                p, _ = compare(b, c, os.path.join(self.d, "o"))
                self.assertEqual(p.returncode, 0, p.stdout)
                set_attrs(b, {r: {k: v[0]} for r, kv in [("Functional.conv2d.0.forward", attrs)]
                              for k, v in kv.items()} if attrs else None)
                set_attrs(c, {r: {k: v[1]} for r, kv in [("Functional.conv2d.0.forward", attrs)]
                              for k, v in kv.items()} if attrs else None, rg)
                p, rows = compare(b, c, os.path.join(self.d, "o"))
                self.assertEqual(p.returncode, 1, p.stdout)
                self.assertIn("failing records 1", p.stdout)
                self.assertEqual({r["Accuracy Reached or Not"] for r in rows.values()}, {"Yes"})
        # the same value written two ways is the same argument; msprobe checks
        # Python scalars only: a dtype (bf16 against fp32) is not a finding
        b, c = self.pair(recs, recs)
        set_attrs(b, {"Functional.conv2d.0.forward": {
            "kwarg.eps": "1e-05", "kwarg.flag": "True", "kwarg.size": "(2, 2)",
            "kwarg.dtype": "torch.float32", "input.2": "None"}})
        set_attrs(c, {"Functional.conv2d.0.forward": {
            "kwarg.eps": "0.00001", "kwarg.flag": "true", "kwarg.size": "[2, 2]",
            "kwarg.dtype": "torch.bfloat16", "input.2": "cpu"}})
        p, rows = compare(b, c, os.path.join(self.d, "o"))
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertEqual({r["Result"] for r in rows.values()}, {"pass"})
        # an exempt API (Tensor.to: msprobe skips it) does not fail either
        to = [("Tensor.to.0.forward", {"input.0": self.x, "output.0": self.y})]
        b, c = self.pair(to, to)
        set_attrs(b, {"Tensor.to.0.forward": {"input.1": "2"}},
                  {("Tensor.to.0.forward", "output.0"): 1})
        set_attrs(c, {"Tensor.to.0.forward": {"input.1": "3"}})
        p, rows = compare(b, c, os.path.join(self.d, "o"))
        self.assertEqual(p.returncode, 0, p.stdout)

    def test_data_name_and_md5_columns(self):
        b, c = self.pair([("Torch.mul.0.forward", {"input.0": self.x, "output.0": self.y})],
                         [("Torch.mul.0.forward", {"input.0": self.x, "output.0": self.z})])
        _, rows = compare(b, c, os.path.join(self.d, "o"))
        r = rows["Torch.mul.0.forward.output.0"]
        self.assertEqual(r["Data_name"], "['/Torch.mul.0.forward/output.0', "
                                         "'/Torch.mul.0.forward/output.0']")
        self.assertEqual(r["NPU MD5"], "%08x" % zlib.crc32(self.z.tobytes()))
        self.assertEqual(r["BENCH MD5"], "%08x" % zlib.crc32(self.y.tobytes()))
        # msprobe's own dumps: the .pt files dump.json names
        _, rows = compare(os.path.join(FIX, "v833"), os.path.join(FIX, "v26"),
                          os.path.join(self.d, "m"))
        (js,) = glob.glob(os.path.join(FIX, "v26", "step0", "*", "dump.json"))
        with open(js) as f:
            want = json.load(f)["data"]["Functional.relu.0.forward"]["input_args"][0]["data_name"]
        self.assertEqual(rows["Functional.relu.0.forward.input.0"]["Data_name"],
                         "['%s', '%s']" % (want, want))

    def test_md5_dumps_crc32_checker(self):
        src = os.path.dirname(glob.glob(os.path.join(FIX, "v26_md5", "step0", "*", "dump.json"))[0])
        other = os.path.join(self.d, "m")
        shutil.copytree(src, other)
        with open(os.path.join(other, "dump.json")) as f:
            js = json.load(f)
        ent = js["data"]["Functional.relu.0.forward"]["output"][0]
        ent["md5"] = "%08x" % (int(ent["md5"], 16) ^ 1)
        del js["data"]["Functional.gelu.0.forward"]
        with open(os.path.join(other, "dump.json"), "w") as f:
            json.dump(js, f)
        p, rows = compare(src, other, os.path.join(self.d, "o"))
        self.assertEqual(p.returncode, 1)
        with open(os.path.join(self.d, "o", "result.csv"), newline="") as f:
            every = list(csv.DictReader(f))
        bad = {(r["NPU Name"], r["Bench Name"]): r["Result"] for r in every
               if r["Result"] != "pass"}
        # the relu's changed CRC-32 is an error; the bench-only gelu rows (no
        # NPU side) get msprobe's "does not match" warning
        self.assertEqual(bad, {("Functional.relu.0.forward.output.0",
                                "Functional.relu.0.forward.output.0"): "error",
                               ("N/A", "Functional.gelu.0.forward.input.0"): "warning",
                               ("N/A", "Functional.gelu.0.forward.output.0"): "warning"})
        self.assertEqual(rows["Functional.relu.0.forward.output.0"]["NPU MD5"], ent["md5"])
        # the other way round: NPU-only rows, the same warning
        p, rows = compare(other, src, os.path.join(self.d, "o"))
        gelu = [v for k, v in rows.items() if k.startswith("Functional.gelu.0.forward")]
        self.assertEqual(len(gelu), 2)
        self.assertEqual({v["Result"] for v in gelu}, {"warning"})


@unittest.skipUnless(PRELOAD and os.path.exists(PRELOAD), "MSPROBE_PRELOAD_LIB not set (ctest)")
class UnderTheShim(unittest.TestCase):
    """A 1x1 max pool on a 1x1 image gives the same output whatever its
    stride, and a requires_grad flipped on an input changes no value: both
    runs agree on every tensor, yet did not do the same thing."""

    SCRIPT = r'''
import sys, torch, torch.nn.functional as F
torch.manual_seed(0)
x = torch.randn(2, 3, 1, 1)
if sys.argv[2] == "grad":
    x.requires_grad_()
y = F.max_pool2d(x, 1, stride=int(sys.argv[1]))
print("out %s" % y.detach().numpy().tobytes().hex())
'''

    def run_one(self, d, name, *args):
        with open(os.path.join(d, "t.py"), "w") as f:
            f.write(self.SCRIPT)
        cfg = os.path.join(d, name + ".json")
        with open(cfg, "w") as f:
            json.dump({"task": "tensor", "dump_path": os.path.join(d, name), "step": [0],
                       "level": "L1", "tensor": {"data_mode": ["forward"]}}, f)
        env = dict(os.environ, LD_PRELOAD=PRELOAD, MSPROBE_PATH=cfg)
        p = subprocess.run([PYTHON, os.path.join(d, "t.py"), *args], env=env, cwd=d,
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        return os.path.join(d, name), p.stdout

    def test_stride_and_requires_grad(self):
        with tempfile.TemporaryDirectory() as d:
            base, out0 = self.run_one(d, "base", "1", "")
            for name, args, msg in (("stride", ("2", ""), "The scalar parameters"),
                                    ("grad", ("1", "grad"), "The Required_Grad")):
                with self.subTest(name=name):
                    other, out1 = self.run_one(d, name, *args)
                    self.assertEqual(out0, out1)  # the same values
                    p, rows = compare(base, other, os.path.join(d, "o"), "-l", "api")
                    self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
                    fwd = {k: v for k, v in rows.items() if ".forward." in k}
                    self.assertEqual({v["Accuracy Reached or Not"] for v in fwd.values()}, {"Yes"})
                    self.assertTrue([v for v in fwd.values()
                                     if v["Result"] == "error" and msg in v["Err_message"]])


if __name__ == "__main__":
    unittest.main()
