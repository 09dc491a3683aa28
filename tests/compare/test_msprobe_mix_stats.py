"""msprobe's own mix-level dumps of the seeded run (fixtures/msprobe:
v26_mix, v26_mix_stats, v833_mix_stats; README.md there) compare clean
against each other and against our shim's dump of the same run, in
statistics mode too: msprobe 26's null Mean and Norm of an integer tensor
are unknown, not a failure, and a mean that cancels to near 0 differing
by summation order alone is no Warning. An error planted in a copy of
msprobe's dump.json is still found, on its row alone."""
import csv
import json
import math
import os
import shutil
import tempfile
import unittest

import numpy as np

from msp_msprobe import FIX, PRELOAD, dump_json, dump_seeded, msprobe
V26_MIX = os.path.join(FIX, "v26_mix")
V26_STATS = os.path.join(FIX, "v26_mix_stats")
V833_STATS = os.path.join(FIX, "v833_mix_stats")
EPS32 = float(np.finfo(np.float32).eps)


def compare(bench, cmp, out):
    p = msprobe("compare", "-b", bench, "-c", cmp, "-o", out, "--csv")
    rows = []
    if os.path.exists(os.path.join(out, "result.csv")):
        with open(os.path.join(out, "result.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
    return p, rows


def tensors(data):
    """{full tensor name: dump.json entry} of every tensor, msprobe's names."""
    out = {}
    for rec, body in data.items():
        for key, val in body.items():
            role = {"input_args": "input", "output": "output"}.get(key)
            items = val if isinstance(val, list) else []
            for i, t in enumerate(items):
                if role and isinstance(t, dict) and "dtype" in t:
                    out["%s.%s.%d" % (rec, role, i)] = t
    return out


def failing(rows):
    return [r for r in rows if r["Accuracy Reached or Not"] in ("No", "Warning")]


class MsprobeAgainstMsprobe(unittest.TestCase):
    """msprobe 26 against 8.3.3, statistics at mix level: was "failing records 2"
    ("bench tensor has no statistics" on each int64 input)."""

    def test_26_and_833_statistics_compare_clean_both_ways(self):
        j26, j833 = tensors(dump_json(V26_STATS)[1]["data"]), tensors(dump_json(V833_STATS)[1]["data"])
        with tempfile.TemporaryDirectory() as d:
            for bench, cmp, jb, jc in ((V26_STATS, V833_STATS, j26, j833),
                                       (V833_STATS, V26_STATS, j833, j26)):
                with self.subTest(bench=bench):
                    p, rows = compare(bench, cmp, os.path.join(d, "o"))
                    self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                    self.assertIn("failing records 0", p.stdout)
                    self.assertEqual(failing(rows), [])
                    # each paired row's Max diff is compare Max - bench Max of the files
                    checked = 0
                    for r in rows:
                        n, b = r["NPU Name"], r["Bench Name"]
                        if n in jc and b in jb:
                            self.assertEqual(float(r["Max diff"]),
                                             float(jc[n]["Max"]) - float(jb[b]["Max"]), n)
                            checked += 1
                    self.assertGreater(checked, 60)
                    # the int64 ids: 26 gave Max and Min, no Mean or Norm
                    ids = "Functional.embedding.0.forward.input.0"
                    self.assertEqual((j26[ids]["dtype"], j26[ids]["Mean"], j26[ids]["Norm"]),
                                     ("torch.int64", None, None))
                    row = next(r for r in rows if r["NPU Name"] == ids)
                    self.assertEqual((row["Max diff"], row["Min diff"]), ("0", "0"))
                    self.assertEqual((row["Mean diff"], row["L2norm diff"]), ("N/A", "N/A"))
                    self.assertEqual(row["Accuracy Reached or Not"], "Yes")


class PlantedErrorsStillFound(unittest.TestCase):
    """A copy of 8.3.3's dump with one statistic changed, against 26's."""

    def plant(self, d, name, key, value):
        cmp = os.path.join(d, "planted")
        shutil.copytree(V833_STATS, cmp)
        path, js = dump_json(cmp)
        rec, role, i = name.rsplit(".", 2)
        side = {"input": "input_args", "output": "output"}[role]
        js["data"][rec][side][int(i)][key] = value
        with open(path, "w") as f:
            json.dump(js, f)
        return cmp

    def test_a_planted_mean_shift_warns_and_rounding_does_not(self):
        name = "Functional.layer_norm.0.forward.output.0"
        t833, t26 = tensors(dump_json(V833_STATS)[1]["data"])[name], \
            tensors(dump_json(V26_STATS)[1]["data"])[name]
        numel = int(np.prod(t833["shape"]))
        amax = max(abs(t833["Max"]), abs(t833["Min"]), abs(t26["Max"]), abs(t26["Min"]))
        floor = math.sqrt(numel) * EPS32 * amax  # rounding a float32 sum can leave
        for shift, want in ((3 * floor, "Warning"), (0.5 * floor, "Yes"), (0.01 * amax, "Warning")):
            with self.subTest(shift=shift), tempfile.TemporaryDirectory() as d:
                cmp = self.plant(d, name, "Mean", t26["Mean"] + shift)
                p, rows = compare(V26_STATS, cmp, os.path.join(d, "o"))
                bad = {r["NPU Name"] for r in failing(rows)}
                self.assertEqual(bad, {name} if want == "Warning" else set(), p.stdout)
                self.assertEqual(p.returncode, 1 if want == "Warning" else 0, p.stdout + p.stderr)
                row = next(r for r in rows if r["NPU Name"] == name)
                self.assertEqual(row["Accuracy Reached or Not"], want)
                self.assertAlmostEqual(float(row["Mean diff"]), shift, delta=abs(shift) * 1e-6)

    def test_a_planted_max_of_an_integer_tensor_warns_beside_null_mean(self):
        name = "Functional.embedding.0.forward.input.0"
        with tempfile.TemporaryDirectory() as d:
            cmp = self.plant(d, name, "Max", 40.0)  # 26 says 9: |31| / 40 > 0.5
            p, rows = compare(V26_STATS, cmp, os.path.join(d, "o"))
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            self.assertEqual({r["NPU Name"] for r in failing(rows)}, {name})
            row = next(r for r in rows if r["NPU Name"] == name)
            self.assertEqual((row["Accuracy Reached or Not"], row["Max diff"]), ("Warning", "31"))


@unittest.skipUnless(PRELOAD and os.path.exists(PRELOAD), "MSPROBE_PRELOAD_LIB not set (ctest)")
class OursAgainstMsprobe(unittest.TestCase):
    """Our shim dumps the run at mix level, tensors and statistics, from
    msprobe's own config.json; every pairing with msprobe's is clean."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.ours = {}
        for task in ("tensor", "statistics"):
            conf = {"task": task, "rank": [], "step": [0], "level": "mix",
                    task: {"scope": [], "list": [], "data_mode": ["all"]}}
            if task == "statistics":
                conf[task]["summary_mode"] = "statistics"
            cls.ours[task], _ = dump_seeded(cls.tmp.name, task, conf)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_every_pairing_with_msprobe_is_clean(self):
        pairs = [(V26_MIX, self.ours["tensor"]), (V26_STATS, self.ours["statistics"]),
                 (V833_STATS, self.ours["statistics"])]
        for theirs, ours in pairs:
            for bench, cmp in ((theirs, ours), (ours, theirs)):
                with self.subTest(bench=bench, cmp=cmp):
                    p, rows = compare(bench, cmp, os.path.join(self.tmp.name, "o"))
                    self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                    self.assertIn("failing records 0", p.stdout)
                    self.assertEqual(failing(rows), [])
                    # msprobe's module records, parameters included, all pair
                    data = dump_json(theirs)[1]["data"]
                    side = "Bench Name" if bench == theirs else "NPU Name"
                    paired = {r[side] for r in rows if r["Bench Name"] != "N/A"
                              and r["NPU Name"] != "N/A"}
                    mod_params = {"%s.parameters.%s" % (k, p_) for k, v in data.items()
                                  if k.startswith("Module.") and ".forward." in k
                                  for p_ in v.get("parameters", {})}
                    self.assertGreaterEqual(len(mod_params), 7)
                    self.assertEqual(mod_params - paired, set())

    def test_the_mean_differs_by_summation_order_alone(self):
        """msprobe's Mean of the LayerNorm output is torch's float32 mean of
        the tensor msprobe saved; ours is within sqrt(n) float32 roundings
        of the exact (float64) mean, so the row is Yes."""
        import torch
        name = "Functional.layer_norm.0.forward.output.0"
        path, _ = dump_json(V26_MIX)
        x = torch.load(os.path.join(os.path.dirname(path), "dump_tensor_data", name + ".pt"))
        t26 = tensors(dump_json(V26_STATS)[1]["data"])[name]
        self.assertEqual(t26["Mean"], x.mean().item())
        exact = float(np.mean(x.numpy().astype(np.float64)))
        p, rows = compare(V26_STATS, self.ours["statistics"], os.path.join(self.tmp.name, "m"))
        row = next(r for r in rows if r["NPU Name"] == name)
        floor = math.sqrt(x.numel()) * EPS32 * float(x.abs().max())
        self.assertLess(abs(float(row["NPU mean"]) - exact), floor)
        self.assertNotEqual(float(row["Mean diff"]), 0.0)
        self.assertLess(abs(float(row["Mean diff"])), floor)
        # msprobe's own measure would warn: |diff| / (max |mean| + 1e-10) > 0.5
        m = abs(float(row["Mean diff"])) / (max(abs(float(row["NPU mean"])),
                                                abs(float(row["Bench mean"]))) + 1e-10)
        self.assertGreater(m, 0.5)
        self.assertEqual(row["Accuracy Reached or Not"], "Yes")


if __name__ == "__main__":
    unittest.main()
