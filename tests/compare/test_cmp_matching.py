"""Input resolution and record matching of msp_compare_run: files, rank dirs and
dump roots; exact, --fuzzy and --mapping matching; level filter; one-sided
records and tensors; shape mismatch; statistics-only dumps."""
import math
import os
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmp_h5 as H  # noqa: E402


def f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class MatchingCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, *parts):
        return os.path.join(self.d, *parts)

    def test_roles_equal_but_for_leading_zeros_do_not_pair(self):
        # One role order for the reader and for pairing (format's): "input.01"
        # and "input.1" are two roles, so each is a one-sided row, never a pair.
        x, y = f32(3, seed=1), f32(3, seed=2)
        H.write_dump(self.path("b.h5"), [("Torch.add.0.forward", {"input.01": x, "output.0": x})])
        H.write_dump(self.path("c.h5"), [("Torch.add.0.forward", {"input.1": y, "output.0": x})])
        rows, _, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"))
        pairs = sorted((r["npu_name"] or "", r["bench_name"] or "") for r in rows)
        self.assertEqual(pairs, [
            ("", "Torch.add.0.forward.input.01"),
            ("Torch.add.0.forward.input.1", ""),
            ("Torch.add.0.forward.output.0", "Torch.add.0.forward.output.0"),
        ])

    def test_exact_match_and_one_sided_records_and_tensors(self):
        x = f32(4, 4)
        H.write_dump(self.path("b.h5"), [
            ("Torch.add.0.forward", {"input.0": x, "output.0": x}),
            ("Torch.only_bench.0.forward", {"input.0": x}),
            ("Functional.relu.0.forward", {"input.0": x, "kwarg.inplace": x, "output.0": x}),
        ])
        H.write_dump(self.path("c.h5"), [
            ("Torch.add.0.forward", {"input.0": x, "output.0": x}),
            ("Functional.relu.0.forward", {"input.0": x, "output.0": x, "output.1": x}),
            ("Torch.only_npu.0.forward", {"input.0": x}),
        ])
        rows, s, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"))
        by = {(r["npu_name"], r["bench_name"]): r for r in rows}
        self.assertEqual(by[("Torch.add.0.forward.output.0", "Torch.add.0.forward.output.0")]["verdict"], "Yes")
        ob = by[(None, "Torch.only_bench.0.forward.input.0")]
        self.assertIn("missing in NPU", ob["err_message"])
        self.assertIsNone(ob["cosine"])
        self.assertEqual(ob["verdict"], "No")
        self.assertEqual(ob["agree"], -1)
        on = by[("Torch.only_npu.0.forward.input.0", None)]
        self.assertIn("missing in bench", on["err_message"])
        self.assertEqual(on["bench_dtype"], "")
        kw = by[(None, "Functional.relu.0.forward.kwarg.inplace")]
        self.assertIn("tensor missing in NPU", kw["err_message"])
        o1 = by[("Functional.relu.0.forward.output.1", None)]
        self.assertIn("tensor missing in bench", o1["err_message"])
        # rows of a record: input.*, kwarg.*, output.*
        relu = [r["npu_name"] or r["bench_name"] for r in rows if r["record"] == "Functional.relu.0.forward"]
        self.assertEqual([n.split("forward.")[1] for n in relu], ["input.0", "kwarg.inplace", "output.0", "output.1"])
        self.assertEqual(s["n_records"], 4)
        self.assertEqual(s["n_failed"], 3)
        # record tensor ranges index the rows in order
        for rec in s["records"]:
            part = rows[rec["first_tensor"]:rec["first_tensor"] + rec["n_tensors"]]
            self.assertTrue(all(r["record"] == rec["name"] for r in part))

    def test_shape_mismatch_is_na(self):
        H.write_dump(self.path("b.h5"), [("Torch.add.0.forward", {"input.0": f32(4, 4)})])
        H.write_dump(self.path("c.h5"), [("Torch.add.0.forward", {"input.0": f32(2, 8)})])
        rows, _, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"))
        r = rows[0]
        self.assertIn("Shape", r["err_message"])
        self.assertIsNone(r["cosine"])
        self.assertEqual(r["npu_shape"], "[2, 8]")
        self.assertEqual(r["bench_shape"], "[4, 4]")
        self.assertEqual(r["verdict"], "No")

    def test_fuzzy_matching_aligns_in_order_with_equal_shapes(self):
        a, b, c = f32(3, seed=1), f32(5, seed=2), f32(3, seed=3)
        H.write_dump(self.path("b.h5"), [
            ("Torch.matmul.0.forward", {"input.0": a}),
            ("Torch.matmul.1.forward", {"input.0": b}),
            ("Torch.matmul.2.forward", {"input.0": c}),
            ("Module.fc.Linear.forward.0", {"input.0": a}),
        ])
        H.write_dump(self.path("c.h5"), [
            ("Torch.matmul.7.forward", {"input.0": a}),
            ("Torch.matmul.8.forward", {"input.0": c}),  # shape (3,): skips bench .1 (5,)
            ("Module.fc.Linear.forward.3", {"input.0": a}),
        ])
        rows, s, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"))
        self.assertEqual(s["n_records"], 7)  # nothing pairs without --fuzzy
        rows, s, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"), "--fuzzy")
        pairs = {(r["record"], r["bench_record"]) for r in rows}
        self.assertIn(("Torch.matmul.7.forward", "Torch.matmul.0.forward"), pairs)
        self.assertIn(("Torch.matmul.8.forward", "Torch.matmul.2.forward"), pairs)
        self.assertIn(("Module.fc.Linear.forward.3", "Module.fc.Linear.forward.0"), pairs)
        self.assertIn(("Torch.matmul.1.forward", None), pairs)
        self.assertEqual(s["n_records"], 4)
        for r in rows:
            if r["bench_record"]:
                self.assertEqual(r["max_abs_err"], 0.0)

    def test_mapping_file(self):
        x = f32(6)
        H.write_dump(self.path("b.h5"), [("Functional.gelu.0.forward", {"input.0": x})])
        H.write_dump(self.path("c.h5"), [("NPU.fast_gelu.0.forward", {"input.0": x * 2})])
        with open(self.path("map.txt"), "w") as f:
            f.write("# bench name   npu name\n\nFunctional.gelu.0.forward NPU.fast_gelu.0.forward  # fused\n")
        rows, s, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"), "--mapping", self.path("map.txt"))
        self.assertEqual(s["n_records"], 1)
        self.assertEqual(rows[0]["bench_name"], "Functional.gelu.0.forward.input.0")
        self.assertEqual(rows[0]["npu_name"], "NPU.fast_gelu.0.forward.input.0")
        self.assertEqual(rows[0]["max_abs_err"], float(np.max(np.abs(x.astype(np.float64)))))

    def test_malformed_mapping_names_file_and_line(self):
        x = f32(6)
        H.write_dump(self.path("b.h5"), [("A.a.0.forward", {"input.0": x})])
        H.write_dump(self.path("c.h5"), [("A.a.0.forward", {"input.0": x})])
        with open(self.path("bad.txt"), "w") as f:
            f.write("# ok\nA.a.0.forward A.a.0.forward\nthree fields here\n")
        rc, lines, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"), "--mapping",
                                    self.path("bad.txt"), expect_ok=False)
        self.assertEqual(rc, 2)
        self.assertIn("bad.txt:3", lines[0]["message"])

    def test_level_filter(self):
        x = f32(6)
        recs = [("Torch.add.0.forward", {"input.0": x}), ("Module.fc.Linear.forward.0", {"input.0": x})]
        H.write_dump(self.path("b.h5"), recs)
        H.write_dump(self.path("c.h5"), recs)
        for level, want in (("api", ["Torch.add.0.forward"]), ("module", ["Module.fc.Linear.forward.0"]),
                            ("all", ["Torch.add.0.forward", "Module.fc.Linear.forward.0"])):
            _, s, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"), "--level", level)
            self.assertEqual(sorted(r["name"] for r in s["records"]), sorted(want), level)

    def test_dump_roots_pair_by_step_and_rank(self):
        x = f32(8)
        for side in ("bench", "npu"):
            for step, rank in ((0, 0), (0, 1), (1, 0)):
                if side == "npu" and step == 1:
                    continue  # step 1 exists on the bench side only
                recs = [("Torch.b.0.forward", {"input.0": x}), ("Torch.a.0.forward", {"input.0": x * (rank + 1)})]
                H.write_dump(self.path(side, f"step{step}", f"rank{rank}", "dump.h5"), recs, step=step, rank=rank)
        rows, s, err = H.run_driver(self.path("bench"), self.path("npu"))
        self.assertEqual(s["n_pairs"], 2)
        self.assertEqual(len(s["unpaired"]), 1)
        self.assertIn("step 1 rank 0 only in the bench dump", s["unpaired"][0])
        self.assertIn("step 1 rank 0", err)  # logged as a warning
        order = [(r["step"], r["rank"], r["order"], r["name"]) for r in s["records"]]
        self.assertEqual(order, sorted(order))
        self.assertEqual([(o[0], o[1]) for o in order], [(0, 0), (0, 0), (0, 1), (0, 1)])
        # rank dirs compare directly too
        rows, s, _ = H.run_driver(self.path("bench", "step0", "rank1"), self.path("npu", "step0", "rank1"))
        self.assertEqual(s["n_pairs"], 1)
        self.assertEqual(s["n_records"], 2)
        # a single pair takes step and rank from the compare file's attributes
        self.assertEqual({(r["step"], r["rank"]) for r in s["records"]}, {(0, 1)})

    def test_mixed_kinds_and_missing_paths_are_errors(self):
        x = f32(8)
        H.write_dump(self.path("bench", "step0", "rank0", "dump.h5"), [("T.a.0.forward", {"input.0": x})])
        H.write_dump(self.path("c.h5"), [("T.a.0.forward", {"input.0": x})])
        rc, lines, _ = H.run_driver(self.path("bench"), self.path("c.h5"), expect_ok=False)
        self.assertEqual(rc, 2)
        self.assertIn("dump root", lines[0]["message"])
        rc, lines, _ = H.run_driver(self.path("nope"), self.path("c.h5"), expect_ok=False)
        self.assertEqual(rc, 2)
        self.assertIn("nope", lines[0]["message"])

    def test_statistics_only_dumps(self):
        bs = H.Stats("torch.float32", (4, 4), 2.0, -1.0, 0.5, 10.0)
        ns_ok = H.Stats("torch.bfloat16", (4, 4), 2.5, -1.0, 0.4, 10.1)
        ns_far = H.Stats("torch.bfloat16", (4, 4), 2.0, -1.0, 0.5, 31.0)
        H.write_dump(self.path("b.h5"), [("T.a.0.forward", {"input.0": bs, "output.0": bs})], task="statistics")
        H.write_dump(self.path("c.h5"), [("T.a.0.forward", {"input.0": ns_ok, "output.0": ns_far})], task="statistics")
        rows, s, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"))
        self.assertEqual(s["stats_mode"], 1)
        r_ok, r_far = rows
        for r, n in ((r_ok, ns_ok), (r_far, ns_far)):
            for k in ("max", "min", "mean", "norm"):
                nv, bv = n.stats[k], bs.stats[k]
                self.assertTrue(math.isclose(r[f"{k}_diff"], nv - bv, rel_tol=1e-12, abs_tol=1e-15))
                # msprobe 26: |diff / bench| x 100, a percentage
                want = abs((nv - bv) / bv) * 100
                self.assertTrue(math.isclose(r[f"{k}_rel_diff"], want, rel_tol=1e-12, abs_tol=1e-15))
            self.assertIsNone(r["cosine"])
            self.assertEqual(r["agree"], -1)
        self.assertEqual(r_ok["verdict"], "Yes")    # largest rel diff 0.2 <= 0.5
        self.assertEqual(r_far["verdict"], "Warning")  # norm: 21/31 > 0.5
        self.assertEqual(r_ok["npu_max"], 2.5)
        rows, _, _ = H.run_driver(self.path("b.h5"), self.path("c.h5"), "--stats-warn", "0.1")
        self.assertEqual(rows[0]["verdict"], "Warning")  # 0.2 > 0.1


if __name__ == "__main__":
    unittest.main()
