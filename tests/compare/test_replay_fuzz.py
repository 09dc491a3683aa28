"""A fuzz campaign over record names and argument texts against the replay
worker: no call outside the allow-list.

The allow-list is the list of APIs the dump shim wraps in this torch, as the
shim itself prints it (`msprobe dump --list-apis`, run in a Python with the
real preload library): a dump cannot hold a record of anything else. The
harness (replay_fuzz_harness.py) runs MSP_FUZZ_RUNS (10,000) random jobs
through the worker's replay(), a recorder around every public callable of
torch, torch.nn.functional, torch._VF and torch.Tensor and an audit hook
watching writes, exec, imports, unpickling and sockets. Judged here:
  * every outermost call a job made is on the shim's list, or is one of the
    worker's own steps that no record names (decode, cast, measure: PLUMBING);
  * no call is ever one of FORBIDDEN (named by hand: loaders, savers, files,
    global state), whatever list the shim printed;
  * no audit event of those kinds;
  * and the campaign was not empty: thousands of hostile names were sent,
    and hundreds of jobs did reach an API of the list."""
import collections
import json
import os
import subprocess
import tempfile
import unittest

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
SOURCE = os.environ.get("MSPROBE_SOURCE_DIR",
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = int(os.environ.get("MSP_FUZZ_RUNS", "10000"))

# What the worker calls itself around a record's call: reading tensors from
# bytes, casting, measuring errors, the random signs (a fixed generator) of a
# kernel bound's perturbation. None is named by a record.
PLUMBING = {"torch.is_tensor", "torch.randint", "torch.frombuffer", "torch.empty",
            "torch.isfinite", "torch.isnan", "torch.Tensor.clone", "torch.Tensor.double",
            "torch.Tensor.to",
            "torch.Tensor.reshape", "torch.Tensor.norm", "torch.Tensor.is_floating_point",
            "torch.Tensor.detach", "torch.Tensor.requires_grad_", "torch.Tensor.__getitem__",
            "torch.Tensor.__sub__", "torch.Tensor.__and__", "torch.Tensor.__or__",
            "torch.Tensor.__invert__", "torch.Tensor.__eq__", "torch.Tensor.__ne__",
            "torch.Tensor.all", "torch.Tensor.mean", "torch.Tensor.numel", "torch.Tensor.float",
            "torch.Tensor.dim", "torch.Tensor.size", "torch.Tensor.abs", "torch.Tensor.sum",
            "torch.Tensor.max", "torch.Tensor.min", "torch.Tensor.item", "torch.Tensor.nelement",
            "torch.Tensor.__truediv__", "torch.Tensor.__mul__", "torch.Tensor.__gt__",
            "torch.Tensor.__lt__", "torch.Tensor.__ge__", "torch.Tensor.__le__",
            "torch.get_num_threads", "torch.zeros", "torch.is_grad_enabled", "torch.is_same_size",
            # torch.autocast's own steps, when the worker replays under autocast
            "torch.autocast_decrement_nesting", "torch.autocast_increment_nesting",
            "torch.clear_autocast_cache", "torch.get_autocast_cpu_dtype",
            "torch.is_autocast_cache_enabled", "torch.is_autocast_cpu_enabled",
            "torch.set_autocast_cache_enabled", "torch.set_autocast_cpu_dtype",
            "torch.set_autocast_cpu_enabled"}
FORBIDDEN_NAMES = {"load", "save", "from_file", "set_default_dtype", "set_autocast_enabled",
                   "manual_seed", "seed", "set_rng_state", "set_num_threads",
                   "use_deterministic_algorithms", "set_grad_enabled", "set_printoptions",
                   "set_flush_denormal", "compile", "register_hook", "backward", "numpy",
                   "tolist", "storage", "share_memory_", "apply_", "map_", "set_", "resize_",
                   "__setattr__", "__reduce_ex__", "__reduce__", "__setstate__", "__deepcopy__",
                   "__dir__", "handle_torch_function"}


def shim_list(path):
    env = dict(os.environ, MSPROBE_PRELOAD_LIB=PRELOAD) if PRELOAD else dict(os.environ)
    p = subprocess.run([BIN, "dump", "--list-apis", "--", PYTHON], capture_output=True,
                       text=True, timeout=300, env=env)
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    with open(path, "w") as f:
        f.write(p.stdout)
    return {line.split("\t")[0] for line in p.stdout.splitlines()
            if "\t" in line and not line.startswith("#")}


class ReplayFuzz(unittest.TestCase):
    def test_random_names_and_arguments_reach_no_call_outside_the_allow_list(self):
        work = tempfile.mkdtemp(prefix="msp-fuzz-")
        apis_file = os.path.join(work, "apis.tsv")
        shim = shim_list(apis_file)
        self.assertGreater(len(shim), 500)
        env = dict(os.environ, MSP_FUZZ_APIS=apis_file, OMP_NUM_THREADS="1")
        p = subprocess.run([PYTHON, os.path.join(HERE, "replay_fuzz_harness.py"), SOURCE,
                            str(RUNS), "20261202"], capture_output=True, text=True,
                           timeout=1800, env=env, cwd=work)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        res = json.loads(p.stdout)
        jobs = res["jobs"]
        self.assertEqual(len(jobs), RUNS)
        outside = collections.Counter()
        forbidden = collections.Counter()
        reached = collections.Counter()
        for api, name, calls in jobs:
            for c in calls:
                if c not in shim and c not in PLUMBING and not c.startswith("torch.optim."):
                    outside[(c, name)] += 1
                if c.rsplit(".", 1)[-1] in FORBIDDEN_NAMES:
                    forbidden[(c, name)] += 1
                if c in shim and c not in PLUMBING:
                    reached[c] += 1
        self.assertEqual(dict(forbidden), {})
        self.assertEqual(dict(outside), {})
        self.assertEqual(res["events"], {})
        # the worker's own allow-list is within the shim's
        self.assertEqual(set(res["allowed"]) - shim, set())
        # not an empty campaign
        hostile = sum(1 for api, _, _ in jobs
                      if api.rsplit(".", 1)[-1] in FORBIDDEN_NAMES or "__" in api)
        self.assertGreater(hostile, RUNS // 5)
        self.assertGreater(res["statuses"].get("ok", 0), RUNS // 100, res["statuses"])
        self.assertGreater(len(reached), 100, res["statuses"])


if __name__ == "__main__":
    unittest.main()
