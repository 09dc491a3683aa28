"""half/bfloat16 conversions: every 16-bit pattern decoded, and doubles
rounded to nearest even, against numpy and an exact rational reference;
msp_crc32 against zlib for every small length and alignment."""
import math
import os
import subprocess
import sys
import tempfile
import unittest
import zlib
from fractions import Fraction

import numpy as np

WRITE_SAMPLE = None


def round_exact(x, ebits, mbits):
    """x rounded to the binary format (1 sign, ebits, mbits), nearest even,
    computed with exact rationals; returns a Python float (inf on overflow)."""
    if math.isnan(x):
        return math.nan
    if math.isinf(x) or x == 0:
        return x
    bias = (1 << (ebits - 1)) - 1
    emin = 1 - bias
    a = Fraction(abs(x))
    e = math.frexp(abs(x))[1] - 1  # exponent of the leading bit
    quantum = Fraction(2) ** (max(e, emin) - mbits)
    q = a / quantum
    n = q.numerator // q.denominator
    rem = q - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    v = n * quantum
    max_finite = (2 - Fraction(1, 1 << mbits)) * Fraction(2) ** bias
    r = math.inf if v > max_finite else float(v)
    return math.copysign(r, x)


def inputs():
    rng = np.random.default_rng(20240611)
    f32 = rng.standard_normal(4000).astype(np.float32) * np.float32(1000)
    # exact ties for bf16 (low 16 bits 0x8000) and half, both parities
    ties = (rng.integers(0x00800000, 0x7F000000, 2000, dtype=np.uint32) & np.uint32(0xFFFF0000)
            | np.uint32(0x8000)).view(np.float32)
    wide = rng.standard_normal(3000) * 10.0 ** rng.integers(-12, 12, 3000)
    # doubles just off a bf16 tie: rounding through float32 first would be wrong
    off_tie = np.array([1 + 2**-8 + 2**-30, 1 + 2**-8 - 2**-30, 1 + 3 * 2**-8 + 2**-40,
                        1 + 2**-11 + 2**-40, 1 + 2**-11 - 2**-40], np.float64)
    edges = np.array([0.0, -0.0, 65504, 65519.99, 65520, 65536, -65520, 2**-24, 2**-25,
                      2**-25 * 1.0000001, 3 * 2**-26, 2**-14, 2**-14 - 2**-25, 1e-30, 5e-324,
                      3.3895313892515355e38, 3.3961775292304854e38, 3.4028234663852886e38,
                      1e39, -1e39, math.inf, -math.inf], np.float64)
    return np.concatenate([f32.astype(np.float64), ties.astype(np.float64), wide, off_tie,
                           edges])


class HalfBf16Conversions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.x = inputs()
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "in.f64"), os.path.join(tmp, "out.bin")
            cls.x.astype("<f8").tofile(src)
            subprocess.run([WRITE_SAMPLE, "--convert", src, dst], check=True)
            with open(dst, "rb") as fh:
                raw = fh.read()
        n = len(cls.x)
        pairs = np.frombuffer(raw[:4 * n], "<u2").reshape(n, 2)
        cls.half_bits, cls.bf16_bits = pairs[:, 0].copy(), pairs[:, 1].copy()
        dec = np.frombuffer(raw[4 * n:], "<f8").reshape(65536, 2)
        cls.half_dec, cls.bf16_dec = dec[:, 0], dec[:, 1]

    def test_every_half_pattern_decodes_like_numpy(self):
        exp = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
        np.testing.assert_array_equal(self.half_dec, exp.astype(np.float64))

    def test_every_bfloat16_pattern_decodes_like_float32_high_half(self):
        exp = (np.arange(65536, dtype=np.uint32) << np.uint32(16)).view(np.float32)
        with np.errstate(invalid="ignore"):  # signalling NaN patterns
            np.testing.assert_array_equal(self.bf16_dec, exp.astype(np.float64))

    def test_double_to_half_rounds_to_nearest_even_like_numpy(self):
        with np.errstate(over="ignore"):
            exp = self.x.astype(np.float16)
        got = self.half_bits.view(np.float16)
        np.testing.assert_array_equal(got, exp)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(exp))

    def test_double_to_half_matches_exact_rounding(self):
        got = self.half_bits.view(np.float16).astype(np.float64)
        for x, g in zip(self.x, got):
            self.assertEqual(g, round_exact(float(x), 5, 10), repr(x))

    def test_double_to_bfloat16_matches_exact_rounding(self):
        got = (self.bf16_bits.astype(np.uint32) << np.uint32(16)).view(np.float32)
        for x, g in zip(self.x, got.astype(np.float64)):
            e = round_exact(float(x), 8, 7)
            self.assertEqual(g, e, repr(x))
            self.assertEqual(math.copysign(1, g), math.copysign(1, e), repr(x))

    def test_nan_stays_nan(self):
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "in.f64"), os.path.join(tmp, "out.bin")
            np.array([math.nan, -math.nan], "<f8").tofile(src)
            subprocess.run([WRITE_SAMPLE, "--convert", src, dst], check=True)
            with open(dst, "rb") as fh:
                pairs = np.frombuffer(fh.read()[:8], "<u2").reshape(2, 2)
        self.assertTrue(np.isnan(pairs[:, 0].view(np.float16)).all())
        self.assertTrue(np.isnan((pairs[:, 1].astype(np.uint32) << 16).view(np.float32)).all())


class Crc32MatchesZlib(unittest.TestCase):
    def test_every_length_and_alignment(self):
        self.check(os.environ)

    def test_every_length_and_alignment_portable_zlib_path(self):
        self.check({**os.environ, "MSPROBE_FORMAT_PORTABLE": "1"})

    def test_every_length_and_alignment_128_bit_folding(self):
        # where the CPU has AVX-512 VPCLMULQDQ the default run takes the
        # 512-bit folding from 512 bytes on; this keeps the 128-bit one checked
        self.check({**os.environ, "MSPROBE_FORMAT_NO_AVX512": "1"})

    def check(self, env):
        data = np.random.default_rng(3).bytes(2100)  # up to 7 rounds of 256 bytes
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "in.bin")
            with open(path, "wb") as fh:
                fh.write(data)
            out = subprocess.run([WRITE_SAMPLE, "--crc", path], check=True, env=env,
                                 capture_output=True, text=True).stdout.split("\n")
        rows = [tuple(int(v) for v in l.split()) for l in out if l]
        self.assertEqual(len(rows), 4 * (len(data) - 3))
        for off, n, crc in rows:
            self.assertEqual(crc, zlib.crc32(data[off:off + n], n), (off, n))


if __name__ == "__main__":
    WRITE_SAMPLE = sys.argv.pop(1)
    unittest.main()
