"""A disk that fills up mid-run (issue 26, item 14): the steps whose files
could not be written are named in one warning at exit, so the user knows
which to dump again; the others are on disk (checked with h5py). The full
disk is tests/dump/full_disk.c, preloaded beside the shim: every write to a
file under step2/ or step3/ fails with ENOSPC."""
import glob
import os
import sys
import unittest

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

FULL = sys.argv.pop(1) if len(sys.argv) > 1 and sys.argv[1].endswith(".so") else ""

SCRIPT = r'''
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    opt.zero_grad()
    model(torch.randn(32, 64)).square().mean().backward()
    opt.step()
print("trained")
'''


class DiskFull(dt.ShimCase):
    def test_lost_steps_are_named_at_exit(self):
        if not FULL:
            self.skipTest("no full-disk library given")
        cfg = self.write_config(dt.config("./d"))
        with open(self.path("t.py"), "w") as f:
            f.write(SCRIPT)
        p = self.run_cmd([dt.PYTHON, "t.py"], cfg,
                         env_extra={"LD_PRELOAD": FULL + ":" + dt.PRELOAD,
                                    "FULL_DISK_PATHS": "/step2/,/step3/"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("trained", p.stdout)
        written = sorted(int(d.split("step")[-1].split("/")[0])
                         for d in glob.glob(self.path("d", "step*", "rank0", "dump.h5")))
        self.assertEqual(written, [0, 1, 4, 5])
        for s in written:
            with h5py.File(self.path("d", "step%d" % s, "rank0", "dump.h5"), "r") as f:
                self.assertEqual(int(f.attrs["step"]), s)
        lost = [ln for ln in p.stderr.splitlines() if "these steps were lost" in ln]
        self.assertEqual(len(lost), 1, p.stderr)
        self.assertIn("lost: 2-3 dropped (no dump file);", lost[0])


if __name__ == "__main__":
    unittest.main()
