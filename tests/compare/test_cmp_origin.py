"""The error-origin model on hand-made dumps (h5py): noise-tolerant origin,
dtype floors, scalars, producer gaps, statistics dumps. Every expected error
is computed here with numpy: rel err = ||n - b|| / ||b||."""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmp_h5 as H  # noqa: E402

FLOOR32 = 8 * 2.0 ** -24 + 1e-5
FLOOR_BF16 = 8 * 2.0 ** -8 + 1e-5


def f32(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def rel(n, b):
    n, b = H.as_f64(n).ravel(), H.as_f64(b).ravel()
    return float(np.linalg.norm(n - b) / np.linalg.norm(b))


def noisy(x, r, seed):
    """x with relative L2 noise r."""
    e = f32(x.shape, seed).astype(np.float64)
    e *= r * np.linalg.norm(x) / np.linalg.norm(e)
    return (x + e).astype(np.float32)


class OriginCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def run_pair(self, bench, npu, **kw):
        b, c = os.path.join(self.d, "b.h5"), os.path.join(self.d, "c.h5")
        pb = kw.pop("producers_bench", None)
        pc = kw.pop("producers_npu", None)
        H.write_dump(b, bench, producers=pb, **kw)
        H.write_dump(c, npu, producers=pc, **kw)
        rows, s, _ = H.run_driver(b, c)
        recs = {}
        for r in rows:
            recs.setdefault(r["record"], r)
        return recs, s

    def test_upstream_noise_does_not_hide_a_bad_linear(self):
        # inputs carry 0.3 % noise (as GPU vs NPU), the linear's output is far off
        x, w = f32((16, 32), 1), f32((8, 32), 2)
        y = (x @ w.T).astype(np.float32)
        xn, wn = noisy(x, 3e-3, 3), noisy(w, 3e-3, 4)
        y_bad = noisy(y, 0.4, 5)
        self.assertGreater(rel(y_bad, y), 8 * max(rel(xn, x), rel(wn, w)))
        recs, s = self.run_pair(
            [("Functional.linear.6.forward", {"input.0": x, "input.1": w, "output.0": y})],
            [("Functional.linear.6.forward", {"input.0": xn, "input.1": wn, "output.0": y_bad})])
        self.assertEqual(recs["Functional.linear.6.forward"]["cause"], "introduced")
        self.assertEqual(s["root_record"], "Functional.linear.6.forward")
        self.assertAlmostEqual(s["suspects"][0]["out_err"], rel(y_bad, y), places=6)
        self.assertAlmostEqual(s["suspects"][0]["in_err"], max(rel(xn, x), rel(wn, w)), places=6)

    def test_the_earliest_introduced_record_comes_first_whatever_its_strength(self):
        # two records introduce error in one step: the weaker ran first, so the
        # root cause is it, and the list keeps execution order
        x = f32(512, 20)
        y = (x * 2).astype(np.float32)
        z = np.tanh(y).astype(np.float32)
        y_bad = noisy(y, 3e-5, 21)
        z_bad = noisy(np.tanh(y_bad).astype(np.float32), 0.5, 22)
        # tanh's strength (out / 8 in) is far above mul's (out / floor)
        self.assertGreater(rel(z_bad, z) / (8 * rel(y_bad, y)), 10 * rel(y_bad, y) / FLOOR32)
        self.assertGreater(rel(y_bad, y), FLOOR32)
        recs, s = self.run_pair(
            [("Tensor.mul.0.forward", {"input.0": x, "output.0": y}),
             ("Torch.tanh.0.forward", {"input.0": y, "output.0": z})],
            [("Tensor.mul.0.forward", {"input.0": x, "output.0": y_bad}),
             ("Torch.tanh.0.forward", {"input.0": y_bad, "output.0": z_bad})])
        self.assertEqual(recs["Tensor.mul.0.forward"]["cause"], "introduced")
        self.assertEqual(recs["Torch.tanh.0.forward"]["cause"], "introduced")
        self.assertEqual(s["root_record"], "Tensor.mul.0.forward")
        self.assertEqual([x["record"] for x in s["suspects"]],
                         ["Tensor.mul.0.forward", "Torch.tanh.0.forward"])

    def test_noise_carried_through_is_inherited(self):
        x = f32(4096, 6)
        xn = noisy(x, 3e-3, 7)
        y, yn = (x * 2).astype(np.float32), (xn * 2).astype(np.float32)
        recs, s = self.run_pair([("Tensor.mul.0.forward", {"input.0": x, "output.0": y})],
                                [("Tensor.mul.0.forward", {"input.0": xn, "output.0": yn})])
        self.assertAlmostEqual(rel(yn, y), rel(xn, x), places=6)
        self.assertEqual(recs["Tensor.mul.0.forward"]["cause"], "inherited")
        self.assertIsNone(s["root_record"])
        self.assertEqual(s["suspects"], [])

    def test_bf16_rounding_of_an_fp32_input_op_is_not_an_origin(self):
        # autocast conv: fp32 inputs identical, output computed and stored in bf16
        x, w = f32((64, 72), 8), f32((16, 72), 9)
        y = (x.astype(np.float64) @ w.T.astype(np.float64))
        xb, wb = H.BF16(x).values(), H.BF16(w).values()
        y_bf = H.BF16((xb @ wb.T).astype(np.float32))
        e = rel(y_bf, y)
        self.assertGreater(e, 1e-3)          # fails fp32's tolerance by far...
        self.assertLess(e, FLOOR_BF16)       # ...but stays inside bf16's floor
        recs, s = self.run_pair(
            [("Functional.conv2d.0.forward", {"input.0": x, "input.1": w,
                                              "output.0": y.astype(np.float32)})],
            [("Functional.conv2d.0.forward", {"input.0": x, "input.1": w, "output.0": y_bf})])
        self.assertEqual(recs["Functional.conv2d.0.forward"]["cause"], "none")
        self.assertEqual(s["suspects"], [])

    def test_fp32_accumulation_noise_is_below_the_floor(self):
        # one element of many over atol + rtol*|b| used to name a harmless conv
        x = f32(32768, 10)
        y = (x * 3).astype(np.float32)
        y_n = noisy(y, 2e-6, 11)
        y_n[5] = y[5] + np.float32(2e-4)
        self.assertFalse(H.allclose(y_n, y, 1.3e-6, 1e-5))
        self.assertLess(rel(y_n, y), FLOOR32)
        recs, s = self.run_pair([("Functional.conv2d.4.forward", {"input.0": x, "output.0": y})],
                                [("Functional.conv2d.4.forward", {"input.0": x, "output.0": y_n})])
        self.assertEqual(recs["Functional.conv2d.4.forward"]["cause"], "none")
        self.assertIsNone(s["root_record"])

    def test_scalar_loss_changed_by_a_keyword_is_introduced(self):
        logits = f32((8, 10), 12)
        loss = np.array(2.302585, dtype=np.float32)
        loss_s = np.array(2.302585 * (1 + 3e-5), dtype=np.float32)   # label_smoothing
        self.assertGreater(rel(loss_s, loss), FLOOR32)
        recs, s = self.run_pair(
            [("Functional.cross_entropy.0.forward", {"input.0": logits, "output.0": loss})],
            [("Functional.cross_entropy.0.forward", {"input.0": logits, "output.0": loss_s})])
        self.assertEqual(recs["Functional.cross_entropy.0.forward"]["cause"], "introduced")
        self.assertEqual(s["root_record"], "Functional.cross_entropy.0.forward")

    def chain(self, changed):
        """A.output.0 feeds B.input.0; on the compare side something unrecorded
        scales the tensor between them when changed is True."""
        x = f32(512, 13)
        a = (x * 2).astype(np.float32)
        a_seen = (a * 1.5).astype(np.float32) if changed else a
        b_out = np.tanh(a_seen).astype(np.float32)
        bench = [("Tensor.mul.0.forward", {"input.0": x, "output.0": a}),
                 ("Torch.tanh.0.forward", {"input.0": a, "output.0": np.tanh(a).astype(np.float32)})]
        npu = [("Tensor.mul.0.forward", {"input.0": x, "output.0": a}),
               ("Torch.tanh.0.forward", {"input.0": a_seen, "output.0": b_out})]
        prod = {("Torch.tanh.0.forward", "input.0"): "Tensor.mul.0.forward/output.0"}
        return bench, npu, prod, rel(a_seen, a)

    def check_gap(self, index):
        bench, npu, prod, e = self.chain(True)
        recs, s = self.run_pair(bench, npu, producers_bench=prod, producers_npu=prod, index=index)
        tanh_in = [r for r in [recs["Torch.tanh.0.forward"]]][0]
        self.assertEqual(tanh_in["producer"], "Tensor.mul.0.forward/output.0")
        self.assertEqual(tanh_in["gap"], 1)
        # tanh only carries what it received: not blamed
        self.assertNotEqual(recs["Torch.tanh.0.forward"]["cause"], "introduced")
        first = s["suspects"][0]
        self.assertEqual(first["gap"], 1)
        self.assertEqual(first["record"], "Torch.tanh.0.forward")
        self.assertEqual(first["tensor"], "Torch.tanh.0.forward.input.0")
        self.assertAlmostEqual(first["out_err"], e, places=6)
        self.assertIn("between Tensor.mul.0.forward/output.0 and Torch.tanh.0.forward.input.0",
                      first["reason"])
        # the CLI's root-cause line and ranked list name the changed input
        p = subprocess.run([os.environ.get("MSPROBE_BIN", "msprobe"), "compare", "-b",
                            os.path.join(self.d, "b.h5"), "-c", os.path.join(self.d, "c.h5"),
                            "-o", os.path.join(self.d, "out"), "--replay", "off"],
                           capture_output=True, text=True)
        self.assertIn("first introduced error: step 0 rank 0 before Torch.tanh.0.forward input.0 (",
                      p.stdout)
        self.assertIn("  1. step 0 rank 0 before Torch.tanh.0.forward input.0: input err 0, "
                      "output err %.3g" % e, p.stdout)

    def test_gap_between_producer_and_consumer_from_the_attribute(self):
        self.check_gap(index=False)

    def test_gap_between_producer_and_consumer_from_the_index_column(self):
        self.check_gap(index=True)

    def test_no_gap_when_the_consumer_gets_what_was_produced(self):
        bench, npu, prod, _ = self.chain(False)
        recs, s = self.run_pair(bench, npu, producers_bench=prod, producers_npu=prod, index=True)
        self.assertEqual(recs["Torch.tanh.0.forward"]["gap"], 0)
        self.assertEqual(s["suspects"], [])

    def test_input_no_recorded_op_produced_names_the_unrecorded_region(self):
        # embedding -> (an LSTM msprobe does not record) -> linear: the linear's
        # input has no producer while the dump records producers elsewhere
        idx = np.arange(32, dtype=np.int64) % 7
        table = f32((7, 16), 16)
        emb = table[idx]
        h = np.tanh(emb @ f32((16, 16), 17)).astype(np.float32)   # the unrecorded op
        h_bad = noisy(h, 0.05, 18)                                 # ...went wrong
        w = f32((5, 16), 19)
        y, y_bad = (h @ w.T).astype(np.float32), (h_bad @ w.T).astype(np.float32)
        bench = [("Functional.embedding.0.forward", {"input.0": idx, "input.1": table, "output.0": emb}),
                 ("Functional.linear.0.forward", {"input.0": h, "input.1": w, "output.0": y}),
                 ("Tensor.mul.0.forward", {"input.0": y, "output.0": y * 2})]
        npu = [("Functional.embedding.0.forward", {"input.0": idx, "input.1": table, "output.0": emb}),
               ("Functional.linear.0.forward", {"input.0": h_bad, "input.1": w, "output.0": y_bad}),
               ("Tensor.mul.0.forward", {"input.0": y_bad, "output.0": y_bad * 2})]
        prod = {("Tensor.mul.0.forward", "input.0"): "Functional.linear.0.forward/output.0"}
        recs, s = self.run_pair(bench, npu, producers_bench=prod, producers_npu=prod)
        self.assertNotEqual(recs["Functional.linear.0.forward"]["cause"], "introduced")
        first = s["suspects"][0]
        self.assertEqual((first["record"], first["gap"]), ("Functional.linear.0.forward", 1))
        self.assertEqual(first["tensor"], "Functional.linear.0.forward.input.0")
        self.assertAlmostEqual(first["out_err"], rel(h_bad, h), places=6)
        self.assertIn("no recorded op produced Functional.linear.0.forward.input.0", first["reason"])
        # torch._VF.lstm is recorded now: no longer the example of an unrecorded op
        self.assertNotIn("_VF", first["reason"])
        self.assertIn("an API outside the dump's list", first["reason"])
        # the leaves without a producer (the weight, the indices) are clean: no other suspect
        self.assertEqual(len(s["suspects"]), 1)
        # without producer links in the dump nothing can be said about the region
        recs, s = self.run_pair(bench, npu)
        self.assertEqual(s["suspects"], [])

    def test_statistics_shape_mismatch_names_no_root_cause(self):
        x = f32((4, 8), 14)
        bench = [("Tensor.add.0.forward", {"input.0": x, "output.0": x})]
        npu = [("Tensor.add.0.forward", {"input.0": x, "output.0": x.reshape(8, 4) * 5})]
        recs, s = self.run_pair(bench, npu, task="statistics", stats_only=True)
        self.assertIsNone(s["root_record"])
        self.assertEqual(s["suspects"], [])
        out = [r for r in recs.values()][0]
        rows, _, _ = H.run_driver(os.path.join(self.d, "b.h5"), os.path.join(self.d, "c.h5"))
        msg = [r["err_message"] for r in rows if r["is_output"]][0]
        self.assertIn("statistics dump: not used to name a root cause", msg)
        self.assertEqual(out["record"], "Tensor.add.0.forward")

    def test_statistics_suspect_is_labelled(self):
        x = f32(256, 15)
        y = (x * 2).astype(np.float32)
        bench = [("Tensor.mul.0.forward", {"input.0": x, "output.0": y})]
        npu = [("Tensor.mul.0.forward", {"input.0": x, "output.0": (y * 3).astype(np.float32)})]
        recs, s = self.run_pair(bench, npu, task="statistics", stats_only=True)
        self.assertEqual(s["root_record"], "Tensor.mul.0.forward")
        self.assertEqual(s["suspects"][0]["from_stats"], 1)
        self.assertTrue(s["suspects"][0]["reason"].startswith("statistics only: "))
        # norm ratio 3: |3||y|| - ||y||| / ||y|| = 2
        self.assertAlmostEqual(s["suspects"][0]["out_err"], 2.0, places=6)

    def test_garbage_from_an_allocator_of_uninitialized_memory_is_no_origin(self):
        # torch.empty_like hands back whatever the allocator held: one run's
        # bytes happened to spell a NaN, the other's did not (seen in CI on
        # two identical two-rank runs); the buffer is then overwritten
        x = f32(64, 16)
        garbage_b = f32(64, 17)
        garbage_n = garbage_b.copy()
        garbage_n[3] = np.float32("nan")
        self.assertTrue(np.isnan(garbage_n).any() and not np.isnan(garbage_b).any())
        y = np.tanh(x).astype(np.float32)
        for task, stats in (("tensor", False), ("statistics", True)):
            bench = [("Torch.empty_like.0.forward", {"input.0": x, "output.0": garbage_b}),
                     ("Torch.tanh.0.forward", {"input.0": x, "output.0": y})]
            npu = [("Torch.empty_like.0.forward", {"input.0": x, "output.0": garbage_n}),
                   ("Torch.tanh.0.forward", {"input.0": x, "output.0": y})]
            recs, s = self.run_pair(bench, npu, task=task, stats_only=stats)
            self.assertIsNone(s["root_record"], task)
            self.assertEqual(s["suspects"], [], task)


if __name__ == "__main__":
    unittest.main(verbosity=2)
