"""A real AdamW training under `msprobe monitor`: every statistic in the CSV
files equals what numpy computes on the same tensors, saved by the script
itself (weights before and after each step, gradients, exp_avg and
exp_avg_sq); the steps written follow start_step, step_interval and
collect_times; the first NaN is named at once."""
import os
import sys
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import montest as mt  # noqa: E402

OPS = ["min", "max", "mean", "norm", "zeros", "nans"]
CONF = {"targets": {}, "wg_distribution": True, "param_distribution": True,
        "mv_distribution": True, "ops": OPS, "ndigits": 12, "eps": 1e-3}


def expected(t, eps):
    a = t.double().numpy().ravel()
    return [a.min(), a.max(), a.mean(), np.sqrt(np.sum(a * a)),
            np.count_nonzero(np.abs(a) < eps) / a.size, np.count_nonzero(np.isnan(a))]


class StatisticsMatchNumpy(mt.MonitorCase):
    def run_saved(self, conf, steps=4, env=None, preload_only=False):
        os.makedirs(self.path("saved"))
        cfg = self.write_config(conf)
        e = dict({"TINY_STEPS": str(steps), "TINY_SAVE": self.path("saved")}, **(env or {}))
        p = self.monitor(cfg, self.path("out"), env=e, preload_only=preload_only)
        self.assertEqual(p.returncode, 0, p.stderr)
        return mt.run_dir(self.path("out")), p

    def check_file(self, d, task, step, tensors, eps):
        header, rows = mt.read_csv(os.path.join(d, f"{task}_{step}-{step}.csv"))
        self.assertEqual(header, ["vpp_stage", "name", "step"] + OPS + ["shape", "dtype"])
        self.assertEqual(sorted(r[1] for r in rows), sorted(tensors))
        for r in rows:
            t = tensors[r[1]]
            self.assertEqual(r[0], "0")
            self.assertEqual(int(r[2]), step)
            self.assertEqual(r[-2], str(list(t.shape)))
            self.assertEqual(r[-1], str(t.dtype))
            for op, got, want in zip(OPS, r[3:-2], expected(t, eps)):
                self.assertTrue(np.isclose(float(got), want, rtol=1e-9, atol=2e-12),
                                (task, step, r[1], op, got, want))
                # printed as Python prints the float pandas rounded (np.round)
                if op == "nans":
                    self.assertEqual(got, str(int(want)))
                else:
                    self.assertEqual(got, repr(float(np.round(float(got), 12))))

    def check_run(self, d, steps, eps):
        for step in range(steps):
            s = torch.load(self.path("saved", f"step{step}.pt"))
            self.check_file(d, "param_origin", step, s["param"], eps)
            self.check_file(d, "param_updated", step, s["after"], eps)
            self.check_file(d, "grad_reduced", step, s["grad"], eps)
            self.check_file(d, "grad_unreduced", step, s["grad"], eps)
            if step == 0:  # AdamW has no state before its first step (msprobe: none written)
                self.assertFalse(os.path.exists(os.path.join(d, "exp_avg_0-0.csv")))
                continue
            prev = torch.load(self.path("saved", f"step{step - 1}.pt"))["state"]
            for key in ("exp_avg", "exp_avg_sq"):
                self.check_file(d, key, step, {n: v[key] for n, v in prev.items()}, eps)

    def test_weights_gradients_and_adam_state(self):
        d, _ = self.run_saved(CONF)
        self.check_run(d, 4, 1e-3)

    def test_preload_alone_and_device_path(self):
        # torch's reductions (the accelerator path), taken by CPU tensors here
        d, _ = self.run_saved(CONF, steps=3, env={"MSPROBE_TEST_DEVICE_STATS": "1"},
                              preload_only=True)
        self.check_run(d, 3, 1e-3)

    def test_device_path_tensors_reduced_alone(self):
        d, _ = self.run_saved(CONF, steps=3, env={"MSPROBE_TEST_DEVICE_STATS": "1",
                                                  "MSPROBE_TEST_MONITOR_ALONE": "1"})
        self.check_run(d, 3, 1e-3)

    def test_steps_chosen_by_start_interval_and_times(self):
        conf = dict(CONF, start_step=1, step_interval=2, collect_times=2, mv_distribution=False)
        d, _ = self.run_saved(conf, steps=7)
        self.assertEqual(sorted(f for f in os.listdir(d) if f.startswith("grad_reduced")),
                         ["grad_reduced_1-1.csv", "grad_reduced_3-3.csv"])

    def test_first_nan_named_and_dumped(self):
        conf = dict(CONF, alert={"rules": [{"rule_name": "AnomalyNan"}], "dump": True})
        d, p = self.run_saved(conf, steps=4, env={"TINY_NAN_STEP": "2"})
        self.assertIn("monitor: step 2 is the first with NaN or Inf", p.stderr)
        self.assertEqual(p.stderr.count("is the first with NaN"), 1)
        self.assertIn("Rule AnomalyNan reports anomaly signal in", p.stderr)
        import json
        anomalies = json.load(open(self.path("out", "anomaly_detected", "rank0",
                                             "anomaly.json")))
        self.assertEqual(min(a["step"] for a in anomalies.values()), 2)

    def test_module_ranks_without_this_rank_writes_nothing(self):
        cfg = self.write_config(dict(CONF, module_ranks=[1]))
        p = self.monitor(cfg, self.path("out"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(os.path.exists(self.path("out")))


if __name__ == "__main__":
    unittest.main()
