"""What `msprobe monitor` writes for the tiny training is laid out as
Huawei msprobe's own monitor wrote it for the same run (fixtures/monitor):
the same directory pattern, file names, headers, row names in the same
order, values equal to ndigits, and the same anomaly_detected/ entries."""
import json
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import montest as mt  # noqa: E402



class LayoutAsMsprobe(mt.MonitorCase):
    def compare_run(self, fixture, env):
        ref_root = os.path.join(mt.FIX, fixture)
        out = self.path("out")
        p = self.monitor(os.path.join(ref_root, "monitor.json"), out, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        ref, ours = mt.run_dir(ref_root), mt.run_dir(out)
        ref_files = sorted(os.listdir(ref))
        self.assertEqual(sorted(os.listdir(ours)), ref_files)
        ndigits = json.load(open(os.path.join(ref_root, "monitor.json"))).get("ndigits", 6)
        for name in ref_files:
            with self.subTest(file=name):
                rh, rrows = mt.read_csv(os.path.join(ref, name))
                oh, orows = mt.read_csv(os.path.join(ours, name))
                self.assertEqual(oh, rh)
                nkey = 4 if "micro_step" in rh else 3
                self.assertEqual([r[:nkey] for r in orows], [r[:nkey] for r in rrows])
                for r, o in zip(rrows, orows):
                    self.assertEqual(o[-2:], r[-2:])  # shape, dtype
                    for a, b in zip(r[nkey:-2], o[nkey:-2]):
                        if a == "nan":
                            self.assertEqual(b, "nan")
                        else:  # the last digit may differ by a summation order
                            self.assertTrue(math.isclose(float(a), float(b),
                                                         abs_tol=1.5 * 10 ** -ndigits), (r, o))
        return ref_root, out

    def compare_anomalies(self, ref_root, out):
        rel = os.path.join("anomaly_detected", "rank0", "anomaly.json")
        ref = json.load(open(os.path.join(ref_root, rel)))
        ours = json.load(open(os.path.join(out, rel)))
        self.assertEqual(list(ours), list(ref))
        for key in ref:
            r, o = dict(ref[key]), dict(ours[key])
            # the history mean in the message may differ in its last digits
            r.pop("message"), o.pop("message")
            self.assertEqual(o, r, key)
            self.assertTrue(ours[key]["message"].startswith(
                ref[key]["message"].split(", history mean")[0]), key)

    def test_every_task_as_msprobe_writes_it(self):
        # its anomalies: msprobe's AnomalyNan on the gradients of inputs that have none
        self.compare_anomalies(*self.compare_run("all_3steps", {}))

    def test_every_task_through_the_device_path(self):
        # torch's batched reductions (accelerators), taken by CPU tensors here
        self.compare_anomalies(*self.compare_run("all_3steps",
                                                 {"MSPROBE_TEST_DEVICE_STATS": "1"}))

    def test_records_of_steps_anomalies_and_ndigits(self):
        self.compare_anomalies(*self.compare_run("nan_4steps",
                                                 {"TINY_STEPS": "4", "TINY_NAN_STEP": "2"}))

    def test_training_unchanged_with_in_place_ops_under_every_hook(self):
        cfg = os.path.join(mt.FIX, "all_3steps", "monitor.json")
        env = dict(os.environ, TINY_INPLACE="1")
        plain = mt.subprocess.run([mt.PYTHON, mt.TINY], env=env, capture_output=True, text=True)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        p = self.monitor(cfg, self.path("out"), env={"TINY_INPLACE": "1"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, plain.stdout)  # the same losses, bit for bit
        self.assertTrue(os.path.exists(os.path.join(mt.run_dir(self.path("out")),
                                                    "actv_grad_2-2.csv")))


if __name__ == "__main__":
    unittest.main()
