"""Arguments are compared after both sides are completed with the API's own
defaults (issue 38, item 1): the shim writes each API's signature once per
dump file (/defaults, msprobe-dump(5)), and compare names a positional
argument by its parameter and fills one a side left out with its default.

Real training under the real preload shim (defaults_spelling_train.py: a
small MLP with layer norm and AdamW, fp32, one thread). The bench run calls
F.gelu(h) and F.layer_norm(..., 1e-5) (eps by position); the compare run
F.gelu(h, approximate="none") and F.layer_norm(..., eps=1e-5): the same
calls, the same losses bit for bit. Before /defaults, compare listed both as
changed arguments ("kwarg.approximate: NPU 'none', bench <absent>")."""
import inspect
import json
import os
import subprocess
import tempfile
import unittest

import h5py
import openpyxl

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("MSPROBE_BIN", "msprobe")
PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")


def dump(work, spelling):
    root = os.path.join(work, spelling)
    cfg = root + ".json"
    with open(cfg, "w") as f:
        json.dump({"dump": {"common_dump_settings": {
            "dump_mode": "api", "dump_path": root, "dump_iter": "0", "task": "tensor"}}}, f)
    env = dict(os.environ, LD_PRELOAD=PRELOAD, MSPROBE_PATH=cfg, OMP_NUM_THREADS="1",
               SPELLING=spelling)
    p = subprocess.run([PYTHON, os.path.join(HERE, "defaults_spelling_train.py")], cwd=work,
                       env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise AssertionError(p.stderr[-2000:])
    return root, [l for l in p.stdout.splitlines() if l.startswith("step ")]


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def table(path, name):
    with h5py.File(path, "r") as f:
        return [tuple(text(r[c]) for c in ("record", "key", "value")) for r in f[name][()]]


def summary(out):
    wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
    rows = list(wb["summary"].iter_rows(values_only=True))
    return {r[rows[0].index("Name")]: dict(zip(rows[0], r)) for r in rows[1:]}


@unittest.skipUnless(PRELOAD, "the shim is not built")
class ArgumentsCompletedWithDefaults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="msp-defaults-")
        (cls.left, cls.left_loss), (cls.given, cls.given_loss) = (
            dump(cls.work, "left_out"), dump(cls.work, "given"))

    def h5(self, root):
        return os.path.join(root, "step0", "rank0", "dump.h5")

    def compare(self, bench, cmp, name):
        out = os.path.join(self.work, name)
        p = subprocess.run([BIN, "compare", "-b", bench, "-c", cmp, "-o", out],
                           capture_output=True, text=True, timeout=600)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        return p, summary(out)

    def test_the_dump_holds_each_apis_signature_once(self):
        import torch
        import torch.nn.functional as F
        rows = table(self.h5(self.given), "defaults")
        self.assertEqual(len(rows), len(set((r, k) for r, k, _ in rows)), rows)  # once a file
        # what torch itself says: F.gelu is a builtin (its stand-in lambda in
        # torch.overrides), F.layer_norm a Python function
        gelu = inspect.signature(torch.overrides.get_testing_overrides()[F.gelu]).parameters
        ln = inspect.signature(F.layer_norm).parameters
        self.assertIn(("Functional.gelu", "approximate", repr(gelu["approximate"].default)), rows)
        self.assertIn(("Functional.gelu", "approximate", "'none'"), rows)
        self.assertIn(("Functional.layer_norm", "eps", repr(ln["eps"].default)), rows)
        self.assertIn(("Functional.layer_norm", "eps", "1e-05"), rows)
        positional = {k: v for r, k, v in rows if r == "Functional.layer_norm" and k[0] == "#"}
        self.assertEqual([positional["#%d" % i] for i in range(len(positional))], list(ln))
        defaults = {k: v for r, k, v in rows if r == "Functional.layer_norm" and k[0] != "#"}
        self.assertEqual(defaults, {n: "None" if p.default is None else repr(p.default)
                                    for n, p in ln.items()
                                    if p.default is not inspect.Parameter.empty})
        # only APIs that have a record in this file
        with h5py.File(self.h5(self.given), "r") as f:
            recs = {text(r["record"]) for r in f["index"][()]}
        for api in {r for r, _, _ in rows}:
            self.assertTrue(any(n.startswith(api + ".") for n in recs), api)

    def test_the_same_call_spelled_two_ways_is_no_changed_argument(self):
        self.assertEqual(self.left_loss, self.given_loss)  # the very same computation
        # the two dumps do record the calls differently
        la = {(r, k): v for r, k, v in table(self.h5(self.left), "attrs")}
        ga = {(r, k): v for r, k, v in table(self.h5(self.given), "attrs")}
        self.assertEqual(la.get(("Functional.layer_norm.0.forward", "input.4")), "1e-05")
        self.assertEqual(ga.get(("Functional.layer_norm.0.forward", "kwarg.eps")), "1e-05")
        self.assertNotIn(("Functional.gelu.0.forward", "kwarg.approximate"), la)
        self.assertEqual(ga.get(("Functional.gelu.0.forward", "kwarg.approximate")), "'none'")
        for bench, cmp in ((self.left, self.given), (self.given, self.left)):
            with self.subTest(bench=os.path.basename(bench)):
                p, rows = self.compare(bench, cmp, "out-" + os.path.basename(bench))
                self.assertIn("no introduced error found", p.stdout)
                for name in ("Functional.gelu.0.forward", "Functional.layer_norm.0.forward"):
                    self.assertIn(name, rows)
                    self.assertFalse(rows[name]["Changed Argument"], rows[name])
                self.assertEqual([n for n, r in rows.items() if r["Changed Argument"]], [])

    def test_a_value_other_than_the_default_is_named_by_its_parameter(self):
        import torch
        import torch.nn.functional as F
        h = torch.randn(8, 32, dtype=torch.float64)
        gap = float((F.layer_norm(h, (32,), eps=1e-3) - F.layer_norm(h, (32,), eps=1e-5)).norm()
                    / F.layer_norm(h, (32,), eps=1e-5).norm())
        self.assertGreater(gap, 1e-4)  # far above float32's 6e-8
        wide, _ = dump(self.work, "wide_eps")
        p, rows = self.compare(self.left, wide, "out-wide")
        row = rows["Functional.layer_norm.0.forward"]
        # bench passed eps by position, the compare run by keyword: one argument
        self.assertEqual(row["Changed Argument"], "kwarg.eps: NPU 0.001, bench 1e-05")
        first = [l for l in p.stdout.splitlines() if l.startswith("first introduced error")]
        self.assertTrue(first, p.stdout)
        self.assertIn("Functional.layer_norm.0.forward", first[0], p.stdout)
        # replay ran the bench call's arguments (eps by position) on the compare inputs
        self.assertTrue((row["Replay"] or "").startswith("introduced"), row)


if __name__ == "__main__":
    unittest.main()
