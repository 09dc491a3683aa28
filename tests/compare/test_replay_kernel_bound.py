"""A kernel is allowed what its precision allows (issue 38, item 2).

Two convolutions on identical inputs, written with h5py. The first is
computed by another correct float32 kernel than this CPU's: ATen's fallback
order (im2col, then one running float32 sum per output element, as numpy
does it here), whose error for 2,304 positive terms is about nine times what
oneDNN's blocked kernel makes, so the same-dtype replay is no bound for it.
Its error is still inside the accumulation bound every correct kernel meets,
sqrt(K) * u * ||conv(|x|, |w|)|| / ||conv(x, w)||, computed here in float64.
The second convolution rounds its weights to bfloat16 first: a kernel that
computes below float32, far outside that bound. compare must name the second
and not the first (before the bound it named the first)."""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
import msp_h5dump as H  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
U32 = 2.0 ** -24


def rel(a, ref):
    a, ref = torch.as_tensor(a).double(), torch.as_tensor(ref).double()
    return float((a - ref).norm() / ref.norm())


def running_sum_conv(x, w):
    """conv2d (no padding, stride 1) as im2col and a float32 running sum over
    the K = C_in*kh*kw terms of each output element, in order."""
    cols = F.unfold(x, w.shape[2:]).numpy()  # (N, K, L)
    wm = w.reshape(w.shape[0], -1).numpy()  # (C_out, K)
    acc = np.zeros((x.shape[0], w.shape[0], cols.shape[2]), np.float32)
    for k in range(wm.shape[1]):
        acc += wm[None, :, k:k + 1] * cols[:, None, k, :]
    side = x.shape[2] - w.shape[2] + 1
    return torch.from_numpy(acc.reshape(x.shape[0], w.shape[0], side, x.shape[3] - w.shape[3] + 1))


class KernelBound(unittest.TestCase):
    def test_another_correct_kernel_is_not_a_culprit_a_lower_precision_one_is(self):
        g = torch.Generator().manual_seed(38)
        x0 = torch.randn(2, 256, 8, 8, generator=g).abs()
        w0 = torch.randn(8, 256, 3, 3, generator=g).abs()
        x1 = torch.randn(2, 64, 8, 8, generator=g)
        w1 = torch.randn(8, 64, 3, 3, generator=g)
        exact0 = F.conv2d(x0.double(), w0.double())
        cpu0 = F.conv2d(x0, w0)  # what the replay's own float32 kernel makes
        other0 = running_sum_conv(x0, w0)
        k = 256 * 9
        bound = k ** 0.5 * U32 * float(F.conv2d(x0.double().abs(), w0.double().abs()).norm()
                                       / exact0.norm())
        e_other, e_cpu = rel(other0, exact0), rel(cpu0, exact0)
        # the case the same-dtype replay alone gets wrong, and the bound that settles it
        self.assertGreater(e_other, 4 * e_cpu, (e_other, e_cpu))
        self.assertGreater(e_other, 4 * U32)
        self.assertLess(e_other, bound, (e_other, bound))
        low1 = F.conv2d(x1, w1.to(torch.bfloat16).float())
        exact1 = F.conv2d(x1.double(), w1.double())
        bound1 = (64 * 9) ** 0.5 * U32 * float(
            F.conv2d(x1.double().abs(), w1.double().abs()).norm() / exact1.norm())
        self.assertGreater(rel(low1, exact1), 10 * bound1)

        with tempfile.TemporaryDirectory(prefix="msp-kbound-") as d:
            def recs(y0, y1):
                return [("Functional.conv2d.0.forward", 0,
                         {"input.0": x0, "input.1": w0, "output.0": y0}),
                        ("Functional.conv2d.1.forward", 1,
                         {"input.0": x1, "input.1": w1, "output.0": y1})]
            b, c = os.path.join(d, "b", "dump.h5"), os.path.join(d, "c", "dump.h5")
            H.write_dump(b, recs(cpu0, F.conv2d(x1, w1)), dump_mode="api")
            H.write_dump(c, recs(other0, low1), dump_mode="api")
            # --replay all: the first conv's error is under its float32 floor, so the
            # default would not even replay it; the bound is what is tested here
            p = subprocess.run([BIN, "compare", "-b", b, "-c", c, "-o", os.path.join(d, "out"),
                                "--replay", "all"], capture_output=True, text=True, timeout=600)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        self.assertIn("2 records replayed", p.stdout, p.stdout)
        first = [l for l in p.stdout.splitlines() if l.startswith("first introduced error")]
        self.assertEqual(len(first), 1, p.stdout)
        self.assertIn("Functional.conv2d.1.forward", first[0], p.stdout)
        suspects = [l for l in p.stdout.splitlines() if ". step 0 rank 0 " in l]
        self.assertTrue(suspects and "conv2d.1.forward" in suspects[0], p.stdout)
        self.assertFalse(any("conv2d.0.forward" in l for l in suspects), p.stdout)


if __name__ == "__main__":
    unittest.main()
