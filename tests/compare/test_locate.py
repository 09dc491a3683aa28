"""Issue 41's acceptance test: a tiny GPT (tests/compare/monitor_gpt.py)
trained for 300 steps under `msprobe monitor`, twice, identical but for one
LayerNorm (block 1's ln_2) computing with eps 0.5 from step 137 on the
compare side. `msprobe compare` on the two monitor outputs names step 137
(every value before it is equal, read here with the csv module, so no earlier
step could be named); a run whose only difference is bf16 autocast names no
divergent step; `msprobe locate` names the LayerNorm's record of step 137,
having dumped that step alone (its eps read back with h5py from both dumps).
Also locate's other endings: AnomalyNan (the first NaN step handed to
overflow_check), a bench command that is not reproducible, and no
divergence."""
import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import msp_msprobe as M  # noqa: E402

GPT = os.path.join(M.SOURCE, "tests", "compare", "monitor_gpt.py")
PY = M.PYTHON
CONFIG = {"targets": {}, "param_distribution": True, "wg_distribution": True,
          "mv_distribution": True, "xy_distribution": True, "all_xy": True, "format": "csv",
          "ops": ["min", "max", "mean", "norm", "zeros", "nans"], "ndigits": 12,
          "step_count_per_record": 300}


def env():
    e = dict(os.environ, OMP_NUM_THREADS="1", MSPROBE_PRELOAD_LIB=M.PRELOAD)
    e.pop("MSPROBE_LOG_FILE", None)
    return e


def run(*argv, cwd=None):
    return subprocess.run([M.BIN, *argv], capture_output=True, text=True, cwd=cwd, env=env(),
                          timeout=900)


def steps(root):
    """The step directories of a dump root (the dump's own lock files aside)."""
    return sorted(d for d in os.listdir(root) if d.startswith("step"))


def attrs_of(path, record):
    with h5py.File(path, "r") as f:
        out = {}
        for row in f["attrs"][()]:
            if row["record"].decode() == record:
                out[row["key"].decode()] = row["value"].decode()
        return out


