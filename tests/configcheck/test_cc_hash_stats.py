"""msprobe's SHA-256 and HMAC-SHA-256 (libcrypto) against hashlib and hmac,
and its tensor statistics against numpy for every dtype it reads."""
import hashlib
import hmac
import math
import os
import subprocess
import unittest

import numpy as np

HELPER = os.path.join(os.environ.get("MSPROBE_BUILD_DIR", ""), "tests", "configcheck", "cc_sha256_cli")


def helper(data, *args):
    return subprocess.run([HELPER] + list(args), input=data, capture_output=True,
                          check=True).stdout.decode().split()


class Sha256(unittest.TestCase):
    def test_matches_hashlib_at_block_boundaries(self):
        rng = np.random.default_rng(5)
        for n in (0, 1, 55, 56, 63, 64, 65, 119, 120, 127, 128, 999, 1000, 1001, 4096, (1 << 20) + 17):
            data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
            self.assertEqual(helper(data), [hashlib.sha256(data).hexdigest()], n)

    def test_hmac_matches_python_for_short_block_sized_and_long_keys(self):
        # keys of 64 bytes and longer are hashed first (RFC 2104)
        for key in ("k", "x" * 63, "y" * 64, "z" * 65, "salt-" * 40):
            for msg in (b"", b"TOKENIZERS_PARALLELISM=false", bytes(range(256)) * 3):
                want = hmac.new(key.encode(), msg, hashlib.sha256).hexdigest()
                self.assertEqual(helper(msg, "hmac", key), [want], (len(key), len(msg)))


def torch_like_stats(a):
    a = a.astype(np.float64)
    return a.max(), a.min(), a.mean(), math.sqrt((a * a).sum())


class TensorStats(unittest.TestCase):
    def check(self, arr, dtype, values=None):
        raw = np.ascontiguousarray(arr).tobytes()
        out = helper(raw, "stats", dtype)
        self.assertEqual(out[0], "1")
        self.assertEqual(out[5], hashlib.sha256(raw).hexdigest())
        want = torch_like_stats(arr if values is None else values)
        for got, w in zip(out[1:5], want):
            self.assertTrue(math.isclose(float(got), w, rel_tol=1e-12, abs_tol=1e-300), (dtype, got, w))

    def test_float_and_integer_dtypes_match_numpy(self):
        rng = np.random.default_rng(1)
        x = rng.standard_normal(1000)
        self.check(x.astype(np.float64), "torch.float64")
        self.check(x.astype(np.float32), "torch.float32")
        h = x.astype(np.float16)
        h[:3] = [6.0e-8, -6.0e-5, 65504.0]  # subnormal, subnormal, largest half
        self.check(h, "torch.float16")
        for t, name in ((np.int64, "torch.int64"), (np.int32, "torch.int32"), (np.int16, "torch.int16"),
                        (np.int8, "torch.int8"), (np.uint8, "torch.uint8")):
            self.check(rng.integers(np.iinfo(t).min // 2, np.iinfo(t).max // 2, 500).astype(t), name)
        self.check(rng.integers(0, 2, 77).astype(np.bool_), "torch.bool")

    def test_bfloat16_reads_as_the_top_half_of_float32(self):
        f = np.random.default_rng(2).standard_normal(300).astype(np.float32)
        bf = (f.view(np.uint32) >> 16).astype(np.uint16)
        values = (bf.astype(np.uint32) << 16).view(np.float32)
        self.check(bf, "torch.bfloat16", values)

    def test_nan_propagates_and_opposite_infinities_do_not_fake_it(self):
        a = np.array([1.0, np.nan, -2.0], dtype=np.float32)
        out = helper(a.tobytes(), "stats", "torch.float32")
        self.assertTrue(all(math.isnan(float(v)) for v in out[1:5]))
        b = np.array([np.inf, -np.inf, 3.0], dtype=np.float32)
        out = helper(b.tobytes(), "stats", "torch.float32")
        self.assertEqual([float(v) for v in out[1:3]], [math.inf, -math.inf])
        self.assertTrue(math.isnan(float(out[3])))  # inf + -inf: numpy's mean is nan too
        self.assertTrue(math.isnan(np.mean(b.astype(np.float64))))


if __name__ == "__main__":
    unittest.main()
