"""config_check pack names (issue 26, items 8 and 14): processes of one rank
that exit together each keep their own pack (the name is taken atomically,
never by a look then a rename), and a single process that initialises a
torch.distributed world of 1 without RANK writes the plain name, not
NAME_rank0.zip. Real training under the preload shim; packs read back with
zipfile and json."""
import os
import subprocess
import tempfile
import textwrap
import unittest
import zipfile
import json

from cc_testlib import PRELOAD, PYTHON, clean_env

TRAIN = textwrap.dedent("""\
    import os, random, sys, time
    import torch
    random.seed(int(sys.argv[1]))
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.ones(3, 4)).sum().backward()
    opt.step()
    if os.environ.get("CCT_WORLD_OF_ONE"):
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://" + os.environ["CCT_WORLD_OF_ONE"],
                                rank=0, world_size=1)
    barrier = os.environ.get("CCT_BARRIER")
    if barrier:  # every process reaches its exit (and its pack write) at once
        open(os.path.join(barrier, str(os.getpid())), "w").close()
        deadline = time.time() + 60
        while len(os.listdir(barrier)) < int(os.environ["CCT_N"]) and time.time() < deadline:
            time.sleep(0.01)
    """)


class PackNames(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.script = os.path.join(self.d, "train.py")
        with open(self.script, "w") as f:
            f.write(TRAIN)

    def tearDown(self):
        self.tmp.cleanup()

    def start(self, seed, out, **extra):
        env = clean_env(LD_PRELOAD=PRELOAD, MSPROBE_CONFIG_CHECK=out, **extra)
        return subprocess.Popen([PYTHON, self.script, str(seed)], env=env, cwd=self.d,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def test_four_processes_of_one_rank_exiting_together_keep_four_packs(self):
        out = os.path.join(self.d, "packs", "p.zip")
        barrier = os.path.join(self.d, "barrier")
        os.makedirs(barrier)
        procs = [self.start(100 + i, out, CCT_BARRIER=barrier, CCT_N=4) for i in range(4)]
        errs = []
        for p in procs:
            _, err = p.communicate(timeout=300)
            self.assertEqual(p.returncode, 0, err)
            errs.append(err)
        names = sorted(os.listdir(os.path.dirname(out)))
        self.assertEqual(names, ["p-1.zip", "p-2.zip", "p-3.zip", "p.zip"], "\n".join(errs))
        seeds = set()
        for n in names:
            with zipfile.ZipFile(os.path.join(self.d, "packs", n)) as z:
                calls = json.loads(z.read("random.json"))["calls"]
            seeds |= {c["value"] for c in calls if c["value"] in {"100", "101", "102", "103"}}
        self.assertEqual(seeds, {"100", "101", "102", "103"})  # each process's own pack
        # the three that did not get the plain name say which they wrote
        warned = [e for e in errs if "is never replaced" in e]
        self.assertEqual(len(warned), 3, "\n".join(errs))

    def test_a_world_of_one_without_rank_writes_the_plain_name(self):
        out = os.path.join(self.d, "packs", "p.zip")
        p = self.start(5, out, CCT_WORLD_OF_ONE=os.path.join(self.d, "rendezvous"))
        _, err = p.communicate(timeout=300)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(sorted(os.listdir(os.path.dirname(out))), ["p.zip"])
        with zipfile.ZipFile(out) as z:
            m = json.loads(z.read("manifest.json"))
        self.assertEqual((m["rank"], m["world_size"]), (0, 1))


if __name__ == "__main__":
    unittest.main()
