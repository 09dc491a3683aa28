"""A keyword given on one side only is a changed argument, and replay uses
the bench side's value, defaulted or not.

Issue 38's first field case: the bench run calls F.gelu(h), the compare run
F.gelu(h, approximate="tanh"), fp32, Adam, both dumped under the real preload
shim. Replay used to fill the bench call's missing keyword from the compare
side, reproduced the tanh output, called the op "inherited" and compare said
"no introduced error found". The plant is real: the two GELUs differ here by
far more than float32 rounding (computed with torch below)."""
import os
import subprocess
import tempfile
import unittest

import openpyxl

import msp_shim

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("MSPROBE_BIN", "msprobe")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")


class DefaultedKeyword(unittest.TestCase):
    def dump(self, work, name, tanh):
        return msp_shim.dump(work, name, os.path.join(HERE, "defaulted_kwarg_train.py"),
                             {"GELU_TANH": "1" if tanh else "0"})

    @unittest.skipUnless(PRELOAD, "the shim is not built")
    def test_gelu_with_approximate_on_one_side_only_is_introduced(self):
        import torch
        h = torch.randn(1000, dtype=torch.float64)
        gap = float((torch.nn.functional.gelu(h) - torch.nn.functional.gelu(
            h, approximate="tanh")).norm() / torch.nn.functional.gelu(h).norm())
        self.assertGreater(gap, 1e-4)  # far above float32's 6e-8
        work = tempfile.mkdtemp(prefix="msp-defaulted-")
        b, c = self.dump(work, "gpu", False), self.dump(work, "npu", True)
        out = os.path.join(work, "out")
        p = subprocess.run([BIN, "compare", "-b", b, "-c", c, "-o", out], capture_output=True,
                           text=True, timeout=600)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        first = [l for l in p.stdout.splitlines() if l.startswith("first introduced error")]
        self.assertTrue(first, p.stdout)
        self.assertIn("step 0 rank 0 Functional.gelu.0.forward", first[0], p.stdout)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = list(wb["summary"].iter_rows(values_only=True))
        row = [dict(zip(rows[0], r)) for r in rows[1:]
               if r[rows[0].index("Name")] == "Functional.gelu.0.forward"][0]
        self.assertTrue((row["Replay"] or "").startswith("introduced"), row)
        # the bench call left it out: it ran with F.gelu's default, which the
        # dump's /defaults names (torch's own signature of F.gelu, read here)
        import inspect
        sig = inspect.signature(torch.overrides.get_testing_overrides()[torch.nn.functional.gelu])
        self.assertEqual(row["Changed Argument"], "kwarg.approximate: NPU 'tanh', bench %s (default)"
                         % repr(sig.parameters["approximate"].default), row)


if __name__ == "__main__":
    unittest.main()
