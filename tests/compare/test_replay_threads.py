"""Replay in a job child forked after torch ran with several threads.

The replay worker warms torch up once and forks a child per session's jobs
(msprobe-compare(1), REPLAY). A worker that ran a parallel region holds an
OpenMP team, and a child forked from it waited forever at its first parallel
region (libgomp's team threads are not copied by fork): with OMP_NUM_THREADS=2
a layer_norm of 64 rows was "past its time limit" instead of replayed. Here
the compare side of F.layer_norm was computed with eps 1.0 against the bench
side's 1e-5 (float64 by hand, numpy), under OMP_NUM_THREADS=2 and a kept
worker: replay must answer, call it introduced, and give the error computed
here."""
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
import openpyxl

from msp_h5dump import write_dump

BIN = os.environ.get("MSPROBE_BIN", "msprobe")


def layer_norm(x, eps):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps)


class ThreadsBeforeFork(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-threads-")
        self.tmp = os.path.join(self.work, "tmp")
        os.makedirs(self.tmp)

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_a_parallel_op_replays_in_the_job_child(self):
        x = np.random.default_rng(4).standard_normal((64, 256)).astype(np.float32)
        good, bad = layer_norm(x, 1e-5), layer_norm(x, 1.0)
        for side, out, eps in (("gpu", good, "1e-05"), ("npu", bad, "1.0")):
            path = os.path.join(self.work, side, "step0", "rank0", "dump.h5")
            write_dump(path, [("Functional.layer_norm.0.forward", 0,
                               {"input.0": x, "output.0": out.astype(np.float32)})])
            import h5py
            with h5py.File(path, "a") as f:
                f["Functional.layer_norm.0.forward"].attrs["input.1"] = "(256,)"
                f["Functional.layer_norm.0.forward"].attrs["kwarg.eps"] = eps
        env = dict(os.environ, OMP_NUM_THREADS="2", TMPDIR=self.tmp, MSPROBE_REPLAY_KEEP="2")
        env.pop("XDG_RUNTIME_DIR", None)
        out = os.path.join(self.work, "out")
        p = subprocess.run([BIN, "compare", "-b", "gpu", "-c", "npu", "-o", out,
                            "--replay-budget", "40"], capture_output=True, text=True,
                           timeout=300, cwd=self.work, env=env)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = list(wb["summary"].iter_rows(values_only=True))
        row = dict(zip(rows[0], rows[1]))
        self.assertTrue((row["Replay"] or "").startswith("introduced"), row)
        want = np.linalg.norm(bad.astype(np.float32) - good) / np.linalg.norm(good)
        self.assertAlmostEqual(row["Replay Error"] / want, 1.0, delta=0.01)


if __name__ == "__main__":
    unittest.main()
