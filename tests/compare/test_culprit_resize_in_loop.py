"""A resize planted in the training loop before the model is named in step 0
(issue 38, item 7).

Field case: a resnet18 script resized each batch with F.interpolate inside
the loop, before model(x), and the planted bug was there. Step 0 had no
record of the resize (every call before the model's first forward was
dropped as data preparation), so compare named some later op. Here both runs
train resnet18 with SGD under the real shim (resize_in_loop_train.py); the
compare side resizes with align_corners=True. The plant is real: the two
resizes of the first batch differ far beyond float32 rounding (computed with
torch below). Compare must say the error was first introduced by
Functional.interpolate.0.forward of step 0."""
import os
import subprocess
import tempfile
import unittest

import msp_shim

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("MSPROBE_BIN", "msprobe")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")


class ResizeInTheLoop(unittest.TestCase):
    def dump(self, work, name, align):
        return msp_shim.dump(work, name, os.path.join(HERE, "resize_in_loop_train.py"),
                             {"RESIZE_MODE": "bilinear", "RESIZE_ALIGN": "1" if align else "0"})

    @unittest.skipUnless(PRELOAD, "the shim is not built")
    def test_align_corners_planted_before_the_model_is_named(self):
        import torch
        import torch.nn.functional as F
        x = torch.rand(2, 3, 32, 32, dtype=torch.float64)
        a = F.interpolate(x, size=(64, 64), mode="bilinear", align_corners=False)
        b = F.interpolate(x, size=(64, 64), mode="bilinear", align_corners=True)
        self.assertGreater(float((a - b).norm() / a.norm()), 1e-3)  # float32: 6e-8
        with tempfile.TemporaryDirectory(prefix="msp-resize-loop-") as work:
            bench, cmp = self.dump(work, "bench", False), self.dump(work, "cmp", True)
            p = subprocess.run([BIN, "compare", "-b", bench, "-c", cmp, "-o",
                                os.path.join(work, "out")], capture_output=True, text=True,
                               timeout=600)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        first = [l for l in p.stdout.splitlines() if l.startswith("first introduced error")]
        self.assertTrue(first, p.stdout)
        self.assertIn("step 0 rank 0 Functional.interpolate.0.forward", first[0], p.stdout)

if __name__ == "__main__":
    unittest.main()
