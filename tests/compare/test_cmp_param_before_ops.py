"""Not every difference is an op; ranks (issue 38, items 4 and 5).

A small MLP trained two steps with SGD (momentum) under the real preload
shim, the same seed on both sides; on the compare side fc1.weight is scaled
by 1.05 right after the model is built (a checkpoint that loaded
differently). compare used to say "no introduced error found" on one rank
(the in-place scaling, a data-preparation call the shim did not write, was
still the weight's producer link) and, on two gloo ranks with only rank 1's
weight scaled, blamed the all_reduce on rank 0. Now the parameter is named,
on the rank where it differs, ahead of all it feeds.

Expectations come from the dumps (h5py, numpy) and torch, not from msprobe:
the scaled weight's relative error is computed from the two dumps' tensors."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np
import openpyxl

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("MSPROBE_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(SOURCE, "tests", "lib"))
import msp_launch  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
SCRIPT = os.path.join(HERE, "param_scaled_train.py")


def dump(work, name, mode, ranks=1, **env_extra):
    root = os.path.join(work, name)
    cfg = root + ".json"
    with open(cfg, "w") as f:
        json.dump({"dump": {"common_dump_settings": {
            "dump_mode": mode, "dump_path": root, "dump_iter": "all", "task": "tensor"}}}, f)
    os.makedirs(root + ".cwd")
    env = dict(os.environ, LD_PRELOAD=PRELOAD, MSPROBE_PATH=cfg, OMP_NUM_THREADS="1",
               **{k: str(v) for k, v in env_extra.items()})
    env.pop("MSPROBE_LOG_FILE", None)
    if ranks == 1:
        p = subprocess.run([PYTHON, SCRIPT], cwd=root + ".cwd", env=env, capture_output=True,
                           text=True, timeout=600)
        if p.returncode != 0:
            raise AssertionError(p.stderr[-3000:])
    else:
        env["P_DDP"] = "1"
        msp_launch.launch(SCRIPT, ranks, env, root + ".cwd", timeout=600).check()
    return root


def compare(b, c, out):
    p = subprocess.run([BIN, "compare", "-b", b, "-c", c, "-o", out], capture_output=True,
                       text=True, timeout=900)
    if p.returncode not in (0, 1):
        raise AssertionError("compare failed (%d): %s" % (p.returncode, p.stderr))
    first = [l for l in p.stdout.splitlines() if l.startswith(("first introduced error",
                                                                "no introduced error"))]
    return p.stdout, first[0] if first else ""


def summary(out):
    wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
    rows = list(wb["summary"].iter_rows(values_only=True))
    wb.close()
    return [dict(zip(rows[0], r)) for r in rows[1:]]


def weight_use(root, rank, step=0):
    """(record, role, array) of the first record of the step that takes a
    (64, 32) float tensor as input: fc1.weight's first use, from the file."""
    with h5py.File(os.path.join(root, "step%d" % step, "rank%d" % rank, "dump.h5"), "r") as f:
        recs = sorted((int(f[k].attrs["order"]), k) for k in f.keys()
                      if isinstance(f[k], h5py.Group) and k.endswith(("forward", "forward.0")))
        for _, k in recs:
            for d in sorted(f[k].keys()):
                if not d.startswith("output") and f[k][d].shape == (64, 32):
                    return k, d, f[k][d][()]
    raise AssertionError("no use of fc1.weight in %s" % root)


def input0(root, rank, rec):
    """Step 0's input.0 of record rec on rank, from the file."""
    with h5py.File(os.path.join(root, "step0", "rank%d" % rank, "dump.h5"), "r") as f:
        return f[rec]["input.0"][()]


