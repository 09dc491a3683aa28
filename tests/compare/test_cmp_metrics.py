"""Tensor metrics of msp_compare_run against numpy, for dumps written with h5py alone."""
import math
import os
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmp_h5 as H  # noqa: E402

TOL = {"float32": (1.3e-6, 1e-5), "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5),
       "float64": (1e-7, 1e-7)}
COARSE = ["bfloat16", "float16", "float32", "float64"]


def tol_of(a, b):
    for k in COARSE:
        if k in (a, b):
            return TOL[k]
    return (0.0, 0.0)


class MetricsCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.rng = np.random.default_rng(1234)

    def tearDown(self):
        self.tmp.cleanup()

    def pair(self, bench_tensors, cmp_tensors, name="Torch.add.0.forward", *args):
        b = os.path.join(self.d, "b.h5")
        c = os.path.join(self.d, "c.h5")
        H.write_dump(b, [(name, bench_tensors)])
        H.write_dump(c, [(name, cmp_tensors)])
        rows, summary, _ = H.run_driver(b, c, *args)
        return {r["npu_name"] or r["bench_name"]: r for r in rows}, summary

    def assertClose(self, got, want, rel=1e-12, what=""):
        if want is None or (isinstance(want, float) and math.isnan(want)):
            self.assertIsNone(got, what)
            return
        self.assertIsNotNone(got, what)
        if isinstance(got, str):  # the driver writes infinities as "inf" / "-inf"
            got = float(got)
        if math.isinf(want):
            self.assertEqual(got, want, what)
            return
        self.assertTrue(math.isclose(got, want, rel_tol=rel, abs_tol=1e-300),
                        f"{what}: got {got!r}, want {want!r}")

    def check_row(self, row, n, b):
        ref = H.ref_metrics(n, b)
        for k in ("cosine", "euc_dist", "max_abs_err", "max_rel_err"):
            self.assertClose(row[k], ref[k], what=k)
        # shares of elements are exact counts
        size = H.as_f64(b).size
        self.assertEqual(round(row["one_thousandth_ratio"] * size), round(ref["one_thousandth_ratio"] * size))
        self.assertEqual(round(row["five_thousandths_ratio"] * size), round(ref["five_thousandths_ratio"] * size))
        for side, t in (("npu", n), ("bench", b)):
            st = H.torch_stats(t)
            self.assertClose(row[f"{side}_max"], st["max"], what=f"{side}_max")
            self.assertClose(row[f"{side}_min"], st["min"], what=f"{side}_min")
            self.assertClose(row[f"{side}_mean"], st["mean"], rel=1e-9, what=f"{side}_mean")
            self.assertClose(row[f"{side}_norm"], st["norm"], rel=1e-9, what=f"{side}_norm")
        rtol, atol = tol_of(H.dtype_key(n), H.dtype_key(b))
        self.assertEqual(row["agree"], int(H.allclose(n, b, rtol, atol)))

    def test_float32_pair_matches_numpy(self):
        b = self.rng.standard_normal((37, 41)).astype(np.float32)
        n = (b + self.rng.standard_normal(b.shape).astype(np.float32) * 1e-3).astype(np.float32)
        n[0, 0] = b[0, 0]
        rows, _ = self.pair({"input.0": b, "output.0": b}, {"input.0": n, "output.0": b})
        self.check_row(rows["Torch.add.0.forward.input.0"], n, b)
        out = rows["Torch.add.0.forward.output.0"]
        self.assertEqual(out["max_abs_err"], 0.0)
        self.assertEqual(out["agree"], 1)
        self.assertEqual(out["npu_dtype"], "torch.float32")
        self.assertEqual(out["npu_shape"], "[37, 41]")

    def test_float16_and_bfloat16_against_float32(self):
        b = self.rng.standard_normal(5000).astype(np.float32)
        h = b.astype(np.float16)
        bf = H.BF16(b)
        rows, _ = self.pair({"input.0": b, "input.1": b}, {"input.0": h, "input.1": bf})
        self.check_row(rows["Torch.add.0.forward.input.0"], h, b)
        self.check_row(rows["Torch.add.0.forward.input.1"], bf, b)
        self.assertEqual(rows["Torch.add.0.forward.input.1"]["npu_dtype"], "torch.bfloat16")
        # rounding to the coarser dtype stays inside its allclose tolerance
        self.assertEqual(rows["Torch.add.0.forward.input.0"]["agree"], 1)
        self.assertEqual(rows["Torch.add.0.forward.input.1"]["agree"], 1)

    def test_bfloat16_pair_tolerance_boundary(self):
        b = H.BF16(np.linspace(1, 2, 256, dtype=np.float32))
        # 2 ulps of bf16 near 1..2 is 2^-6 = 1.56e-2 relative: within 1.6e-2
        bits_ok = b.bits.copy()
        bits_ok[10] += 2
        far = b.bits.copy()
        far[20] += 5
        ok, bad = H.BF16(np.zeros(1)), H.BF16(np.zeros(1))
        ok.bits, ok.shape = bits_ok, bits_ok.shape
        bad.bits, bad.shape = far, far.shape
        rows, _ = self.pair({"input.0": b, "input.1": b}, {"input.0": ok, "input.1": bad})
        self.check_row(rows["Torch.add.0.forward.input.0"], ok, b)
        self.check_row(rows["Torch.add.0.forward.input.1"], bad, b)
        self.assertEqual(rows["Torch.add.0.forward.input.1"]["agree"], 0)

    def test_float16_pair(self):
        b = self.rng.standard_normal(3000).astype(np.float16)
        n = (b.astype(np.float32) * 1.002).astype(np.float16)
        n[5] = np.float16(6e-6)  # a subnormal half
        b[6] = np.float16(-3e-7)
        rows, _ = self.pair({"input.0": b}, {"input.0": n})
        self.check_row(rows["Torch.add.0.forward.input.0"], n, b)

    def test_integers_and_bool_compare_exactly(self):
        b = np.arange(-50, 50, dtype=np.int64)
        n = b.copy()
        n[3] += 1
        bb = np.array([True, False, True])
        rows, _ = self.pair({"input.0": b, "input.1": bb, "input.2": b.astype(np.int32)},
                            {"input.0": n, "input.1": bb, "input.2": b.astype(np.int32)})
        self.check_row(rows["Torch.add.0.forward.input.0"], n, b)
        self.assertEqual(rows["Torch.add.0.forward.input.0"]["agree"], 0)
        self.assertEqual(rows["Torch.add.0.forward.input.1"]["agree"], 1)
        self.assertEqual(rows["Torch.add.0.forward.input.2"]["max_abs_err"], 0.0)

    def test_zero_norms(self):
        z = np.zeros(10, dtype=np.float32)
        x = np.arange(10, dtype=np.float32) - 3
        rows, _ = self.pair({"input.0": z, "input.1": x, "input.2": z},
                            {"input.0": z, "input.1": z, "input.2": x})
        both = rows["Torch.add.0.forward.input.0"]
        self.assertEqual(both["cosine"], 1.0)
        self.assertEqual(both["verdict"], "Yes")
        npu_zero = rows["Torch.add.0.forward.input.1"]
        self.assertIsNone(npu_zero["cosine"])
        self.assertIn("NPU", npu_zero["err_message"])
        self.assertEqual(npu_zero["verdict"], "No")
        self.check_row(npu_zero, z, x)
        bench_zero = rows["Torch.add.0.forward.input.2"]
        self.assertIsNone(bench_zero["cosine"])
        self.assertIn("bench", bench_zero["err_message"])
        # b == 0 everywhere: eps added to both sides before |n-b|/|b|
        self.check_row(bench_zero, x, z)
        eps = np.finfo(np.float32).eps if x.dtype == np.float32 else np.finfo(np.float64).eps
        self.assertClose(bench_zero["max_rel_err"], 6.0 / eps)

    def test_nan_inf_same_places_are_zeroed(self):
        b = self.rng.standard_normal(100).astype(np.float32)
        n = b * np.float32(1.01)
        for a in (b, n):
            a[3] = np.nan
            a[7] = np.inf
        rows, _ = self.pair({"output.0": b}, {"output.0": n})
        r = rows["Torch.add.0.forward.output.0"]
        self.check_row(r, n, b)
        self.assertIsNone(r["npu_max"])  # torch: a NaN makes max NaN
        self.assertIn("same positions", r["err_message"])
        self.assertEqual(r["highlight"], "red")  # NaN/Inf in an output

    def test_nan_inf_different_places_make_metrics_na(self):
        b = self.rng.standard_normal(100).astype(np.float32)
        n = b.copy()
        b[3] = np.nan
        n[4] = np.nan
        b2 = b.copy()
        n2 = b.copy()
        n2[3] = 1.0
        b2[50] = np.inf
        n2[50] = -np.inf
        b3 = np.where(np.isnan(b), 0, b).astype(np.float32)
        n3 = b3.copy()
        b3[9] = np.inf
        n3[9] = -np.inf
        rows, _ = self.pair({"input.0": b, "input.1": b2, "input.2": b3},
                            {"input.0": n, "input.1": n2, "input.2": n3})
        for role in ("input.0", "input.1"):
            r = rows["Torch.add.0.forward." + role]
            for k in ("cosine", "euc_dist", "max_abs_err", "max_rel_err", "one_thousandth_ratio",
                      "five_thousandths_ratio"):
                self.assertIsNone(r[k], f"{role} {k}")
            self.assertIn("different positions", r["err_message"])
            self.assertEqual(r["verdict"], "No")
            self.assertEqual(r["agree"], 0)
        # +Inf against -Inf: msprobe zeroes both (metrics computed) but they do not agree
        r = rows["Torch.add.0.forward.input.2"]
        self.assertEqual(r["max_abs_err"], 0.0)
        self.assertEqual(r["agree"], 0)

    def test_zero_dim_and_one_element(self):
        rows, _ = self.pair({"input.0": np.array(2.0, dtype=np.float32),
                             "input.1": np.array([4.0], dtype=np.float32),
                             "input.2": np.array([0.0], dtype=np.float32)},
                            {"input.0": np.array(2.5, dtype=np.float32),
                             "input.1": np.array([9.0], dtype=np.float32),
                             "input.2": np.array([0.5], dtype=np.float32)})
        zd = rows["Torch.add.0.forward.input.0"]
        self.assertEqual(zd["npu_shape"], "[]")
        self.assertIsNone(zd["cosine"])
        self.assertEqual(zd["max_abs_err"], 0.5)
        self.assertEqual(zd["max_rel_err"], 0.25)
        self.assertEqual(zd["euc_dist"], 0.5)
        self.assertEqual(zd["verdict"], "Yes")  # judged on MaxAbsErr alone
        one = rows["Torch.add.0.forward.input.1"]
        self.assertIsNone(one["cosine"])
        self.assertEqual(one["max_abs_err"], 5.0)
        self.assertEqual(one["verdict"], "No")  # MaxAbsErr > 1
        zero_b = rows["Torch.add.0.forward.input.2"]
        # msprobe 26: float32 data -> float32 eps at bench zeros
        self.assertClose(zero_b["max_rel_err"], 0.5 / np.finfo(np.float32).eps)

    def test_inf_sign_mismatch_is_named(self):
        rows, _ = self.pair({"input.0": np.array([np.inf, 1.0, 2.0], dtype=np.float32)},
                            {"input.0": np.array([-np.inf, 1.0, 2.0], dtype=np.float32)})
        r = rows["Torch.add.0.forward.input.0"]
        self.assertEqual(r["err_message"],
                         "+Inf against -Inf at the same position (zeroed for the metrics)")
        self.assertEqual(r["agree"], 0)

    def test_empty_tensors(self):
        e = np.zeros((0, 4), dtype=np.float32)
        rows, _ = self.pair({"input.0": e}, {"input.0": e})
        r = rows["Torch.add.0.forward.input.0"]
        self.assertEqual(r["npu_shape"], "[0, 4]")
        for k in ("cosine", "euc_dist", "max_abs_err", "max_rel_err", "npu_max", "bench_mean"):
            self.assertIsNone(r[k])
        self.assertEqual(r["npu_norm"], 0.0)
        self.assertEqual(r["err_message"], "empty tensor")
        self.assertEqual(r["verdict"], "Yes")
        self.assertEqual(r["agree"], 1)

    def test_verdict_thresholds(self):
        base = np.ones(1000, dtype=np.float64)
        base[::2] = -1
        # cosine 0.98 (below 0.99) with max abs err 0.2 (> 0.001): No
        a = base.copy()
        a[:10] = -a[:10]
        # cosine > 0.99 and max abs 0.5: Yes by default
        c = base.copy()
        c[0] += 0.5
        # max abs err 2 > 1: No whatever the cosine
        e = base.copy()
        e[0] += 2
        rows, _ = self.pair({"input.0": base, "input.1": base, "input.2": base},
                            {"input.0": a, "input.1": c, "input.2": e})
        ref_cos = H.ref_metrics(a, base)["cosine"]
        self.assertLess(ref_cos, 0.99)
        self.assertEqual(rows["Torch.add.0.forward.input.0"]["verdict"], "No")
        self.assertEqual(rows["Torch.add.0.forward.input.1"]["verdict"], "Yes")
        self.assertEqual(rows["Torch.add.0.forward.input.2"]["verdict"], "No")
        # thresholds are overridable
        rows, _ = self.pair({"input.0": base, "input.1": base, "input.2": base},
                            {"input.0": a, "input.1": c, "input.2": e}, "Torch.add.0.forward",
                            "--cos-warn", "0.9", "--abs-fail", "3", "--abs-warn", "0.6")
        self.assertEqual(rows["Torch.add.0.forward.input.0"]["verdict"], "Yes")
        self.assertEqual(rows["Torch.add.0.forward.input.2"]["verdict"], "Yes")
        rows, _ = self.pair({"input.0": base}, {"input.0": c}, "Torch.add.0.forward",
                            "--abs-fail", "0.4")
        self.assertEqual(rows["Torch.add.0.forward.input.0"]["verdict"], "No")

    def test_side_statistics_computed_when_attributes_are_absent(self):
        b = self.rng.standard_normal(30_000).astype(np.float32)
        n = (b * np.float32(0.999)).astype(np.float32)
        n2, b2 = n.copy(), b.copy()
        n2[100] = b2[100] = np.inf
        n2[200] = b2[200] = np.nan
        bp, cp = os.path.join(self.d, "b.h5"), os.path.join(self.d, "c.h5")
        H.write_dump(bp, [("Torch.add.0.forward", {"input.0": b, "input.1": b2})], with_stats=False)
        H.write_dump(cp, [("Torch.add.0.forward", {"input.0": n, "input.1": n2})], with_stats=False)
        rows, _, _ = H.run_driver(bp, cp, "--chunk", "65536")
        self.check_row(rows[0], n, b)
        self.check_row(rows[1], n2, b2)
        self.assertIsNone(rows[1]["npu_max"])  # a NaN makes the torch max NaN
        self.assertEqual(rows[1]["highlight"], "none")  # an input, not an output

    def test_datasets_without_offset_go_through_the_reader(self):
        # gzip-chunked and big-endian data have no plain offset: read whole via
        # msp_dump_read_tensor, compared over the same units as pread'd data
        b = self.rng.standard_normal(40_000).astype(np.float32)
        n = (b * np.float32(1.001)).astype(np.float32)
        n[7] = b[7] = np.inf
        rows, _ = self.pair({"input.0": H.Stored(b, gzip=True), "input.1": b,
                             "input.2": H.Stored(b, big_endian=True)},
                            {"input.0": n, "input.1": H.Stored(n, gzip=True),
                             "input.2": H.Stored(n, big_endian=True)},
                            "Torch.add.0.forward", "--chunk", "65536")
        for role in ("input.0", "input.1", "input.2"):
            self.check_row(rows["Torch.add.0.forward." + role], n, b)
        self.assertEqual(rows["Torch.add.0.forward.input.0"]["cosine"],
                         rows["Torch.add.0.forward.input.1"]["cosine"])

    def test_float32_kernels_agree_on_tails_zeros_and_thresholds(self):
        # float32 pairs have a hand-written AVX-512 loop (16 elements a round,
        # masked tails, counts from compare masks) beside the compiler's loop
        # (MSPROBE_COMPARE_NO_AVX512=1). Both against numpy: the per-element
        # arithmetic is the same, so max errors and counts are exact, for
        # every tail length, bench zeros (the eps rule) and relative errors
        # sitting on the 0.001 / 0.005 thresholds; with the side statistics
        # from the attributes and computed (no attributes).
        tensors_b, tensors_n = {}, {}
        for k, size in enumerate((2, 7, 15, 16, 17, 31, 4095, 4096, 4097, 12_345)):
            b = self.rng.standard_normal(size).astype(np.float32)
            b[self.rng.random(size) < 0.3] = 0
            n = (b * (1 + self.rng.standard_normal(size) * 3e-3)).astype(np.float32)
            edge = self.rng.random(size)
            n[edge < 0.1] = (b * np.float32(1.001))[edge < 0.1]
            n[(edge >= 0.1) & (edge < 0.2)] = (b * np.float32(1.005))[(edge >= 0.1) & (edge < 0.2)]
            zeros = b == 0
            n[zeros] = (self.rng.standard_normal(int(zeros.sum())) * 1e-7).astype(np.float32)
            tensors_b["input.%d" % k], tensors_n["input.%d" % k] = b, n
        bp, cp = os.path.join(self.d, "b.h5"), os.path.join(self.d, "c.h5")
        for with_stats in (True, False):
            H.write_dump(bp, [("Torch.add.0.forward", tensors_b)], with_stats=with_stats)
            H.write_dump(cp, [("Torch.add.0.forward", tensors_n)], with_stats=with_stats)
            self.kernels_agree(bp, cp, tensors_n, tensors_b)

    def kernels_agree(self, bp, cp, tensors_n, tensors_b):
        """compare of bp against cp through the AVX-512 loop and the compiler's
        (MSPROBE_COMPARE_NO_AVX512=1): every row against numpy, max errors
        exact (rows whose NPU tensor holds a NaN but for that: msprobe's
        zeroing, checked elsewhere), and the two loops' rows alike"""
        got = []
        for generic in ("0", "1"):
            os.environ["MSPROBE_COMPARE_NO_AVX512"] = generic
            try:
                rows, _, _ = H.run_driver(bp, cp, "--chunk", "65536")
            finally:
                del os.environ["MSPROBE_COMPARE_NO_AVX512"]
            self.assertEqual(len(rows), len(tensors_b))
            got.append(rows)
            for row in rows:
                role = row["npu_name"].rsplit(".", 2)[-2] + "." + row["npu_name"].rsplit(".", 1)[-1]
                n, b = tensors_n[role], tensors_b[role]
                if np.isnan(H.as_f64(n)).any():
                    continue
                self.check_row(row, n, b)
                ref = H.ref_metrics(n, b)
                self.assertEqual(row["max_abs_err"], ref["max_abs_err"], role)
                self.assertEqual(row["max_rel_err"], ref["max_rel_err"], role)
        for r_fast, r_generic in zip(*got):
            for k in ("max_abs_err", "max_rel_err", "one_thousandth_ratio",
                      "five_thousandths_ratio", "agree", "npu_max", "npu_min", "bench_max",
                      "bench_min"):
                self.assertEqual(r_fast[k], r_generic[k], (r_fast["npu_name"], k))
            for k in ("cosine", "euc_dist", "npu_mean", "npu_norm"):
                self.assertClose(r_fast[k], r_generic[k], rel=1e-12, what=k)

    def test_low_precision_kernels_agree_with_numpy(self):
        # bfloat16 and float16 on either side (against float32, or each
        # other) take the AVX-512 loop too, each side's elements made float32
        # first: against numpy and against the compiler's loop
        # (MSPROBE_COMPARE_NO_AVX512=1), max errors and the threshold counts
        # exact, for every tail length, bench zeros and errors on the
        # thresholds; NaN in a tensor sends its block to the slow loop
        kinds = {"f32": lambda v: v.astype(np.float32), "bf16": H.BF16,
                 "f16": lambda v: v.astype(np.float16)}
        pairs = [("bf16", "f32"), ("f32", "bf16"), ("f16", "bf16"), ("bf16", "bf16"),
                 ("f16", "f16")]
        tensors_b, tensors_n = {}, {}
        for k, size in enumerate((3, 15, 16, 17, 33, 1024, 4097)):
            for j, (nk, bk) in enumerate(pairs):
                b = self.rng.standard_normal(size).astype(np.float32)
                b[self.rng.random(size) < 0.25] = 0
                n = b * (1 + self.rng.standard_normal(size) * 4e-3)
                edge = self.rng.random(size)
                n[edge < 0.1] = b[edge < 0.1] * 1.001
                n[(edge >= 0.1) & (edge < 0.2)] = b[(edge >= 0.1) & (edge < 0.2)] * 1.005
                zeros = b == 0
                n[zeros] = self.rng.standard_normal(int(zeros.sum())) * 1e-3
                if k == 4 and j == 0:
                    n[5] = b[5] = np.nan
                role = "input.%d" % (k * len(pairs) + j)
                tensors_b[role], tensors_n[role] = kinds[bk](b), kinds[nk](n)
        bp, cp = os.path.join(self.d, "b.h5"), os.path.join(self.d, "c.h5")
        H.write_dump(bp, [("Torch.add.0.forward", tensors_b)], with_stats=False)
        H.write_dump(cp, [("Torch.add.0.forward", tensors_n)], with_stats=False)
        self.kernels_agree(bp, cp, tensors_n, tensors_b)

    def test_quotients_on_the_thresholds_and_the_largest_are_exact(self):
        # Exact ties (1001 against 1000 is 0.001 to the last bit, 1005
        # against 1000 0.005: below neither), quotients one float32 step to
        # each side of them, and the largest quotient late in a tensor of
        # 4,100 elements, in float32 and float16 against float32 (both
        # through the AVX-512 loop where the CPU has it): counts and max_rel
        # as numpy's. A loop that held |n-b| against a product of |b| instead
        # of dividing would count the ties.
        base = np.full(4100, 1000.0, dtype=np.float32)
        n = base + self.rng.uniform(-0.5, 0.5, base.size).astype(np.float32)
        n[:5] = [1001, 1005, 999, 995, np.nextafter(np.float32(1001), np.float32(0))]
        n[5] = np.nextafter(np.float32(1005), np.float32(2000))
        n[4000] = 1030  # the largest, past 250 rounds of the loop
        for nk in (np.float32, np.float16):
            nv = n.astype(nk)
            rows, _ = self.pair({"input.0": base}, {"input.0": nv}, "Torch.add.0.forward",
                                "--chunk", "65536")
            row = rows["Torch.add.0.forward.input.0"]
            ref = H.ref_metrics(nv, base)
            q = np.abs(nv.astype(np.float64) - 1000.0) / 1000.0
            self.assertEqual(row["max_rel_err"], q.max())
            self.assertEqual(row["max_rel_err"], ref["max_rel_err"])
            self.assertEqual(round(row["one_thousandth_ratio"] * n.size), int((q < 0.001).sum()))
            self.assertEqual(round(row["five_thousandths_ratio"] * n.size),
                             int((q < 0.005).sum()))
            self.assertFalse(q[0] < 0.001 or q[1] < 0.005)  # the ties, as numpy has them

    def test_results_do_not_depend_on_threads_or_io(self):
        b = self.rng.standard_normal(700_001).astype(np.float32)
        n = (b * (1 + self.rng.standard_normal(b.size) * 1e-4)).astype(np.float32)
        n[123_456] = np.nan
        b[123_456] = np.nan
        bp, cp = os.path.join(self.d, "b.h5"), os.path.join(self.d, "c.h5")
        H.write_dump(bp, [("Torch.add.0.forward", {"input.0": b})])
        H.write_dump(cp, [("Torch.add.0.forward", {"input.0": n})])
        # 64 KiB units: the tensor (2.8 MB a side) spans 43 of them
        r1, s1, _ = H.run_driver(bp, cp, "--threads", "1", "--chunk", "65536")
        # bytes read and reported to the progress callback: both sides, once
        self.assertEqual(s1["bytes_compared"], b.nbytes + n.nbytes)
        self.assertEqual(s1["progress_bytes"], b.nbytes + n.nbytes)
        self.assertEqual(r1[0]["bytes"], b.nbytes + n.nbytes)
        r2, _, _ = H.run_driver(bp, cp, "--threads", "2", "--chunk", "65536")
        r3, _, _ = H.run_driver(bp, cp, "--threads", "2", "--chunk", "65536", "--io", "pread")
        self.assertEqual(r1, r2)
        self.assertEqual(r1, r3)
        self.check_row(r1[0], n, b)


if __name__ == "__main__":
    unittest.main()
