"""Two DDP ranks over gloo under the monitor: each rank writes its own
<time>-rank<R>-<id> directory; grad_unreduced holds the gradient autograd
left on that rank, grad_reduced the one DDP averaged (the same on both
ranks), each equal to numpy's statistics of the tensors the script saved;
an anomaly names the world group as msprobe's group_mates."""
import json
import os
import sys
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import montest as mt  # noqa: E402
import msp_launch  # noqa: E402

OPS = ["min", "max", "mean", "norm", "zeros", "nans"]


class TwoRanks(mt.MonitorCase):
    def test_unreduced_and_reduced_gradients_per_rank(self):
        os.makedirs(self.path("saved"))
        # AnomalyNan with a threshold every gradient passes: one anomaly per gradient
        cfg = self.write_config({"wg_distribution": True, "ops": OPS, "ndigits": 12,
                                 "alert": {"rules": [{"rule_name": "AnomalyNan",
                                                      "args": {"threshold": 0}}],
                                           "dump": True}})
        env = dict(os.environ, LD_PRELOAD=mt.PRELOAD, MSPROBE_MONITOR_CONFIG=cfg,
                   MONITOR_OUTPUT_DIR=self.path("out"), TINY_SAVE=self.path("saved"))
        env.pop("MSPROBE_LOG_FILE", None)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_train.py")
        msp_launch.launch(script, 2, env, self.work).check()
        dirs = sorted(d for d in os.listdir(self.path("out")) if mt.DIR_RE.match(d))
        self.assertEqual([mt.DIR_RE.match(d).group(1) for d in dirs], ["0", "1"])
        reduced = {}
        for rank, d in enumerate(dirs):
            for step in range(3):
                saved = torch.load(self.path("saved", "rank%d_step%d.pt" % (rank, step)))
                for task, key in (("grad_unreduced", "local"), ("grad_reduced", "reduced")):
                    _, rows = mt.read_csv(self.path("out", d, "%s_%d-%d.csv" % (task, step, step)))
                    got = {r[1]: [float(v) for v in r[3:9]] for r in rows}
                    want = {"module." + n: t for n, t in saved[key].items()}
                    self.assertEqual(sorted(got), sorted(want))
                    for name, t in want.items():
                        a = t.double().numpy().ravel()
                        exp = [a.min(), a.max(), a.mean(), np.sqrt((a * a).sum()),
                               np.count_nonzero(np.abs(a) < 1e-8) / a.size, 0]
                        self.assertTrue(np.allclose(got[name], exp, rtol=1e-9, atol=2e-12),
                                        (rank, step, task, name, got[name], exp))
                    if task == "grad_reduced":
                        reduced.setdefault(step, []).append(got)
            anomalies = json.load(open(self.path("out", "anomaly_detected", "rank%d" % rank,
                                                 "anomaly.json")))
            self.assertTrue(anomalies)
            for a in anomalies.values():
                self.assertEqual((a["rank"], a["pp_stage"], a["group_mates"]), (rank, rank, [0, 1]))
        for step, (r0, r1) in reduced.items():  # DDP's average is the same on both ranks
            self.assertEqual(r0, r1, step)


if __name__ == "__main__":
    unittest.main()