def rel_err(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@unittest.skipUnless(PRELOAD, "the shim is not built")
class ParameterBeforeAnyOp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="msp-param-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def one_rank(self, mode):
        b = dump(self.work, "b-" + mode, mode, P_SCALE=1)
        c = dump(self.work, "c-" + mode, mode, P_SCALE=1.05)
        rec, role, wc = weight_use(c, 0)
        rec_b, role_b, wb = weight_use(b, 0)
        self.assertEqual((rec, role), (rec_b, role_b))
        # the premise, from the files: the weight differs by 5 % (far above
        # float32 rounding), and nothing differs before its first use
        self.assertAlmostEqual(rel_err(wc, wb), 0.05, places=5)
        out = os.path.join(self.work, "out-" + mode)
        stdout, first = compare(b, c, out)
        self.assertRegex(first, r"^first introduced error: step 0 rank 0 before %s %s, "
                         r"parameter fc1\.weight " % (re.escape(rec), re.escape(role)), stdout)
        root = [r for r in summary(out) if r["Root Cause"] == "ROOT CAUSE"]
        self.assertEqual([(r["Step"], r["Rank"], r["Name"]) for r in root], [(0, 0, rec)])
        self.assertIn("parameter fc1.weight differs before any op of step 0 (rank 0)",
                      root[0]["Reason"])

    def test_api_level_names_the_scaled_weight(self):
        self.one_rank("api")

    def test_mix_level_names_the_scaled_weight(self):
        self.one_rank("mix")

    def test_optimizer_records_name_the_parameters_they_update(self):
        # SGD's and Adam's step records: input.param.i is the i-th of
        # model.parameters(), which the script builds as fc1, fc2 (weight,
        # bias each); the names are the model's, as forward records carry
        from msp_h5dump import record_attrs
        want = {"param.input.param.%d" % i: n for i, n in
                enumerate(["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"])}
        for opt, rec in (("sgd", "Optimizer.SGD.0.step"), ("adam", "Optimizer.Adam.0.step")):
            root = dump(self.work, "opt-" + opt, "api", P_OPT=opt)
            with h5py.File(os.path.join(root, "step0", "rank0", "dump.h5"), "r") as f:
                attrs = record_attrs(f)[rec]
                roles = {r["role"].decode() for r in f["index"][()]
                         if r["record"].decode() == rec}
            self.assertLessEqual({"input.param.%d" % i for i in range(4)}, roles)
            self.assertEqual({k: v for k, v in attrs.items() if k.startswith("param.")}, want)

    def test_module_level_and_msprobe_layout_name_the_module_parameter(self):
        b = dump(self.work, "b-module", "module", P_SCALE=1)
        c = dump(self.work, "c-module", "module", P_SCALE=1.05)
        rec, role, wc = weight_use(c, 0)
        self.assertEqual((rec, role), ("Module.fc1.Linear.forward.0", "parameters.weight"))
        self.assertAlmostEqual(rel_err(wc, weight_use(b, 0)[2]), 0.05, places=5)
        # msprobe's own layout (dump.json, a "parameters" field, no param.*
        # attributes): the name comes from the module's path
        exp = os.path.join(self.work, "c-module-msprobe")
        p = subprocess.run([BIN, "export", "-o", exp, c], capture_output=True, text=True,
                           timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(exp, "step0", "rank0", "dump.json")) as f:
            entry = json.load(f)["data"][rec]
        self.assertEqual(sorted(entry["parameters"]), ["bias", "weight"])
        for cmp_side in (c, exp):
            stdout, first = compare(b, cmp_side, os.path.join(self.work, "out-module"))
            self.assertRegex(first, r"^first introduced error: step 0 rank 0 before %s %s, "
                             r"parameter fc1\.weight " % (re.escape(rec), re.escape(role)),
                             stdout)

    def test_two_ranks_name_the_weight_on_the_rank_it_differs(self):
        b = dump(self.work, "b-2r", "api", ranks=2, P_SCALE=1)
        c = dump(self.work, "c-2r", "api", ranks=2, P_SCALE=1.05, P_SCALE_RANK=1)
        # the premise, from the files: rank 1's weight differs, rank 0's not
        self.assertAlmostEqual(rel_err(weight_use(c, 1)[2], weight_use(b, 1)[2]), 0.05, places=5)
        self.assertEqual(rel_err(weight_use(c, 0)[2], weight_use(b, 0)[2]), 0.0)
        rec, role, _ = weight_use(c, 1)
        out = os.path.join(self.work, "out-2r")
        stdout, first = compare(b, c, out)
        self.assertRegex(first, r"^first introduced error: step 0 rank 1 before %s %s, "
                         r"parameter fc1\.weight " % (re.escape(rec), re.escape(role)), stdout)
        self.assertIn("error first on rank 1 (step 0 %s)" % rec, stdout)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = list(wb["ranks"].iter_rows(values_only=True))
        wb.close()
        by = {r[rows[0].index("Rank")]: dict(zip(rows[0], r)) for r in rows[1:]}
        self.assertEqual(by[1]["Error Origin"], "introduced (first)")
        self.assertEqual((by[1]["Step"], by[1]["Record"]), (0, rec))
        self.assertNotEqual(by[0]["Error Origin"], "introduced (first)")
        root = [r for r in summary(out) if r["Root Cause"] == "ROOT CAUSE"]
        self.assertEqual([(r["Step"], r["Rank"], r["Name"]) for r in root], [(0, 1, rec)])

    def test_summation_order_alone_names_no_parameter(self):
        b = dump(self.work, "b-ctl", "api", ranks=2, P_SCALE=1)
        c = dump(self.work, "c-ctl", "api", ranks=2, P_SCALE=1, P_EXACT=1)
        # the premise: the dump names the parameters (so compare could name
        # one), and every weight is bit-identical at step 0 on both ranks
        for rank in (0, 1):
            with h5py.File(os.path.join(c, "step0", "rank%d" % rank, "dump.h5"), "r") as f:
                attrs = {(r.decode(), k.decode()): v.decode() for r, k, v in f["attrs"][()]}
            self.assertEqual(attrs[("Functional.linear.0.forward", "param.input.1")],
                             "fc1.weight")
            self.assertEqual(attrs[("Functional.linear.1.forward", "param.input.1")],
                             "fc2.weight")
            self.assertEqual(rel_err(weight_use(c, rank)[2], weight_use(b, rank)[2]), 0.0)
        out = os.path.join(self.work, "out-ctl")
        stdout, first = compare(b, c, out)
        self.assertNotIn("parameter", first, stdout)
        self.assertNotIn("differs before any op", stdout)
        for r in summary(out):
            self.assertNotIn("differs before any op", r["Reason"] or "", r)

    def test_a_rank_whose_error_is_its_precision_names_no_collective_elsewhere(self):
        # rank 1 under bf16 autocast, rank 0 in float32 as on the bench side:
        # rank 1's error is its precision's (no suspect of its own), and rank
        # 0's all_reduce only passes it on
        b = dump(self.work, "b-2r-mixed", "api", ranks=2, P_SCALE=1)
        c = dump(self.work, "c-2r-mixed", "api", ranks=2, P_SCALE=1, P_BF16=1, P_SCALE_RANK=1)
        ar = "Distributed.all_reduce.0.forward"
        # the premise, from the files: rank 0's input to it is the bench's bit
        # for bit, rank 1's differs by about bf16's rounding (2^-9 a step)
        self.assertEqual(rel_err(input0(c, 0, ar), input0(b, 0, ar)), 0.0)
        self.assertGreater(rel_err(input0(c, 1, ar), input0(b, 1, ar)), 1e-4)
        self.assertLess(rel_err(input0(c, 1, ar), input0(b, 1, ar)), 0.05)
        out = os.path.join(self.work, "out-2r-mixed")
        stdout, first = compare(b, c, out)
        self.assertEqual(first, "no introduced error found", stdout)
        self.assertIn("ranks: 2, no introduced error; inherited through communication by "
                      "rank 0 from rank 1 via %s" % ar, stdout)
        self.assertNotIn("suspects (", stdout)
        rows = {(r["Step"], r["Rank"], r["Name"]): r for r in summary(out)}
        via = rows[(0, 0, ar)]
        self.assertEqual(via["Error Origin"], "inherited", via)
        self.assertIn("inherited from rank 1 through this call", via["Reason"])
        self.assertEqual([k for k, r in rows.items() if r["Root Cause"] == "ROOT CAUSE"], [])

    def test_another_batch_on_one_rank_is_named_on_that_rank(self):
        b = dump(self.work, "b-2r-x", "api", ranks=2, P_SCALE=1)
        c = dump(self.work, "c-2r-x", "api", ranks=2, P_SCALE=1, P_XSCALE=1.01, P_SCALE_RANK=1)
        first_op = "Functional.linear.0.forward"
        # the premise: rank 1's batch is 1 % off before any op, rank 0's is not
        self.assertAlmostEqual(rel_err(input0(c, 1, first_op), input0(b, 1, first_op)), 0.01,
                               places=6)
        self.assertEqual(rel_err(input0(c, 0, first_op), input0(b, 0, first_op)), 0.0)
        out = os.path.join(self.work, "out-2r-x")
        stdout, first = compare(b, c, out)
        self.assertRegex(first, r"^first introduced error: step 0 rank 1 before %s input\.0 " %
                         re.escape(first_op), stdout)
        self.assertIn("inherited through communication by rank 0 from rank 1", stdout)

    def test_bf16_autocast_against_float32_names_no_parameter(self):
        b = dump(self.work, "b-bf16", "mix", P_SCALE=1)
        c = dump(self.work, "c-bf16", "mix", P_SCALE=1, P_BF16=1)
        # the premise, from the files: the parameters are float32 on both
        # sides (autocast casts copies), and the ops' outputs are not
        with h5py.File(os.path.join(c, "step1", "rank0", "dump.h5"), "r") as f:
            g = f["Module.fc1.Linear.forward.0"]
            self.assertEqual(g["parameters.weight"].attrs["dtype"], "torch.float32")
            self.assertEqual(g["output.0"].attrs["dtype"], "torch.bfloat16")
            wc = g["parameters.weight"][()]
        # at step 1 the weight differs far beyond float32 rounding (2^-24):
        # step 0's bf16 gradients updated it; the step before explains it
        self.assertGreater(rel_err(wc, weight_use(b, 0, step=1)[2]), 1e-4)
        out = os.path.join(self.work, "out-bf16")
        stdout, first = compare(b, c, out)
        self.assertNotIn("parameter", first, stdout)
        self.assertNotIn("differs before any op", stdout)


if __name__ == "__main__":
    unittest.main()