@unittest.skipUnless(M.PRELOAD and os.path.exists(M.PRELOAD), "no preload library")
class Locate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="msp-locate-")
        cls.cfg = os.path.join(cls.work, "monitor.json")
        with open(cls.cfg, "w") as f:
            json.dump(CONFIG, f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def monitor(self, name, extra):
        out = os.path.join(self.work, name)
        p = subprocess.run([M.BIN, "monitor", "-c", self.cfg, "-o", out, "--", "/bin/sh", "-c",
                            extra + " " + PY + " " + GPT],
                           capture_output=True, text=True, env=env(), timeout=900)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return out

    def test_compare_names_step_137_and_bf16_nothing(self):
        bench = self.monitor("bench", "")
        eps = self.monitor("eps", "GPT_EPS_STEP=137")
        bf16 = self.monitor("bf16", "GPT_AUTOCAST=bf16")
        p = run("compare", "-b", bench, "-c", eps, "-o", os.path.join(self.work, "c_eps"))
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"(?m)^first divergent step: 137 rank 0 h\.1\.ln_2 ")
        # every statistic of every kind equal before step 137, and the named
        # one more than 1 % apart at 137
        for f in glob.glob(os.path.join(bench, "*", "*.csv")):
            g = os.path.join(glob.glob(os.path.join(eps, "*"))[0], os.path.basename(f))
            with open(f, newline="") as a, open(g, newline="") as b:
                ra, rb = list(csv.DictReader(a)), list(csv.DictReader(b))
            self.assertEqual(len(ra), len(rb), f)
            for x, y in zip(ra, rb):
                if int(x["step"]) < 137:
                    self.assertEqual(x, y, f)
                elif int(x["step"]) == 137 and x["name"] == "h.1.ln_2.output" and \
                        "actv_0" in f:
                    self.assertGreater(abs(float(x["norm"]) - float(y["norm"])) /
                                       float(x["norm"]), 0.01)
        p = run("compare", "-b", bench, "-c", bf16, "-o", os.path.join(self.work, "c_bf16"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("no divergent step", p.stdout)
        self.assertNotIn("first divergent step", p.stdout)

    def test_locate_names_the_layernorm_of_step_137(self):
        out = os.path.join(self.work, "loc_eps")
        p = run("locate", "-o", out, "--bench", PY + " " + GPT,
                "--cmp", "GPT_EPS_STEP=137 " + PY + " " + GPT)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("reproducible: two runs of the bench command agree bit for bit", p.stdout)
        self.assertRegex(p.stdout, r"(?m)^first divergent step: 137 rank 0 h\.1\.ln_2 ")
        self.assertRegex(p.stdout, r"(?m)^  first introduced error: step 137 rank 0 ")
        m = re.search(r"(?m)^culprit: step 137 rank 0 (\S+)", p.stdout)
        self.assertIsNotNone(m, p.stdout)
        # the fourth layer_norm call of the step is block 1's ln_2 (ln_1, ln_2
        # of block 0, ln_1 of block 1 before it), or its module record
        self.assertIn(m.group(1), ("Functional.layer_norm.3.forward",
                                   "Module.h.1.ln_2.LayerNorm.forward.0"))
        # only step 137 was dumped, on both sides, and its eps differs there
        for side, eps in (("bench", "1e-05"), ("cmp", "0.5")):
            self.assertEqual(steps(os.path.join(out, "dump", side)), ["step137"])
            h5 = os.path.join(out, "dump", side, "step137", "rank0", "dump.h5")
            a = attrs_of(h5, "Functional.layer_norm.3.forward")
            self.assertEqual(float(a["kwarg.eps"] if "kwarg.eps" in a else a["input.4"]),
                             float(eps), a)
            self.assertEqual(a["parent"], "Module.h.1.ln_2.LayerNorm.forward.0")
        with open(os.path.join(out, "locate.txt")) as f:
            self.assertIn(m.group(0), f.read())
        for rep in ("monitor_compare/result.html", "monitor_compare/result.xlsx",
                    "compare/result.xlsx"):
            self.assertTrue(os.path.exists(os.path.join(out, rep)), rep)

    def test_locate_with_anomaly_nan_hands_the_first_nan_step_to_overflow_check(self):
        cfg = os.path.join(self.work, "nan.json")
        with open(cfg, "w") as f:
            json.dump(dict(CONFIG, step_count_per_record=100,
                           alert={"rules": [{"rule_name": "AnomalyNan"}], "dump": False}), f)
        out = os.path.join(self.work, "loc_nan")
        p = run("locate", "-o", out, "-c", cfg, "--bench", "GPT_STEPS=60 " + PY + " " + GPT,
                "--cmp", "GPT_STEPS=60 GPT_NAN_STEP=40 " + PY + " " + GPT)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"(?m)^first NaN/Inf \(compare\): step 40 rank 0 ")
        self.assertRegex(p.stdout, r"(?m)^first NaN/Inf made at: step 40 rank 0 "
                                   r"Torch\.sqrt\.0\.forward ")
        self.assertEqual(steps(os.path.join(out, "dump", "cmp")), ["step40"])
        # named at once: the bench command never ran
        self.assertFalse(os.path.exists(os.path.join(out, "monitor", "bench")))

    def test_locate_says_a_bench_command_is_not_reproducible(self):
        out = os.path.join(self.work, "loc_repro")
        # each run of the bench command draws its batches from another seed
        p = run("locate", "-o", out, "--bench", "GPT_STEPS=30 GPT_DATA_SEED=$$ " + PY + " " + GPT,
                "--cmp", "GPT_STEPS=30 " + PY + " " + GPT)
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"(?m)^not reproducible: two runs of the bench command "
                                   r"diverge at step \d+")
        self.assertFalse(os.path.exists(os.path.join(out, "dump", "bench", "step0")))

    def test_locate_without_divergence_dumps_nothing(self):
        out = os.path.join(self.work, "loc_bf16")
        p = run("locate", "-o", out, "--no-repro-check", "--bench",
                "GPT_STEPS=60 " + PY + " " + GPT, "--cmp",
                "GPT_STEPS=60 GPT_AUTOCAST=bf16 " + PY + " " + GPT)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("no divergent step", p.stdout)
        self.assertEqual(os.listdir(os.path.join(out, "dump")), [])
        # an earlier locate is never overwritten
        p = run("locate", "-o", out, "--bench", "true", "--cmp", "true")
        self.assertEqual(p.returncode, 2)
        self.assertIn("holds an earlier locate", p.stderr)


if __name__ == "__main__":
    unittest.main()
