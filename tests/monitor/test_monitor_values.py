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

    def test_other_dtypes_and_the_portable_pass(self):
        # float64 and bfloat16 weights, and float32 without AVX2 (the portable pass)
        for env in ({"TINY_DTYPE": "float64"}, {"TINY_DTYPE": "bfloat16"},
                    {"MSPROBE_FORMAT_PORTABLE": "1"}):
            with self.subTest(**env):
                self.tearDown()
                self.setUp()
                d, _ = self.run_saved(CONF, steps=2, env=env)
                self.check_run(d, 2, 1e-3)

    def test_steps_chosen_by_start_interval_and_times(self):
        conf = dict(CONF, start_step=1, step_interval=2, collect_times=2, mv_distribution=False)
        d, _ = self.run_saved(conf, steps=7)
        self.assertEqual(sorted(f for f in os.listdir(d) if f.startswith("grad_reduced")),
                         ["grad_reduced_1-1.csv", "grad_reduced_3-3.csv"])

    def test_dynamic_start_and_stop(self):
        # DYNAMIC_MONITOR: off until dynamic_on; a file rewritten after step 1's
        # optimizer.step() is seen at the end of step 2 (the file is looked at inside
        # the optimizer's step, as msprobe does) and monitoring runs from step 3 for
        # collect_times steps, after which dynamic_on is false again
        import json
        cfg = self.write_config(dict(CONF, dynamic_on=False))
        on = json.dumps(dict(CONF, dynamic_on=True, collect_times=2))
        os.makedirs(self.path("saved"))
        p = self.monitor(cfg, self.path("out"), env={
            "DYNAMIC_MONITOR": "True", "TINY_STEPS": "6", "TINY_SAVE": self.path("saved"),
            "TINY_DYNAMIC_AT": "1:%s:%s" % (cfg, on)})
        self.assertEqual(p.returncode, 0, p.stderr)
        d = mt.run_dir(self.path("out"))
        self.assertEqual(sorted(f for f in os.listdir(d) if f.startswith("param_origin")),
                         ["param_origin_3-3.csv", "param_origin_4-4.csv"])
        self.assertIs(json.load(open(cfg))["dynamic_on"], False)
        self.assertIn("monitoring from step 3", p.stderr)
        for step in (3, 4):
            s = torch.load(self.path("saved", f"step{step}.pt"))
            self.check_file(d, "param_origin", step, s["param"], 1e-3)

    def test_dynamic_activations_hooked_only_while_written(self):
        # The same switch with activations, an in-place ReLU and msprobe's
        # collect_times: the module hooks are there from the start until the
        # model's first forward (step 0 starts with them), then only for the
        # written steps 3 and 4; every step's loss is the plain run's.
        import json
        conf = dict(CONF, xy_distribution=True, mv_distribution=False)
        cfg = self.write_config(dict(conf, dynamic_on=False))
        on = json.dumps(dict(conf, dynamic_on=True, collect_times=2))
        env = {"TINY_STEPS": "6", "TINY_INPLACE": "1", "TINY_HOOKS": "1"}
        plain = mt.subprocess.run([mt.PYTHON, mt.TINY], capture_output=True, text=True,
                                  env=dict(os.environ, **env))
        self.assertEqual(plain.returncode, 0, plain.stderr)
        p = self.monitor(cfg, self.path("out"), env=dict(
            env, DYNAMIC_MONITOR="True", TINY_DYNAMIC_AT="1:%s:%s" % (cfg, on)))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, plain.stdout)
        d = mt.run_dir(self.path("out"))
        self.assertEqual(sorted(f for f in os.listdir(d) if f.startswith("actv_grad")),
                         ["actv_grad_3-3.csv", "actv_grad_4-4.csv"])
        _, rows = mt.read_csv(os.path.join(d, "actv_3-3.csv"))
        self.assertIn("block.act.input", [r[1] for r in rows])
        backward = lambda text: [h[1] for _, h in sorted(mt.hooks_said(text).items())]  # noqa: E731
        self.assertEqual(backward(plain.stderr), [0] * 6, plain.stderr)
        self.assertEqual(backward(p.stderr), [1, 0, 0, 1, 1, 0], p.stderr)

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

    def test_the_model_and_its_optimizer_only(self):
        cfg = self.write_config({"targets": {"1": {}}, "wg_distribution": True,
                                 "xy_distribution": True, "ops": ["norm"]})
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "two_models_train.py")
        p = self.monitor(cfg, self.path("out"), args=(script,))
        self.assertEqual(p.returncode, 0, p.stderr)
        d = mt.run_dir(self.path("out"))
        # 3 steps of G's optimizer (D's steps are not the model's); targets "1": G's ReLU,
        # which has no parameters (msprobe's prefix rule: no parameter named "1...")
        self.assertEqual(sorted(os.listdir(d)), ["actv_%d-%d.csv" % (s, s) for s in range(3)] +
                         ["actv_grad_%d-%d.csv" % (s, s) for s in range(3)])
        _, rows = mt.read_csv(os.path.join(d, "actv_0-0.csv"))
        self.assertEqual([r[1] for r in rows], ["1.input", "1.output"])

    def test_gradient_written_during_the_step_is_not_trusted(self):
        # an optimizer that writes its gradients in place during its step:
        # statistics the helper thread took beside the step may be torn, so
        # its rows say nan, once warned; a gradient the helper could not take
        # (its queue full on a busy machine) is read before the step and is
        # right. Either way no row holds the halved gradient.
        code = ("import torch\n"
                "class Opt(torch.optim.AdamW):\n"
                "    def step(self, closure=None):\n"
                "        for g in self.param_groups:\n"
                "            for p in g['params']:\n"
                "                print('PRE', repr(p.grad.double().norm().item()))\n"
                "                p.grad.mul_(0.5)\n"
                "        return super().step(closure)\n"
                "torch.manual_seed(0)\n"
                "m = torch.nn.Linear(4, 2)\n"
                "o = Opt(m.parameters())\n"
                "for i in range(2):\n"
                "    o.zero_grad(); m(torch.randn(3, 4)).sum().backward(); o.step()\n")
        cfg = self.write_config({"wg_distribution": True, "ops": ["norm"], "ndigits": 12})
        p = self.monitor(cfg, self.path("out"), args=("-c", code))
        self.assertEqual(p.returncode, 0, p.stderr)
        pre = [float(ln.split()[1]) for ln in p.stdout.splitlines() if ln.startswith("PRE ")]
        self.assertEqual(len(pre), 4, p.stdout)  # two parameters, two steps
        warned = p.stderr.count("a gradient was written during the optimizer's step")
        self.assertIn(warned, (0, 1), p.stderr)
        _, rows = mt.read_csv(os.path.join(mt.run_dir(self.path("out")), "grad_reduced_0-0.csv"))
        got = [r[3] for r in rows]
        self.assertEqual(len(got), 2)
        for g, want in zip(got, pre[:2]):
            if g != "nan":  # read before the step: the gradient as it was
                self.assertTrue(np.isclose(float(g), want, rtol=1e-9, atol=1e-12), (g, want))
        if warned:
            self.assertIn("nan", got)
        else:
            self.assertNotIn("nan", got)
        _, rows = mt.read_csv(os.path.join(mt.run_dir(self.path("out")), "grad_unreduced_0-0.csv"))
        self.assertNotIn("nan", [r[3] for r in rows])

    def test_module_ranks_without_this_rank_writes_nothing(self):
        cfg = self.write_config(dict(CONF, module_ranks=[1]))
        p = self.monitor(cfg, self.path("out"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(os.path.exists(self.path("out")))


if __name__ == "__main__":
    unittest.main()
