"""overflow_check's rules on dumps written by hand (h5py alone, msprobe-dump(5);
msprobe's dump.json layout through tests/lib/msprobe_layout.py): which record
is the origin, which rank, what the reason says, the chain, and the JSON
msprobe's users read. Every expected name is the record the test planted;
every expected number is computed here with numpy."""
import glob
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import h5py
import numpy as np

import msp_h5dump

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
F32, F16 = np.float32, np.float16


def dump(path, records, rank=0, step=0, attrs=None, world_size=1, stats_only=False):
    """records: [(name, {role: array})] in execution order; attrs: {name: {key: text}}."""
    ordered = [(n, i, t) for i, (n, t) in enumerate(records)]
    msp_h5dump.write_dump(path, ordered, step=step, rank=rank, world_size=world_size,
                          stats_only=stats_only, task="statistics" if stats_only else "tensor")
    if attrs:
        with h5py.File(path, "r+") as f:
            for name, kv in attrs.items():
                for k, v in kv.items():
                    f[name].attrs[k] = v
    return path


def run(*args):
    p = subprocess.run([BIN, "overflow_check", *args], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def origin_line(stdout):
    return next((l for l in stdout.splitlines() if l.startswith("origin: ")), "")


def report(out):
    files = glob.glob(os.path.join(out, "anomaly_analyze_*.json"))
    assert len(files) == 1, files
    with open(files[0]) as f:
        return json.load(f)


def ones(n=4, dtype=F32):
    return np.linspace(0.5, 2.0, n).astype(dtype)


class OneRank(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="msp-ovf-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def test_fp16_mul_past_65504_is_the_origin_and_called_an_overflow(self):
        x = np.array([1.0, 30.0, -8.0, 2.0], F16)
        scaled = (x.astype(np.float64) * 4096.0)  # 122880 and -32768 ...
        out = scaled.astype(F16)                   # ... 122880 rounds past 65504: inf
        self.assertTrue(np.isinf(out).any() and np.isfinite(x).all())
        d = dump(self.path("step0", "rank0", "dump.h5"), [
            ("Torch.add.0.forward", {"input.0": ones(), "input.1": ones(), "output.0": ones()}),
            ("Tensor.__mul__.0.forward", {"input.0": x, "output.0": out}),
            ("Torch.exp.0.forward", {"input.0": out, "output.0": np.exp(out.astype(F32))}),
        ], attrs={"Tensor.__mul__.0.forward": {"input.1": "4096.0"}})
        rc, so, se = run("-i", d, "-o", self.path("out"))
        self.assertEqual(rc, 1, se)
        line = origin_line(so)
        self.assertIn("rank 0 Tensor.__mul__.0.forward (#1 in execution order)", line)
        self.assertIn("overflow", line)
        self.assertIn("float16", line)
        self.assertIn("65504", line)
        # largest input magnitude, from the data
        self.assertIn("%.6g" % float(np.abs(x.astype(np.float64)).max()), line)
        self.assertIn("%d Inf" % int(np.isinf(out).sum()), line)
        rep = report(self.path("out"))
        self.assertEqual(list(rep), ["rank_0"])
        node = rep["rank_0"][0]
        self.assertEqual(node["op_name"], "Tensor.__mul__.0.forward")
        self.assertEqual(set(node), {"op_name", "data_info", "construct_info", "stack_info",
                                     "role", "reason", "step", "order"})
        di = node["data_info"]
        self.assertEqual(set(di), {"input_args", "input_kwargs", "output"})
        self.assertEqual(di["input_args"][0]["dtype"], "torch.float16")
        self.assertEqual(di["input_args"][0]["Max"], float(x.astype(np.float64).max()))
        self.assertEqual(di["input_args"][1], {"type": "float", "value": 4096.0})
        self.assertEqual(di["output"][0]["Max"], "inf")
        self.assertEqual(node["construct_info"], ["Tensor.__mul__.0.forward"])
        self.assertEqual(node["stack_info"], {})

    def test_sqrt_of_a_negative_is_nan_from_finite_inputs(self):
        x = np.array([0.25, -0.75, 4.0], F32)
        with np.errstate(invalid="ignore"):
            y = np.sqrt(x)
        d = dump(self.path("d.h5"), [
            ("Torch.sqrt.0.forward", {"input.0": x, "output.0": y}),
            ("Torch.sum.0.forward", {"input.0": y, "output.0": np.array(np.nan, F32)}),
        ])
        rc, so, _ = run("-i", d, "-o", self.path("out"))
        self.assertEqual(rc, 1)
        line = origin_line(so)
        self.assertIn("Torch.sqrt.0.forward", line)
        self.assertIn("NaN from finite inputs: square root of a negative number", line)
        self.assertIn("min %.6g" % float(x.min()), line)

    def test_log_of_a_negative_and_log_of_zero_are_told_apart(self):
        neg = np.array([1.0, -2.0], F32)
        with np.errstate(invalid="ignore", divide="ignore"):
            d = dump(self.path("a.h5"), [("Torch.log.0.forward",
                                          {"input.0": neg, "output.0": np.log(neg)})])
            z = dump(self.path("b.h5"), [("Torch.log.0.forward",
                                          {"input.0": np.array([0.0, 1.0], F32),
                                           "output.0": np.log(np.array([0.0, 1.0], F32))})])
        self.assertIn("log of a negative number", origin_line(run("-i", d, "-o", self.path("o1"))[1]))
        self.assertIn("log of zero is -inf", origin_line(run("-i", z, "-o", self.path("o2"))[1]))

    def test_a_mask_made_with_minus_inf_on_purpose_is_not_an_origin(self):
        mask = np.triu(np.full((3, 3), -np.inf, F32), 1)
        scores = np.arange(9, dtype=F32).reshape(3, 3)
        x = np.array([1.0, -1.0], F32)
        with np.errstate(invalid="ignore"):
            y = np.sqrt(x)
        d = dump(self.path("d.h5"), [
            ("Torch.full.0.forward", {"output.0": np.full((3, 3), -np.inf, F32)}),
            ("Tensor.masked_fill.0.forward", {"input.0": scores, "input.1": mask == 0,
                                              "output.0": np.where(mask == 0, scores, -np.inf)}),
            ("Torch.empty_like.0.forward", {"input.0": x, "output.0": np.array([np.nan, 0], F32)}),
            ("Torch.sqrt.0.forward", {"input.0": x, "output.0": y}),
        ], attrs={"Torch.full.0.forward": {"input.0": "(3, 3)", "input.1": "-inf"},
                  "Tensor.masked_fill.0.forward": {"input.2": "float('-inf')"}})
        rc, so, _ = run("-i", d, "-o", self.path("out"))
        self.assertEqual(rc, 1)
        self.assertIn("Torch.sqrt.0.forward", origin_line(so))

    def test_backward_and_optimizer_records_count_in_execution_order(self):
        g = np.array([1.0, 0.0], F32)
        with np.errstate(divide="ignore"):
            gin = g / np.array([0.0, 2.0], F32)  # d/dx sqrt at 0 is inf
        d = dump(self.path("d.h5"), [
            ("Torch.sqrt.0.forward", {"input.0": np.array([0.0, 4.0], F32),
                                      "output.0": np.array([0.0, 2.0], F32)}),
            ("Torch.sqrt.0.backward", {"input.0": g, "output.0": gin}),
            ("Optimizer.SGD.0.step", {"input.param.0": ones(2), "input.grad.0": gin,
                                      "output.param.0": ones(2) - gin}),
        ])
        rc, so, _ = run("-i", d, "-o", self.path("out"))
        self.assertIn("Torch.sqrt.0.backward (#1 in execution order)", origin_line(so))
        node = report(self.path("out"))["rank_0"][0]
        self.assertEqual(set(node["data_info"]), {"input", "output"})

    def test_clean_dump_says_msprobes_sentence_and_exits_0(self):
        d = dump(self.path("d.h5"), [("Torch.add.0.forward", {"input.0": ones(), "output.0": ones()})])
        rc, so, _ = run("-i", d, "-o", self.path("out"))
        self.assertEqual((rc, so), (0, "Cannot find any anomaly node, no need to generate analyze file.\n"))
        self.assertFalse(os.path.exists(self.path("out")))

    def test_nan_only_behind_abnormal_inputs_names_where_it_was_first_seen(self):
        bad = np.array([np.nan, 1.0], F32)
        d = dump(self.path("d.h5"), [
            ("Torch.add.0.forward", {"input.0": ones(2), "output.0": ones(2)}),
            ("Functional.linear.0.forward", {"input.0": bad, "output.0": bad}),
        ])
        rc, so, _ = run("-i", d, "-o", self.path("out"))
        self.assertEqual(rc, 1)
        self.assertIn("Cannot find any anomaly node", so)
        self.assertIn("step 0 rank 0 Functional.linear.0.forward: input.0 holds NaN", so)

    def test_statistics_dump_is_enough(self):
        x = np.array([300.0, 1.0], F16)
        out = (x.astype(np.float64) * 300.0).astype(F16)
        d = dump(self.path("d.h5"), [("Torch.mul.0.forward", {"input.0": x, "output.0": out})],
                 stats_only=True)
        with h5py.File(d, "r") as f:
            self.assertIsNone(f["Torch.mul.0.forward"]["output.0"].shape)
        self.assertIn("Torch.mul.0.forward", origin_line(run("-i", d, "-o", self.path("o"))[1]))

    def test_steps_scan_names_the_first_step_with_an_origin(self):
        root = self.path("root")
        for step in range(3):
            recs = [("Torch.add.0.forward", {"input.0": ones(), "output.0": ones()})]
            if step >= 1:
                x = np.array([-1.0, 4.0], F32)
                with np.errstate(invalid="ignore"):
                    recs.append(("Torch.sqrt.0.forward", {"input.0": x, "output.0": np.sqrt(x)}))
            dump(os.path.join(root, "step%d" % step, "rank0", "dump.h5"), recs, step=step)
        rc, so, _ = run("-i", root, "-o", self.path("out"))
        self.assertIn("origin: step 1 rank 0 Torch.sqrt.0.forward", so)
        self.assertIn("scanned 2 steps", so)
        self.assertEqual(report(self.path("out"))["rank_0"][0]["step"], 1)
        rc, so, _ = run("-i", root, "-o", self.path("o2"), "--steps", "0")
        self.assertEqual(rc, 0, so)
        rc, so, _ = run("-i", root, "-o", self.path("o3"), "--steps", "2-5")
        self.assertIn("origin: step 2 rank 0", so)
        rc, _, se = run("-i", root, "--steps", "x")
        self.assertEqual(rc, 2)
        self.assertTrue(se.startswith("msprobe: overflow_check: --steps"), se)

    def test_usage_errors(self):
        for args, want in ((["-o", "x"], "-i DUMP is required"),
                           (["-i", self.path("missing")], "cannot open"),
                           (["--bogus"], "unknown option")):
            rc, so, se = run(*args)
            self.assertEqual((rc, so), (2, ""), args)
            self.assertIn(want, se)


class StatisticsThatLie(unittest.TestCase):
    """The counts and statistics stored beside a tensor are the file's claims
    (issue 37, item 3): where the dump holds the data, the data decides; a
    statistics-only dump's counts that cannot be true refuse the file."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="msp-ovf-lie-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def test_all_nan_data_whose_nan_count_says_0_is_still_the_origin(self):
        x = ones()
        nan = np.full(4, np.nan, F32)
        d = dump(self.path("d.h5"), [
            ("Torch.add.0.forward", {"input.0": x, "output.0": x}),
            ("Torch.mul.0.forward", {"input.0": x, "output.0": nan}),
        ])
        with h5py.File(d, "r+") as f:  # every claim says finite
            a = f["Torch.mul.0.forward/output.0"].attrs
            a["nan_count"] = np.int64(0)
            for k in ("max", "min", "mean", "norm"):
                a[k] = np.float64(1.0)
        rc, so, se = run("-i", d, "-o", self.path("out"))
        self.assertEqual(rc, 1, so + se)
        line = origin_line(so)
        self.assertIn("rank 0 Torch.mul.0.forward (#1 in execution order)", line)
        self.assertIn("(output.0: %d NaN, 0 Inf of %d)" % (int(np.isnan(nan).sum()), nan.size), line)
        out = report(self.path("out"))["rank_0"][0]["data_info"]["output"][0]
        self.assertEqual((out["nan_count"], out["Max"]), (int(np.isnan(nan).sum()), "nan"))

    def test_inf_count_beyond_the_element_count_names_no_origin_when_data_is_there(self):
        x = ones()
        d = dump(self.path("d.h5"), [
            ("Torch.add.0.forward", {"input.0": x, "output.0": x}),
            ("Torch.mul.0.forward", {"input.0": x, "output.0": x * 2}),
        ])
        with h5py.File(d, "r+") as f:
            f["Torch.mul.0.forward/output.0"].attrs["inf_count"] = np.int64(2 ** 62)
        self.assertTrue(np.isfinite(x * 2).all())
        rc, so, se = run("-i", d, "-o", self.path("out"))
        self.assertEqual((rc, so), (0, "Cannot find any anomaly node, no need to generate "
                                        "analyze file.\n"), se)

    def test_statistics_dump_with_a_count_beyond_the_element_count_is_refused(self):
        x = ones()
        d = dump(self.path("d.h5"), [
            ("Torch.add.0.forward", {"input.0": x, "output.0": x}),
            ("Torch.mul.0.forward", {"input.0": x, "output.0": x * 2}),
        ], stats_only=True)
        with h5py.File(d, "r+") as f:
            self.assertIsNone(f["Torch.mul.0.forward/output.0"].shape)
            f["Torch.mul.0.forward/output.0"].attrs["inf_count"] = np.int64(2 ** 62)
        rc, so, se = run("-i", d, "-o", self.path("out"))
        self.assertEqual((rc, so), (2, ""), se)
        for want in (d, "Torch.mul.0.forward", "output.0", "inf_count %d" % 2 ** 62,
                     "for %d elements" % x.size, "refused"):
            self.assertIn(want, se)
        self.assertFalse(os.path.exists(self.path("out")))

    def test_nan_counted_in_an_integer_statistics_tensor_is_refused(self):
        d = dump(self.path("d.h5"), [
            ("Torch.argmax.0.forward", {"input.0": ones(), "output.0": np.array([3, 1], np.int64)}),
        ], stats_only=True)
        with h5py.File(d, "r+") as f:
            f["Torch.argmax.0.forward/output.0"].attrs["nan_count"] = np.int64(1)
        rc, _, se = run("-i", d, "-o", self.path("out"))
        self.assertEqual(rc, 2, se)
        self.assertIn("Torch.argmax.0.forward: output.0", se)
        self.assertIn("integer tensor", se)

    def test_a_lying_rank_is_skipped_and_the_honest_one_still_analysed(self):
        x = np.array([-1.0, 4.0], F32)
        with np.errstate(invalid="ignore"):
            y = np.sqrt(x)
        step = self.path("step0")
        dump(os.path.join(step, "rank0", "dump.h5"),
             [("Torch.sqrt.0.forward", {"input.0": x, "output.0": y})], stats_only=True)
        liar = dump(os.path.join(step, "rank1", "dump.h5"),
                    [("Torch.add.0.forward", {"input.0": x, "output.0": x})], rank=1,
                    stats_only=True)
        with h5py.File(liar, "r+") as f:
            f["Torch.add.0.forward/output.0"].attrs["nan_count"] = np.int64(x.size + 1)
        rc, so, se = run("-i", step, "-o", self.path("out"))
        self.assertEqual(rc, 1, so + se)
        self.assertIn("origin: step 0 rank 0 Torch.sqrt.0.forward", so)
        self.assertIn("skipped %s" % liar, se)
        self.assertIn("nan_count %d" % (x.size + 1), se)

    def test_data_that_fails_its_crc32_is_refused(self):
        x = ones()
        d = dump(self.path("d.h5"), [("Torch.mul.0.forward", {"input.0": x, "output.0": x})])
        with h5py.File(d, "r+") as f:  # the data changed after the dump, the crc32 did not
            f["Torch.mul.0.forward/output.0"][0] = np.float32(np.inf)
        rc, _, se = run("-i", d, "-o", self.path("out"))
        self.assertEqual(rc, 2, se)
        self.assertIn("Torch.mul.0.forward: output.0: tensor data fails its CRC-32", se)

    def test_msprobe_tensor_dir_whose_max_and_min_hide_nan_data(self):
        import torch
        import msprobe_layout
        x = torch.tensor([1.0, 2.0, 3.0])
        y = torch.full((3,), float("nan"))
        rdir = msprobe_layout.write(self.dir, [
            ("Torch.relu.0.forward", {"input_args": [x], "output": [x]}),
            ("Torch.mul.0.forward", {"input_args": [x], "output": [y]}),
        ], task="tensor")
        path = os.path.join(rdir, "dump.json")
        with open(path) as f:
            doc = json.load(f)
        out = doc["data"]["Torch.mul.0.forward"]["output"][0]
        self.assertTrue(os.path.exists(os.path.join(rdir, "dump_tensor_data", out["data_name"])))
        out.update(Max=3.0, Min=1.0, Mean=2.0, Norm=3.7)
        with open(path, "w") as f:
            json.dump(doc, f)
        rc, so, se = run("-i", os.path.join(self.dir, "step0"), "-o", self.path("out"))
        self.assertEqual(rc, 1, so + se)
        self.assertIn("rank 0 Torch.mul.0.forward", origin_line(so))
        self.assertIn("%d NaN" % int(torch.isnan(y).sum()), origin_line(so))


class MsprobeLayout(unittest.TestCase):
    def test_msprobe_dump_json_dirs_are_read_and_construct_and_stack_carried(self):
        import torch
        import msprobe_layout
        tmp = tempfile.mkdtemp(prefix="msp-ovf-ms-")
        self.addCleanup(shutil.rmtree, tmp, True)
        x = torch.tensor([1.0, -3.0])
        y = torch.log(x)
        msprobe_layout.write(tmp, [
            ("Torch.relu.0.forward", {"input_args": [x], "output": [torch.relu(x)]}),
            ("Torch.log.0.forward", {"input_args": [x], "output": [y]}),
        ], task="statistics", stacks=[(["File train.py, line 9, in forward, y = torch.log(x)"],
                                       ["Torch.log.0.forward"])],
            construct={"Torch.log.0.forward": "Module.head.Head.forward.0",
                       "Module.head.Head.forward.0": "Module.Net.forward.0"})
        out = os.path.join(tmp, "out")
        rc, so, se = run("-i", os.path.join(tmp, "step0"), "-o", out)
        self.assertEqual(rc, 1, se)
        self.assertIn("rank 0 Torch.log.0.forward", origin_line(so))
        node = report(out)["rank_0"][0]
        self.assertEqual(node["construct_info"], ["Module.Net.forward.0", "Module.head.Head.forward.0",
                                                  "Torch.log.0.forward"])
        self.assertEqual(node["stack_info"], ["File train.py, line 9, in forward, y = torch.log(x)"])


class TwoRanks(unittest.TestCase):
    """rank 1 makes the NaN before the all_reduce that carries it to rank 0."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="msp-ovf2-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, per_rank):
        for rank, recs in per_rank.items():
            dump(os.path.join(self.dir, "step0", "rank%d" % rank, "dump.h5"), recs, rank=rank,
                 world_size=len(per_rank))
        return os.path.join(self.dir, "step0")

    def test_the_sender_is_named_not_the_receiver(self):
        nan = np.array([np.nan, 1.0], F32)
        a = np.array([-1.0, 1.0], F32)
        step = self.write({
            0: [("Torch.mul.0.forward", {"input.0": ones(2), "output.0": ones(2)}),
                ("Torch.mul.1.forward", {"input.0": ones(2), "output.0": ones(2)}),
                ("Distributed.all_reduce.0.forward", {"input.0": ones(2), "output.0": nan}),
                ("Torch.sum.0.forward", {"input.0": nan, "output.0": np.array(np.nan, F32)})],
            1: [("Torch.log.0.forward", {"input.0": a, "output.0": nan}),
                ("Distributed.all_reduce.0.forward", {"input.0": nan, "output.0": nan})],
        })
        out = os.path.join(self.dir, "out")
        rc, so, _ = run("-i", step, "-o", out)
        self.assertEqual(rc, 1)
        self.assertIn("origin: step 0 rank 1 Torch.log.0.forward", so)
        chain = so.split("chain:\n")[1].split("first anomaly per rank:")[0].splitlines()
        self.assertEqual([l.split()[:3] for l in chain],
                         [["rank", "1", "Torch.log.0.forward"],
                          ["rank", "1", "Distributed.all_reduce.0.forward"],
                          ["rank", "0", "Distributed.all_reduce.0.forward"]])
        self.assertIn("received it from rank 1", chain[2])
        rep = report(out)
        self.assertEqual(list(rep), ["rank_1", "rank_0"])  # the origin's rank first
        self.assertEqual(rep["rank_0"][0]["role"], "received")
        self.assertEqual(rep["rank_0"][0]["from_rank"], 1)

    def test_an_all_reduce_that_overflows_finite_inputs_is_its_own_origin(self):
        big = np.array([40000.0, 1.0], F16)
        s = (big.astype(np.float64) * 2).astype(F16)  # the sum of two ranks: inf
        self.assertTrue(np.isinf(s).any())
        step = self.write({r: [("Distributed.all_reduce.0.forward",
                                {"input.0": big, "output.0": s})] for r in (0, 1)})
        rc, so, _ = run("-i", step, "-o", os.path.join(self.dir, "out"))
        line = origin_line(so)
        self.assertIn("rank 0 Distributed.all_reduce.0.forward", line)
        self.assertIn("the reduction of finite inputs", line)

    def test_a_recv_buffer_full_of_garbage_is_not_an_input(self):
        nan = np.array([np.nan, 1.0], F32)
        a = np.array([-1.0, 1.0], F32)
        step = self.write({
            0: [("Torch.sqrt.0.forward", {"input.0": a, "output.0": nan}),
                ("Distributed.send.0.forward", {"input.0": nan, "output.0": nan})],
            1: [("Torch.empty.0.forward", {"output.0": np.array([np.inf, 0], F32)}),
                ("Distributed.recv.0.forward", {"input.0": np.array([np.inf, 0], F32),
                                                "output.0": nan})],
        })
        for r, key, peer in ((0, "Distributed.send.0.forward", "1"),
                             (1, "Distributed.recv.0.forward", "0")):
            with h5py.File(os.path.join(step, "rank%d" % r, "dump.h5"), "r+") as f:
                f[key].attrs["input.1"] = peer
        rc, so, _ = run("-i", step, "-o", os.path.join(self.dir, "out"))
        self.assertIn("origin: step 0 rank 0 Torch.sqrt.0.forward", so)
        self.assertIn("rank 1 Distributed.recv.0.forward  received it from rank 0", so)


if __name__ == "__main__":
    unittest.main(verbosity=2)
