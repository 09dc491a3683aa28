"""Two four-rank dumps for the cross-rank tests: the same gloo job twice
(tests/dump/multirank_train.py: DDP SqueezeNet and a tensor-parallel MLP over
groups {0,1} and {2,3}), the second with rank 2's slice of the
tensor-parallel weight changed by 1e-3. The error starts on rank 2 and reaches
rank 3 only through the group's communication; ranks 0 and 1 never see it.

What the tests expect is found here from the dumps with h5py and numpy, never
from msprobe: the first record of each rank whose tensors differ between the
two runs."""
import json
import os
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("MSPROBE_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(SOURCE, "tests", "lib"))
import msp_launch  # noqa: E402

SCRIPT = os.path.join(SOURCE, "tests", "dump", "multirank_train.py")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
WORLD = 4
STEPS = 2


def dump(root, wnoise, task="tensor"):
    """One run of the job under the shim into root; returns root."""
    if os.path.isdir(root):
        return root
    os.makedirs(root + ".cwd")
    cfg = {"dump": {"common_dump_settings": {"dump_mode": "api", "dump_path": root,
                                             "dump_iter": "all", "task": task},
                    "api_list": []}}
    path = root + ".json"
    with open(path, "w") as f:
        json.dump(cfg, f)
    env = dict(os.environ, LD_PRELOAD=PRELOAD, MSPROBE_PATH=path, OMP_NUM_THREADS="1",
               T_STEPS=str(STEPS), T_WNOISE=str(wnoise))
    env.pop("MSPROBE_LOG_FILE", None)
    msp_launch.launch(SCRIPT, WORLD, env, root + ".cwd", timeout=600).check()
    return root


def records(path):
    """{name: {role: array}} of one dump file, and the names by execution order."""
    out, order = {}, []
    with h5py.File(path, "r") as f:
        for k in f.keys():
            if k == "index" or not isinstance(f[k], h5py.Group):
                continue
            g = f[k]
            # grad_fn.K: msprobe's autograd-order view of a backward record,
            # compared only against msprobe's own dumps (msprobe-dump(5))
            out[k] = {d: g[d][()] for d in g.keys()
                      if isinstance(g[d], h5py.Dataset) and not d.startswith("grad_fn.")}
            order.append((int(g.attrs["order"]), k))
    return out, [k for _, k in sorted(order)]


def first_difference(bench, cmp, rank):
    """(step, record) of the first record of rank (steps in order, then
    execution order) whose tensors differ between the two dumps, or None."""
    for step in range(STEPS):
        p = os.path.join("step%d" % step, "rank%d" % rank, "dump.h5")
        b, _ = records(os.path.join(bench, p))
        c, order = records(os.path.join(cmp, p))
        for name in order:
            for role, a in c[name].items():
                other = b.get(name, {}).get(role)
                if other is None or a.shape != other.shape or \
                        not np.array_equal(a, other, equal_nan=True):
                    return step, name
    return None


def counts(cmp, rank):
    """Records and tensor rows of rank over every step, as the two identical
    layouts give them (one row per dataset)."""
    recs = tens = 0
    for step in range(STEPS):
        c, _ = records(os.path.join(cmp, "step%d" % step, "rank%d" % rank, "dump.h5"))
        recs += len(c)
        tens += sum(len(v) for v in c.values())
    return recs, tens
