"""Helpers shared by the dump shim tests: run a script under the real preload
library, read dumps back with h5py (independent of msprobe's reader), compare
values bit for bit."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
SOURCE = os.environ.get("MSPROBE_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
TRAIN = os.path.join(SOURCE, "examples", "train.py")


def need_preload(test):
    if not PRELOAD or not os.path.exists(PRELOAD):
        raise unittest.SkipTest("MSPROBE_PRELOAD_LIB not set (run through ctest)")


def config(dump_path, mode="api", steps="all", task="tensor", api_list=(), trigger=None):
    settings = {"dump_mode": mode, "dump_path": dump_path, "dump_iter": steps, "task": task}
    if trigger:
        settings["step_trigger"] = trigger
    return {"dump": {"common_dump_settings": settings,
                     "api_list": [{"name": n, "api_type": t} for n, t in api_list]}}


class ShimCase(unittest.TestCase):
    """A temp dir per test; run() executes a command with the shim preloaded."""

    def setUp(self):
        need_preload(self)
        self.dir = tempfile.mkdtemp(prefix="msp-dump-test-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def write_config(self, cfg, name="msprobe.json"):
        p = self.path(name)
        with open(p, "w") as f:
            if isinstance(cfg, str):
                f.write(cfg)
            else:
                json.dump(cfg, f)
        return p

    def run_cmd(self, argv, cfg_path=None, preload=True, env_extra=None, timeout=600):
        env = dict(os.environ)
        env.pop("MSPROBE_PATH", None)
        env.pop("MSPROBE_LOG_FILE", None)
        if preload:
            env["LD_PRELOAD"] = PRELOAD
        if cfg_path:
            env["MSPROBE_PATH"] = cfg_path
        env.update(env_extra or {})
        return subprocess.run(argv, cwd=self.dir, env=env, capture_output=True, text=True,
                              timeout=timeout)

    def train(self, args, cfg_path=None, preload=True, env_extra=None):
        p = self.run_cmd([PYTHON, TRAIN] + list(args), cfg_path, preload, env_extra)
        self.assertEqual(p.returncode, 0, "train.py failed:\n" + p.stderr[-3000:])
        return p


def dump_files(root):
    """{(step, rank): path} of every dump.h5 under root."""
    out = {}
    for p in glob.glob(os.path.join(root, "step*", "rank*", "dump.h5")):
        rank_dir = os.path.dirname(p)
        step = int(os.path.basename(os.path.dirname(rank_dir))[4:])
        rank = int(os.path.basename(rank_dir)[4:])
        out[(step, rank)] = p
    return out


def read_dump(path):
    """{record: {"attrs": {...}, role: ndarray or None (statistics only)}}, root attrs."""
    import h5py
    from msp_h5dump import record_attrs, stats_rows
    recs = {}
    with h5py.File(path, "r") as f:
        # a statistics dump's root strings are fixed-length: bytes to h5py
        root = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        for name, g in f.items():
            if not isinstance(g, h5py.Group):
                continue
            rec = {"attrs": {k: (v.decode() if isinstance(v, bytes) else v)
                             for k, v in g.attrs.items()}, "tattrs": {}}
            for role, d in g.items():
                rec[role] = None if d.shape is None else d[()]
                rec["tattrs"][role] = {k: (v.decode() if isinstance(v, bytes) else v)
                                       for k, v in d.attrs.items()}
            recs[name] = rec
        # Statistics-only tensors (and records without data) are /index
        # rows alone, or in a statistics dump /stats rows (msprobe-dump(5)),
        # and their attributes /attrs rows.
        for row in stats_rows(f):
            name, role = row["record"], row["role"]
            rec = recs.setdefault(name, {"attrs": {"order": row["order"]}, "tattrs": {}})
            if not role or role in rec:
                continue
            rec[role] = None
            rec["tattrs"][role] = {k: row[k] for k in (
                "dtype", "max", "min", "mean", "norm", "nan_count", "inf_count", "crc32",
                "device", "requires_grad")}
            rec["tattrs"][role]["shape"] = np.asarray(row["shape"], dtype=np.int64)
            if row["producer"]:
                rec["tattrs"][role]["producer"] = row["producer"]
        for name, a in record_attrs(f).items():
            recs.setdefault(name, {"attrs": {}, "tattrs": {}})["attrs"].update(a)
    return recs, root


def assert_same(test, dumped, recorded, what):
    """Bit-for-bit when both have the same dtype; otherwise (bf16 read as float32
    by h5py, recorded as float64) exact value equality, NaNs and signs included."""
    test.assertIsNotNone(dumped, what + ": no data")
    dumped = np.asarray(dumped)
    recorded = np.asarray(recorded)
    test.assertEqual(dumped.shape, recorded.shape, what + ": shape")
    if dumped.dtype == recorded.dtype:
        same = dumped.tobytes() == recorded.tobytes()
    else:
        a = dumped.astype(np.float64)
        b = recorded.astype(np.float64)
        same = (np.array_equal(np.isnan(a), np.isnan(b)) and
                np.array_equal(np.signbit(a), np.signbit(b)) and
                np.array_equal(a[~np.isnan(a)], b[~np.isnan(b)]))
    test.assertTrue(same, "%s: dumped values differ from the script's own record" % what)


def losses(stdout):
    return [l.split()[-1] for l in stdout.splitlines() if l.startswith("step ")]
