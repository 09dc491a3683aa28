"""Four ranks talking to each other under the real preload shim (gloo on the
CPU): a torchvision SqueezeNet under DistributedDataParallel and a small
tensor-parallel MLP written with torch.distributed calls
(multirank_train.py), started as torchrun starts them (msp_launch).

Each check reads the dumps with h5py and compares them with what the script
itself logged of every collective it called (values as numpy arrays), or
with a run without the shim; never with msprobe's own reader.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np
from msp_h5dump import record_attrs

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402
import msp_launch  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multirank_train.py")
BIN = os.environ.get("MSPROBE_BIN", "msprobe")
WORLD = 4
STEPS = 3


def setUpModule():
    global WORK, RUNS
    dt.need_preload(None)
    WORK = tempfile.mkdtemp(prefix="msp-multirank-")
    RUNS = {}
    ok, why = msp_launch.torchrun_usable()
    print("launcher: %s" % ("torchrun" if ok else "torchrun's environment (torchrun here: %s)"
                            % why), file=sys.stderr)


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


def run(tag, preload=True, cfg=None, extra=None):
    """Run the four ranks once per tag; returns (root, Ranks)."""
    if tag in RUNS:
        return RUNS[tag]
    root = os.path.join(WORK, tag)
    os.makedirs(os.path.join(root, "log"))
    env = dict(os.environ, OMP_NUM_THREADS="1", T_STEPS=str(STEPS),
               T_LOG_DIR=os.path.join(root, "log"))
    env.pop("MSPROBE_LOG_FILE", None)
    env.pop("MSPROBE_PATH", None)
    if preload:
        c = cfg or dt.config(os.path.join(root, "dump"))
        path = os.path.join(root, "msprobe.json")
        with open(path, "w") as f:
            json.dump(c, f)
        env.update(LD_PRELOAD=dt.PRELOAD, MSPROBE_PATH=path)
    env.update(extra or {})
    r = msp_launch.launch(SCRIPT, WORLD, env, root, timeout=600)
    RUNS[tag] = (root, r)
    return RUNS[tag]


def logged_calls(root, rank):
    """The collectives the script called on rank, in order: (api, group, peer,
    arrays {"in/ROLE": a, "out/ROLE": a}) for those that ran; the ones gloo
    refused are left out (they raised; there is nothing to record)."""
    z = np.load(os.path.join(root, "log", "rank%d.npz" % rank))
    calls = []
    for k, m in enumerate(z["meta"]):
        api, group, peer, ok = str(m).split("|")
        if ok != "1":
            continue
        pre = "c%d/" % k
        arrays = {n[len(pre):]: z[n] for n in z.files if n.startswith(pre)}
        calls.append((api, group, int(peer), arrays))
    return calls


def dumped_collectives(root, rank):
    """Distributed.* records of every step of rank, in step then execution order."""
    out = []
    for step in range(STEPS):
        with h5py.File(os.path.join(root, "dump", "step%d" % step, "rank%d" % rank, "dump.h5"),
                       "r") as f:
            order = {r["record"].decode(): int(r["order"]) for r in f["index"][()]}
            ra = record_attrs(f)
            recs = [(o, k) for k, o in order.items() if k.startswith("Distributed.")]
            for o, k in sorted(recs):
                g = f[k] if k in f else {}
                arrays = {("in/" if n.startswith("input") else "out/") + n: g[n][()]
                          for n in g.keys()}
                attrs = dict(ra.get(k, {}), order=str(o))
                out.append((k, attrs, arrays))
    return out


class MultiRankDump(unittest.TestCase):
    def test_each_rank_writes_its_own_rank_directory_for_every_step(self):
        root, r = run("full")
        r.check()
        for step in range(STEPS):
            for rank in range(WORLD):
                p = os.path.join(root, "dump", "step%d" % step, "rank%d" % rank, "dump.h5")
                with h5py.File(p, "r") as f:
                    self.assertEqual(int(f.attrs["rank"]), rank)
                    self.assertEqual(int(f.attrs["step"]), step)
                    self.assertEqual(int(f.attrs["world_size"]), WORLD)
            self.assertEqual(sorted(os.listdir(os.path.join(root, "dump", "step%d" % step))),
                             ["rank%d" % k for k in range(WORLD)])

    def test_every_collective_is_recorded_with_its_values_group_and_peer(self):
        root, r = run("full")
        r.check()
        for rank in range(WORLD):
            want = logged_calls(root, rank)
            got = dumped_collectives(root, rank)
            self.assertEqual([c[0] for c in want],
                             [k.split(".")[1] for k, _, _ in got], "rank %d" % rank)
            apis = {c[0] for c in want}
            # the tensor-parallel layer's collectives, or what it falls back on
            self.assertTrue({"broadcast", "all_reduce", "send", "recv"} <= apis, apis)
            self.assertTrue({"all_gather_into_tensor", "all_gather"} & apis, apis)
            for (api, group, peer, arrays), (name, attrs, values) in zip(want, got):
                self.assertEqual(attrs.get("group"), group, name)
                if peer >= 0:
                    self.assertEqual(attrs.get("peer"), str(peer), name)
                else:
                    self.assertNotIn("peer", attrs, name)
                self.assertEqual(sorted(arrays), sorted(values), name)
                for role, a in arrays.items():
                    self.assertEqual(values[role].dtype, a.dtype, (name, role))
                    self.assertTrue(np.array_equal(values[role], a), (name, role))

    def test_a_group_of_two_is_named_by_its_global_ranks(self):
        root, r = run("full")
        r.check()
        for rank in range(WORLD):
            groups = {attrs["group"] for k, attrs, _ in dumped_collectives(root, rank)
                      if k.startswith("Distributed.all_reduce.")}
            self.assertEqual(groups, {"0-1" if rank < 2 else "2-3"})

    def test_losses_bit_identical_with_and_without_the_shim(self):
        _, a = run("full")
        _, b = run("plain", preload=False)
        a.check()
        b.check()
        la, lb = msp_launch.losses(a), msp_launch.losses(b)
        self.assertEqual(len(lb), WORLD * STEPS)
        self.assertEqual(la, lb)

    def test_config_check_packs_compare_clean_rank_by_rank(self):
        packs = {}
        for tag in ("cc-a", "cc-b"):
            root = os.path.join(WORK, tag)
            cfg = dt.config(os.path.join(root, "dump"), steps="0", task="statistics")
            cfg["config_check"] = {"output_zip_path": os.path.join(root, "pack.zip")}
            root, r = run(tag, cfg=cfg)
            r.check()
            packs[tag] = root
            self.assertEqual(sorted(f for f in os.listdir(root) if f.endswith(".zip")),
                             ["pack_rank%d.zip" % k for k in range(WORLD)])
        for rank in range(WORLD):
            p = subprocess.run([BIN, "config_check", "-c",
                                os.path.join(packs["cc-a"], "pack_rank%d.zip" % rank),
                                os.path.join(packs["cc-b"], "pack_rank%d.zip" % rank),
                                "-o", os.path.join(WORK, "cc-%d" % rank)],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # across the ranks of one run the setup is the same (env, pip,
        # hyperparameters); each rank's data shard and tensor-parallel slice are not
        p = subprocess.run([BIN, "config_check", "-c",
                            os.path.join(packs["cc-a"], "pack_rank0.zip"),
                            os.path.join(packs["cc-a"], "pack_rank3.zip"),
                            "-o", os.path.join(WORK, "cc-03")],
                           capture_output=True, text=True, timeout=300)
        status = {w[0]: w[1] for w in (l.split() for l in p.stdout.splitlines())
                  if len(w) >= 2 and w[1] in ("pass", "FAIL")}
        for item in ("env", "pip", "hyperparameters"):
            self.assertEqual(status.get(item), "pass", p.stdout)
        self.assertEqual(status.get("dataset"), "FAIL", p.stdout)

    def test_sigkill_of_one_rank_loses_no_finished_step_on_the_others(self):
        full, a = run("full")
        a.check()
        root, r = run("kill", extra={"T_KILL_RANK": "3", "T_KILL_STEP": "2"})
        self.assertEqual(r.codes[3], -9, r.errs[3][-2000:])
        for rank in range(3):
            # the peer's death stops the others in the next collective
            self.assertNotEqual(r.codes[rank], 0)
            for step in range(2):  # the steps that finished before the kill
                self.assertIn("rank %d step %d loss" % (rank, step), r.outs[rank])
                ours = os.path.join(root, "dump", "step%d" % step, "rank%d" % rank, "dump.h5")
                ref = os.path.join(full, "dump", "step%d" % step, "rank%d" % rank, "dump.h5")
                with h5py.File(ours, "r") as f, h5py.File(ref, "r") as g:
                    names = sorted(k for k in g.keys() if isinstance(g[k], h5py.Group))
                    self.assertEqual(sorted(k for k in f.keys()
                                            if isinstance(f[k], h5py.Group)), names)
                    # the same arguments (their texts may hold object addresses)
                    self.assertEqual({r: sorted(a) for r, a in record_attrs(f).items()},
                                     {r: sorted(a) for r, a in record_attrs(g).items()})
                    for k in names:
                        for d in g[k].keys():
                            self.assertTrue(np.array_equal(f[k][d][()], g[k][d][()],
                                                           equal_nan=True), (rank, step, k, d))

    def test_ranks_outside_the_rank_set_dump_nothing_and_run_unhooked(self):
        root = os.path.join(WORK, "sel")
        cfg = dt.config(os.path.join(root, "dump"))
        cfg["dump"]["common_dump_settings"]["rank"] = [0, 2]
        root, r = run("sel", cfg=cfg)
        r.check()
        for step in range(STEPS):
            self.assertEqual(sorted(os.listdir(os.path.join(root, "dump", "step%d" % step))),
                             ["rank0", "rank2"])
        for rank in range(WORLD):
            said = "rank %d is not in the config's rank set" % rank in r.errs[rank]
            self.assertEqual(said, rank in (1, 3), r.errs[rank][-2000:])
        _, plain = run("plain", preload=False)
        self.assertEqual(msp_launch.losses(r), msp_launch.losses(plain))


if __name__ == "__main__":
    unittest.main(verbosity=2)
