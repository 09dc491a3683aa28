"""overflow_check and the overflow_check dump task on real training runs
(tests/precheck/nan_train.py) dumped under the real preload shim: resnet18
under bfloat16 autocast with a planted float16 overflow or log of a negative
number, a control run, and two ranks over gloo where rank 1 makes the NaN and
an all_reduce carries it to rank 0.

What each test expects is read from the dumps with h5py (the planted record
is the only float16 multiply, or the only log; NaN/Inf counts and input
minima are the dump's own attributes), never from msprobe's output."""
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import h5py
from msp_h5dump import record_attrs, stats_rows
from msp_launch import free_port
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "nan_train.py")
PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
BIN = os.environ.get("MSPROBE_BIN", "msprobe")


def config(root, task="statistics", mode="mix", **extra):
    s = {"dump_mode": mode, "dump_path": root, "dump_iter": "all", "task": task}
    s.update(extra)
    return {"dump": {"common_dump_settings": s}}


def dump_run(name, args, cfg_root=None, env=None, **cfg):
    root = os.path.join(WORK, name)
    if os.path.isdir(root):
        return root
    path = root + ".json"
    with open(path, "w") as f:
        json.dump(config(cfg_root or root, **cfg), f)
    e = dict(os.environ, LD_PRELOAD=PRELOAD, MSPROBE_PATH=path, OMP_NUM_THREADS="2")
    e.update(env or {})
    p = subprocess.run([PYTHON, TRAIN] + args, cwd=WORK, env=e, capture_output=True, text=True,
                       timeout=900)
    if p.returncode != 0:
        raise RuntimeError("%s failed:\n%s" % (name, p.stderr[-3000:]))
    return root


def setUpModule():
    global WORK
    if not PRELOAD or not os.path.exists(PRELOAD):
        raise unittest.SkipTest("MSPROBE_PRELOAD_LIB not set (run through ctest)")
    WORK = tempfile.mkdtemp(prefix="msp-nan-real-")


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


def overflow_check(path, *extra):
    out = os.path.join(WORK, "out-%d" % len(os.listdir(WORK)))
    p = subprocess.run([BIN, "overflow_check", "-i", path, "-o", out, *extra],
                       capture_output=True, text=True, timeout=600)
    self_json = glob.glob(os.path.join(out, "anomaly_analyze_*.json"))
    rep = None
    if self_json:
        with open(self_json[0]) as f:
            rep = json.load(f)
    return p.returncode, p.stdout, p.stderr, rep


def records(path):
    """{name: (order, record attrs, {role: tensor attrs})} of one dump file, with
    h5py: each tensor's statistics from /index, or /stats in a statistics
    dump (msprobe-dump(5)), record attributes from /attrs."""
    out = {}
    with h5py.File(path, "r") as f:
        ra = record_attrs(f)
        for row in stats_rows(f):
            name, role = row["record"], row["role"]
            rec = out.setdefault(name, (row["order"], ra.get(name, {}), {}))
            if role:
                rec[2][role] = {k: row[k] for k in ("max", "min", "nan_count", "inf_count")}
                rec[2][role]["dtype"] = row["dtype"]
    return out


def abnormal(tensor_attrs):
    return int(tensor_attrs["nan_count"]) + int(tensor_attrs["inf_count"]) > 0


def outputs_abnormal(rec):
    return any(abnormal(a) for r, a in rec[2].items() if r.startswith("output"))


def origin_line(stdout):
    return next((l for l in stdout.splitlines() if l.startswith("origin: ")), "")


