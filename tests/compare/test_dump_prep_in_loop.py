"""Data preparation is told by where a call is made (issue 38, item 7).

Field case: a resnet18 script resized each batch with F.interpolate inside
the training step, before model(x). Every call before the model's first
forward used to be dropped as data preparation, so step 0 had no
Functional.interpolate.0.forward while step 1 had it, and compare could not
name the resize when it was the planted bug. Now the calls in the loop body
before the model (a flip there, a resize in a function it calls) are dumped
in step 0 as in step 1, under the same names, while the normalisation of the
whole dataset at the top of the script is in neither step. The same holds
when the loop body is itself a function the loop calls, and when places in
the code are told by lines (a Python without frame offsets). Real training under
the real shim (resize_in_loop_train.py), read back with h5py; the values
expected are computed here with torch. With gradient accumulation the model
runs in an inner loop over micro-batches while the batch is prepared and the
optimizer steps in the outer one: the outer loop is the step's, and its body
is dumped in step 0 too."""
import json
import os
import subprocess
import tempfile
import unittest

import h5py
import numpy as np
from msp_h5dump import stats_rows

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
TRAIN = os.path.join(HERE, "resize_in_loop_train.py")


def index_rows(path):
    """{record: {"order": n, role: (shape, mean, min, max)}} of a dump.h5."""
    recs = {}
    with h5py.File(path, "r") as f:
        for row in stats_rows(f):  # /index, or a statistics dump's /stats
            rec = recs.setdefault(row["record"], {"order": row["order"]})
            role = row["role"]
            if role:
                rec[role] = (tuple(int(d) for d in row["shape"]), float(row["mean"]),
                             float(row["min"]), float(row["max"]))
    return recs


def first_batch_resized():
    """The loop's first batch after the flip and the resize, recomputed the
    way the script makes it (same seed, same draws, no shuffling)."""
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    images = torch.rand(4, 3, 32, 32)
    torch.randint(0, 10, (4,))
    images = (images - 0.5) / 0.25
    x = torch.flip(images[0:2], [3])
    return x, F.interpolate(x, size=(64, 64), mode="bilinear", align_corners=False)


@unittest.skipUnless(PRELOAD, "the shim is not built")
class PrepInTheLoop(unittest.TestCase):
    def dump(self, work, step_fn, env_extra=None):
        env_extra = dict(env_extra or {})
        root = os.path.join(work, "dump")
        cfg = os.path.join(work, "msprobe.json")
        with open(cfg, "w") as f:
            json.dump({"dump": {"common_dump_settings": {
                "dump_mode": "api", "dump_path": root, "dump_iter": "all",
                "task": "statistics"}}}, f)
        env = dict(os.environ, OMP_NUM_THREADS="1", STEP_FN="1" if step_fn else "0")
        env.update(env_extra)
        plain = subprocess.run([PYTHON, TRAIN], cwd=work, env=env, capture_output=True,
                               text=True, timeout=600)
        env.update(LD_PRELOAD=PRELOAD, MSPROBE_PATH=cfg)
        p = subprocess.run([PYTHON, TRAIN], cwd=work, env=env, capture_output=True, text=True,
                           timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual(p.stdout, plain.stdout, "the shim changed training")
        return p, [index_rows(os.path.join(root, "step%d" % s, "rank0", "dump.h5"))
                   for s in (0, 1)]

    def check(self, step_fn, env_extra=None):
        with tempfile.TemporaryDirectory(prefix="msp-prep-loop-") as work:
            p, steps = self.dump(work, step_fn, env_extra)
        x, resized = first_batch_resized()
        for step, recs in enumerate(steps):
            for name in ("Torch.flip.0.forward", "Functional.interpolate.0.forward",
                         "Functional.conv2d.0.forward"):
                self.assertTrue(name in recs, "step %d lacks %s: %s" % (step, name, sorted(recs)[:8]))
            # the flip and the resize come before the model's first op, in that order
            self.assertLess(recs["Torch.flip.0.forward"]["order"],
                            recs["Functional.interpolate.0.forward"]["order"])
            self.assertLess(recs["Functional.interpolate.0.forward"]["order"],
                            recs["Functional.conv2d.0.forward"]["order"])
            interp = recs["Functional.interpolate.0.forward"]
            self.assertEqual(interp["input.0"][0], (2, 3, 32, 32))
            self.assertEqual(interp["output.0"][0], (2, 3, 64, 64))
            # the normalisation of the whole set (4 images) is in no step
            for name, rec in recs.items():
                self.assertFalse(name.startswith(("Tensor.__sub__", "Tensor.__truediv__")),
                                 "step %d: %s" % (step, name))
                for role, v in rec.items():
                    if role != "order":
                        self.assertNotEqual(v[0][:1], (4,), "step %d: %s %s" % (step, name, role))
        # step 0's resize is the first batch's, values and all
        got = steps[0]["Functional.interpolate.0.forward"]
        for role, t in (("input.0", x), ("output.0", resized)):
            want = (float(t.double().mean()), float(t.min()), float(t.max()))
            np.testing.assert_allclose(got[role][1:], want, rtol=1e-5, atol=1e-6, err_msg=role)
        # the subtraction and the division over the whole set: two calls dropped
        self.assertIn("msprobe: 2 calls made before the model's first forward are data "
                      "preparation and are not dumped", p.stderr)

    def test_loop_body_before_the_model_is_dumped_in_step_0(self):
        self.check(step_fn=False)

    def test_a_step_function_called_from_the_loop_counts_as_its_body(self):
        self.check(step_fn=True)

    def test_gradient_accumulation_keeps_the_outer_loop_body(self):
        # the micro-batches' loop runs the model, the outer loop prepares the
        # batch and takes the optimizer's step: the outer body is the step's
        self.check(step_fn=False, env_extra={"GRAD_ACCUM": "1"})

    def test_gradient_accumulation_by_lines(self):
        self.check(step_fn=False, env_extra={"GRAD_ACCUM": "1", "MSPROBE_TEST_STACK_LINES": "1"})

    def test_by_lines_as_on_a_python_without_frame_offsets(self):
        # CPython < 3.11 has no PyFrame_GetLasti: places are lines there
        self.check(step_fn=False, env_extra={"MSPROBE_TEST_STACK_LINES": "1"})


if __name__ == "__main__":
    unittest.main()
