"""An overloaded builtin's arguments are named by the overload's own schema.

torch's stand-in signatures (torch.overrides.get_testing_overrides) show one
overload of several and few defaults: torch.max's is (input, out=None), so
torch.max(y, 1) on one side and torch.max(y, dim=1) on the other read as
"kwarg.out: 1 against kwarg.dim: 1", and torch.sum's and torch.add's lack
keepdim=False and alpha=1, so passing them explicitly read as a changed
argument. The shim now checks a stand-in against the ATen schemas of the op
of that name (msprobe-dump(5), THE DEFAULTS TABLE). The same training step is
dumped under the preload shim three ways: positional, keyword (with the
defaults spelled out), and keyword with torch.add's alpha really changed; the
Changed Argument column of result.xlsx (read with openpyxl) must be empty for
the first pair and name alpha, by hand-known values, for the second."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import openpyxl

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
TRAIN = """
import sys, torch
torch.manual_seed(0)
lin = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
x = torch.randn(8, 16)
for step in range(2):
    y = lin(x)
    if sys.argv[1] == "position":
        m, i = torch.max(y, 1)
        s = torch.sum(y, 1)
        z = torch.add(m, s)
        t = y.max(1, True)[0]
    else:
        alpha = 2 if sys.argv[1] == "alpha" else 1
        m, i = torch.max(y, dim=1)
        s = torch.sum(y, dim=1, keepdim=False)
        z = torch.add(m, s, alpha=alpha)
        t = y.max(dim=1, keepdim=True)[0]
    loss = z.square().mean() + t.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
CALLS = ("Torch.max.0.forward", "Torch.sum.0.forward", "Torch.add.0.forward",
         "Tensor.max.0.forward")


@unittest.skipUnless(PRELOAD, "the shim is not built")
class OverloadSignature(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="msp-overload-")
        script = os.path.join(cls.work, "train.py")
        with open(script, "w") as f:
            f.write(TRAIN)
        cls.roots = {}
        for how in ("position", "keyword", "alpha"):
            root = os.path.join(cls.work, how)
            cfg = root + ".json"
            with open(cfg, "w") as f:
                json.dump({"dump": {"common_dump_settings": {
                    "dump_mode": "api", "dump_path": root, "dump_iter": "all",
                    "task": "tensor"}}}, f)
            env = dict(os.environ, LD_PRELOAD=PRELOAD, MSPROBE_PATH=cfg, OMP_NUM_THREADS="1")
            env.pop("MSPROBE_LOG_FILE", None)
            p = subprocess.run([PYTHON, script, how], cwd=cls.work, env=env,
                               capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                raise AssertionError(p.stderr[-3000:])
            cls.roots[how] = root

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def changed(self, b, c):
        """{(step, record): Changed Argument} of the summary sheet."""
        out = os.path.join(self.work, "out-%s-%s" % (b, c))
        p = subprocess.run([BIN, "compare", "-b", self.roots[b], "-c", self.roots[c], "-o", out],
                           capture_output=True, text=True, timeout=600)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = list(wb["summary"].iter_rows(values_only=True))
        wb.close()
        head = rows[0]
        return {(d["Step"], d["Name"]): d["Changed Argument"] or ""
                for d in (dict(zip(head, r)) for r in rows[1:])}

    def test_one_call_spelled_by_position_and_by_keyword_changes_nothing(self):
        got = self.changed("position", "keyword")
        for step in (0, 1):
            for name in CALLS:
                self.assertEqual(got[(step, name)], "", (step, name))

    def test_a_changed_alpha_is_named_by_its_parameter(self):
        got = self.changed("position", "alpha")
        for step in (0, 1):
            # alpha: 2 given on the compare side, 1 by default on the bench
            self.assertEqual(got[(step, "Torch.add.0.forward")],
                             "kwarg.alpha: NPU 2, bench 1 (default)")
            for name in ("Torch.max.0.forward", "Torch.sum.0.forward", "Tensor.max.0.forward"):
                self.assertEqual(got[(step, name)], "", (step, name))


if __name__ == "__main__":
    unittest.main()