class PlantedInResnet(unittest.TestCase):
    def planted(self, root, pred):
        recs = records(os.path.join(root, "step0", "rank0", "dump.h5"))
        hits = [n for n, r in recs.items() if pred(n, r)]
        self.assertEqual(len(hits), 1, hits)
        return hits[0], recs

    def test_float16_overflow_is_named_and_called_an_overflow(self):
        root = dump_run("fp16", ["resnet", "fp16_overflow", "2"])
        name, recs = self.planted(root, lambda n, r: n.startswith("Tensor.__mul__.") and
                                  n.endswith(".forward") and
                                  r[2]["input.0"]["dtype"] == "torch.float16")
        rc, so, se, rep = overflow_check(root)
        self.assertEqual(rc, 1, se)
        line = origin_line(so)
        self.assertTrue(line.startswith("origin: step 0 rank 0 %s (#%d in execution order): "
                                        % (name, recs[name][0])), line)
        inp, out = recs[name][2]["input.0"], recs[name][2]["output.0"]
        self.assertIn("overflow: finite inputs (largest magnitude %.6g)"
                      % max(abs(float(inp["max"])), abs(float(inp["min"]))), line)
        self.assertIn("float16's largest finite value 65504", line)
        self.assertIn("%d NaN, %d Inf" % (int(out["nan_count"]), int(out["inf_count"])), line)
        self.assertGreater(int(out["inf_count"]), 0)
        node = rep["rank_0"][0]
        self.assertEqual(node["op_name"], name)
        # construct_info: the module forwards whose [order_begin, order) holds it
        order = recs[name][0]
        mods = [(r[0] - int(r[1]["order_begin"]), n) for n, r in recs.items()
                if n.startswith("Module.") and ".forward." in n and "order_begin" in r[1]
                and int(r[1]["order_begin"]) <= order < r[0]]
        want = [n for _, n in sorted(mods, reverse=True)] + [name]
        self.assertEqual(node["construct_info"], want)
        self.assertTrue(any(".Planted.forward." in m for m in want), want)

    def test_log_of_a_negative_is_nan_from_finite_inputs(self):
        root = dump_run("log", ["resnet", "log_negative", "2"])
        name, recs = self.planted(root, lambda n, r: n.startswith("Torch.log.") and
                                  n.endswith(".forward"))
        rc, so, _, rep = overflow_check(root)
        line = origin_line(so)
        self.assertIn("step 0 rank 0 %s " % name, line)
        self.assertIn("log of a negative number (input.0 min %.6g)"
                      % float(recs[name][2]["input.0"]["min"]), line)
        # bfloat16 activations of exactly 0.5 make log(0) = -inf beside the NaN
        infs = int(recs[name][2]["output.0"]["inf_count"])
        self.assertEqual("log of zero is -inf" in line, infs > 0, line)
        self.assertIn("NaN and Inf from finite inputs" if infs else "NaN from finite inputs", line)
        self.assertEqual(rep["rank_0"][0]["op_name"], name)

    def test_control_run_has_no_anomaly(self):
        root = dump_run("none", ["resnet", "none", "2"])
        rc, so, _, rep = overflow_check(root)
        self.assertEqual((rc, so), (0, "Cannot find any anomaly node, no need to generate "
                                       "analyze file.\n"))
        self.assertIsNone(rep)

    def test_a_later_step_alone_says_the_cause_lies_before_it(self):
        root = dump_run("log", ["resnet", "log_negative", "2"])
        # step 1 starts from parameters the NaN gradients of step 0 made NaN
        recs = records(os.path.join(root, "step1", "rank0", "dump.h5"))
        first = min(recs.items(), key=lambda kv: kv[1][0])
        rc, so, _, rep = overflow_check(root, "--steps", "1")
        self.assertEqual(rc, 1)
        self.assertIn("Cannot find any anomaly node", so)
        self.assertIn("abnormal inputs already", so)
        self.assertTrue(any(abnormal(a) for r, a in first[1][2].items() if not r.startswith("output")))


