"""Introduced vs inherited, the root-cause candidate, and red/yellow highlighting."""
import os
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmp_h5 as H  # noqa: E402

SRC = os.environ.get("MSPROBE_SOURCE_DIR",
                     os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def f32(n, seed):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


class CauseCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, *p):
        return os.path.join(self.d, *p)

    def records(self, rows):
        out = {}
        for r in rows:
            out.setdefault(r["record"], r)
        return out

    def test_introduced_inherited_and_root_cause(self):
        x, w = f32(500, 1), f32(500, 2)
        y = x * w
        # fp32 tolerance is rtol 1.3e-6: a 1e-4 relative error disagrees, yet
        # msprobe's verdict stays Yes (cosine ~1, MaxAbsErr << 1)
        y_bad = (y * (1 + 1e-4 * f32(500, 3))).astype(np.float32)
        z, z_bad = y * w, y_bad * w
        bench = [("Torch.mul.0.forward", {"input.0": x, "input.1": w, "output.0": y}),
                 ("Torch.mul.1.forward", {"input.0": y, "input.1": w, "output.0": z}),
                 ("Torch.mul.1.backward", {"input.0": x, "output.0": z}),
                 ("Torch.relu.0.forward", {"input.0": x, "output.0": x})]
        npu = [("Torch.mul.0.forward", {"input.0": x, "input.1": w, "output.0": y_bad}),
               ("Torch.mul.1.forward", {"input.0": y_bad, "input.1": w, "output.0": z_bad}),
               ("Torch.mul.1.backward", {"input.0": x, "output.0": z_bad}),
               ("Torch.relu.0.forward", {"input.0": x, "output.0": x})]
        H.write_dump(self.path("b.h5"), bench)
        H.write_dump(self.path("c.h5"), npu)
        rows, s, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"))
        rec = self.records(rows)
        self.assertFalse(H.allclose(y_bad, y, 1.3e-6, 1e-5))
        self.assertEqual(rec["Torch.mul.0.forward"]["cause"], "introduced")
        self.assertEqual(rec["Torch.mul.0.forward"]["record_verdict"], "Yes")
        self.assertEqual(rec["Torch.mul.1.forward"]["cause"], "inherited")
        # a backward record computes from what its forward saved: the forward's
        # error explains its output error
        self.assertEqual(rec["Torch.mul.1.backward"]["cause"], "inherited")
        self.assertEqual(rec["Torch.relu.0.forward"]["cause"], "none")
        self.assertEqual(s["root_record"], "Torch.mul.0.forward")
        self.assertEqual(s["root_tensor"], "Torch.mul.0.forward.output.0")
        self.assertEqual([r["is_root_cause"] for r in s["records"]], [1, 0, 0, 0])

    def test_backward_origin_in_backward_order(self):
        # the forward pass agrees bit for bit; the gradient diverges first in
        # Torch.mul.0.backward (from identical inputs), and Torch.add.0.backward
        # amplifies the error it receives by more than 8x
        x, w = f32(400, 11), f32(400, 12)
        g = f32(400, 13)
        gx = g * w
        gx_bad = (gx * (1 + 1e-3 * f32(400, 14))).astype(np.float32)   # rel err 1e-3
        gy_bad = (gx_bad * 2 + 0.05 * f32(400, 15)).astype(np.float32)
        fwd = ("Torch.mul.0.forward", {"input.0": x, "input.1": w, "output.0": x * w})
        bench = [fwd, ("Torch.mul.0.backward", {"input.0": g, "output.0": gx}),
                 ("Torch.add.0.backward", {"input.0": gx, "output.0": gx * 2})]
        npu = [fwd, ("Torch.mul.0.backward", {"input.0": g, "output.0": gx_bad}),
               ("Torch.add.0.backward", {"input.0": gx_bad, "output.0": gy_bad})]
        H.write_dump(self.path("b.h5"), bench)
        H.write_dump(self.path("c.h5"), npu)
        rows, s, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"))
        rec = self.records(rows)
        rel = lambda n, b: np.linalg.norm(n.astype(np.float64) - b) / np.linalg.norm(b)
        self.assertGreater(rel(gy_bad, gx * 2), 8 * rel(gx_bad, gx))    # amplified > 8x
        self.assertEqual(rec["Torch.mul.0.forward"]["cause"], "none")
        self.assertEqual(rec["Torch.mul.0.backward"]["cause"], "introduced")
        self.assertEqual(rec["Torch.add.0.backward"]["cause"], "introduced")
        # both introduce; the one from identical inputs is the stronger evidence
        self.assertEqual(s["root_record"], "Torch.mul.0.backward")
        self.assertEqual([r["is_root_cause"] for r in s["records"]], [0, 1, 0])

    def test_root_cause_is_earliest_step_then_rank_then_order(self):
        x = f32(64, 5)
        bad = x * np.float32(1.5)
        good = [("A.op.0.forward", {"input.0": x, "output.0": x}),
                ("A.op.1.forward", {"input.0": x, "output.0": x})]
        late = [("A.op.0.forward", {"input.0": x, "output.0": x}),
                ("A.op.1.forward", {"input.0": x, "output.0": bad})]
        early = [("A.op.0.forward", {"input.0": x, "output.0": bad}),
                 ("A.op.1.forward", {"input.0": x, "output.0": x})]
        # npu: step0/rank1 introduces at order 1, step1/rank0 at order 0
        layout = {(0, 0): good, (0, 1): late, (1, 0): early}
        for (step, rank), npu in layout.items():
            H.write_dump(self.path("b", f"step{step}", f"rank{rank}", "dump.h5"), good, step=step, rank=rank)
            H.write_dump(self.path("n", f"step{step}", f"rank{rank}", "dump.h5"), npu, step=step, rank=rank)
        rows, s, _ = H.run_driver(self.path("b"), self.path("n"))
        root = [r for r in s["records"] if r["cause"] == "introduced"]
        self.assertEqual(len(root), 2)
        self.assertEqual(s["root_record"], "A.op.1.forward")
        first = next(r for r in rows if r["is_root_cause"])
        self.assertEqual((first["step"], first["rank"]), (0, 1))

    def test_highlight_rules(self):
        x = f32(1000, 7)
        nan_out = x.copy()
        nan_out[3] = np.nan
        big = (x * np.float32(3.0)).astype(np.float32)           # output error >> input error, verdict No
        small_in = (x + np.float32(1e-4)).astype(np.float32)      # input MaxAbsErr 1e-4
        amp_out = (x + np.float32(2e-3)).astype(np.float32)       # 20x, still verdict Yes
        huge = (x + np.float32(2e10)).astype(np.float32)
        # inputs with cosine ~0.95 (verdict No) and an output with cosine ~0.8
        noisy = np.random.default_rng(9).standard_normal(1000).astype(np.float32)
        in_cos = (x + np.float32(0.33) * noisy).astype(np.float32)
        out_cos = (x + np.float32(0.75) * noisy).astype(np.float32)
        bench = [("T.nan.0.forward", {"input.0": x, "output.0": nan_out}),
                 ("T.lost.0.forward", {"input.0": x, "output.0": x}),
                 ("T.amp.0.forward", {"input.0": x, "output.0": x}),
                 ("T.huge.0.forward", {"input.0": x, "output.0": x}),
                 ("T.cos.0.forward", {"input.0": x, "output.0": x}),
                 ("T.calm.0.forward", {"input.0": x, "output.0": x})]
        npu = [("T.nan.0.forward", {"input.0": x, "output.0": nan_out}),
               ("T.lost.0.forward", {"input.0": x, "output.0": big}),
               ("T.amp.0.forward", {"input.0": small_in, "output.0": amp_out}),
               ("T.huge.0.forward", {"input.0": small_in, "output.0": huge}),
               ("T.cos.0.forward", {"input.0": in_cos, "output.0": out_cos}),
               ("T.calm.0.forward", {"input.0": small_in, "output.0": small_in})]
        H.write_dump(self.path("b.h5"), bench)
        H.write_dump(self.path("c.h5"), npu)
        rows, s, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"))
        out = {r["record"]: r for r in rows if r["is_output"]}
        inp = {r["record"]: r for r in rows if not r["is_output"]}
        self.assertEqual(out["T.nan.0.forward"]["highlight"], "red")
        self.assertEqual(inp["T.lost.0.forward"]["verdict"], "Yes")
        self.assertEqual(out["T.lost.0.forward"]["verdict"], "No")
        self.assertEqual(out["T.lost.0.forward"]["highlight"], "red")
        self.assertEqual(out["T.amp.0.forward"]["verdict"], "Yes")
        self.assertEqual(out["T.amp.0.forward"]["highlight"], "yellow")
        self.assertEqual(out["T.huge.0.forward"]["highlight"], "red")
        ci = H.ref_metrics(in_cos, x)["cosine"]
        co = H.ref_metrics(out_cos, x)["cosine"]
        self.assertLess(co, ci - 0.1)
        self.assertLess(abs(H.ref_metrics(out_cos, x)["max_abs_err"]),
                        10 * H.ref_metrics(in_cos, x)["max_abs_err"])
        self.assertEqual(inp["T.cos.0.forward"]["verdict"], "No")
        self.assertEqual(out["T.cos.0.forward"]["highlight"], "yellow")
        self.assertEqual(out["T.calm.0.forward"]["highlight"], "none")
        self.assertEqual(out["T.calm.0.forward"]["record_highlight"], "none")
        self.assertEqual(out["T.lost.0.forward"]["record_highlight"], "red")

    def test_statistics_rows_red_only_for_npu_nan_inf_outputs(self):
        ok = H.Stats("torch.float32", (4,), 1.0, -1.0, 0.0, 2.0)
        nan = H.Stats("torch.float32", (4,), float("nan"), float("nan"), float("nan"), float("nan"))
        nan.stats["nan"] = 1
        H.write_dump(self.path("b.h5"), [("T.a.0.forward", {"input.0": ok, "output.0": ok, "output.1": ok})],
                     task="statistics")
        H.write_dump(self.path("c.h5"), [("T.a.0.forward", {"input.0": nan, "output.0": nan, "output.1": ok})],
                     task="statistics")
        rows, _, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"))
        hl = {r["npu_name"].split("forward.")[1]: r["highlight"] for r in rows}
        self.assertEqual(hl, {"input.0": "none", "output.0": "red", "output.1": "none"})

    def test_committed_fixture_pair(self):
        # fixtures/README.md: step 1, forward op 2 (Tensor.mul.0) gets the error
        root = os.path.join(SRC, "fixtures")
        rows, s, _ = H.run_driver(os.path.join(root, "bench"), os.path.join(root, "npu"))
        self.assertEqual(s["n_pairs"], 2)
        self.assertEqual(s["root_record"], "Tensor.mul.0.forward")
        causes = {(r["step"], r["name"]): r["cause"] for r in s["records"]}
        self.assertEqual(causes[(1, "Tensor.mul.0.forward")], "introduced")
        for name in ("Functional.gelu.0.forward", "Functional.linear.1.forward", "Torch.mul.1.forward"):
            self.assertEqual(causes[(1, name)], "inherited")
        self.assertTrue(all(c == "none" for (step, _), c in causes.items() if step == 0))
        first = next(r for r in rows if r["is_root_cause"])
        self.assertEqual(first["step"], 1)


if __name__ == "__main__":
    unittest.main()