class OverflowTask(unittest.TestCase):
    """task overflow_check against a full statistics dump of the same run."""

    def test_first_overflow_and_the_call_before_it_only(self):
        full = dump_run("fp16", ["resnet", "fp16_overflow", "2"])
        ovf = dump_run("fp16-task1", ["resnet", "fp16_overflow", "2"], task="overflow_check",
                       overflow_nums=1)
        self.assertEqual(sorted(glob.glob(os.path.join(ovf, "step*", "rank*", "dump.h5"))),
                         [os.path.join(ovf, "step0", "rank0", "dump.h5")])
        got = records(os.path.join(ovf, "step0", "rank0", "dump.h5"))
        want = records(os.path.join(full, "step0", "rank0", "dump.h5"))
        by_order = sorted(want.items(), key=lambda kv: kv[1][0])
        first_bad = next(i for i, (n, r) in enumerate(by_order) if outputs_abnormal(r))
        self.assertEqual(sorted(got, key=lambda n: got[n][0]),
                         [by_order[first_bad - 1][0], by_order[first_bad][0]])
        with h5py.File(os.path.join(ovf, "step0", "rank0", "dump.h5"), "r") as f:
            self.assertEqual(f.attrs["task"], "overflow_check")
            ds = f[by_order[first_bad][0]]["output.0"]
            self.assertIsNotNone(ds.shape)  # the tensor itself, not statistics
            self.assertEqual(int(np.isinf(ds[()].astype(np.float64)).sum()),
                             int(want[by_order[first_bad][0]][2]["output.0"]["inf_count"]))

    def test_unlimited_keeps_every_overflow_and_the_call_before_each(self):
        full = dump_run("fp16", ["resnet", "fp16_overflow", "2"])
        ovf = dump_run("fp16-taskall", ["resnet", "fp16_overflow", "2"], task="overflow_check",
                       overflow_nums=-1)
        for step in (0, 1):
            got = records(os.path.join(ovf, "step%d" % step, "rank0", "dump.h5"))
            want = records(os.path.join(full, "step%d" % step, "rank0", "dump.h5"))
            bad = {n for n, r in want.items() if outputs_abnormal(r)}
            order_of = {r[0]: n for n, r in want.items()}
            before = {order_of[want[n][0] - 1] for n in bad if want[n][0] - 1 in order_of}
            self.assertEqual(set(got), bad | before)
            self.assertEqual({n: r[0] for n, r in got.items()}, {n: want[n][0] for n in got})


class TwoRanks(unittest.TestCase):
    def test_rank_1_made_the_nan_and_the_all_reduce_carried_it_to_rank_0(self):
        root = os.path.join(WORK, "dist")
        cfg = root + ".json"
        with open(cfg, "w") as f:
            json.dump(config(root, mode="api"), f)
        port = str(free_port())
        procs = []
        for rank in range(2):
            env = dict(os.environ, LD_PRELOAD=PRELOAD, MSPROBE_PATH=cfg, MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=port, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                       OMP_NUM_THREADS="1")
            procs.append(subprocess.Popen([PYTHON, TRAIN, "dist", "log_negative"], env=env,
                                          cwd=WORK, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        for p in procs:
            _, err = p.communicate(timeout=600)
            self.assertEqual(p.returncode, 0, err[-3000:])
        r0 = records(os.path.join(root, "step0", "rank0", "dump.h5"))
        r1 = records(os.path.join(root, "step0", "rank1", "dump.h5"))
        logs = [n for n in r1 if n.startswith("Torch.log.") and n.endswith(".forward")]
        self.assertEqual(len(logs), 1)
        self.assertFalse([n for n in r0 if n.startswith("Torch.log.")])
        ar = "Distributed.all_reduce.0.forward"
        # on rank 0 the all_reduce got finite inputs and returned NaN
        self.assertFalse(abnormal(r0[ar][2]["input.0"]))
        self.assertTrue(abnormal(r0[ar][2]["output.0"]))
        rc, so, se, rep = overflow_check(root)
        self.assertEqual(rc, 1, se)
        self.assertIn("origin: step 0 rank 1 %s " % logs[0], so)
        self.assertIn("log of a negative number", origin_line(so))
        chain = so.split("chain:\n")[1].split("first anomaly per rank:")[0]
        self.assertRegex(chain, r"rank 1 %s  sent it\n" % re.escape(ar))
        self.assertRegex(chain, r"rank 0 %s  received it from rank 1\n" % re.escape(ar))
        self.assertEqual(list(rep), ["rank_1", "rank_0"])
        self.assertEqual(rep["rank_1"][0]["op_name"], logs[0])
        self.assertEqual(rep["rank_0"][0]["op_name"], ar)


if __name__ == "__main__":
    unittest.main(verbosity=2)
