"""Per-sample seed calls of a dataset (issue 26, item 14): torchvision's
FakeData seeds torch once per sample inside __getitem__, which runs in a
DataLoader fetch. Each call is in random.json (value, function, line), and
two runs whose datasets seed differently are one finding in the report, not
one per call, as msprobe-config_check(1) says. Real training under the
preload shim; packs read with zipfile, the report with openpyxl."""
import json
import os
import tempfile
import unittest
import zipfile

from cc_testlib import msprobe, run_under_shim, sheet_rows

SCRIPT = """
import sys, torch, torchvision
import torchvision.transforms as T
from torch.utils.data import DataLoader
ds = torchvision.datasets.FakeData(size=8, image_size=(1, 8, 8), num_classes=3,
                                   transform=T.ToTensor(), random_offset=int(sys.argv[1]))
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
torch.manual_seed(1)
for x, y in DataLoader(ds, batch_size=4, num_workers=0):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
"""


class DatasetSeeds(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        script = os.path.join(d, "train.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        cls.packs = {}
        for name, offset in (("a", 0), ("b", 100)):
            z = os.path.join(d, name + ".zip")
            r = run_under_shim([script, str(offset)], z, d)
            assert r.returncode == 0, r.stderr
            cls.packs[name] = z
        cls.out = os.path.join(d, "out")
        cls.report = msprobe("-f", "pytorch", "config_check", "-c", cls.packs["a"], cls.packs["b"],
                             "-o", cls.out)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def calls(self, name):
        with zipfile.ZipFile(self.packs[name]) as z:
            return json.loads(z.read("random.json"))["calls"]

    def test_each_per_sample_seed_call_is_recorded(self):
        for name, offset in (("a", 0), ("b", 100)):
            per_sample = [c for c in self.calls(name) if c.get("function") == "__getitem__"]
            # FakeData seeds with index + random_offset, samples 0..7 in order
            self.assertEqual([c["value"] for c in per_sample], [str(offset + i) for i in range(8)])
            self.assertTrue(all(c["api"] == "torch.manual_seed" for c in per_sample))
            self.assertTrue(all(c["file"].endswith("fakedata.py") for c in per_sample))

    def test_differing_per_sample_seeds_are_one_finding(self):
        self.assertEqual(self.report.returncode, 1, self.report.stderr)
        rows = sheet_rows(os.path.join(self.out, "result.xlsx"), "random")
        site = [r for r in rows if r["function"] == "__getitem__"]
        self.assertEqual(len(site), 1, rows)
        r = site[0]
        self.assertEqual((r["bench_calls"], r["cmp_calls"], r["differing_calls"], r["equal"]),
                         (8, 8, 8, False))
        self.assertEqual((r["bench_value"], r["cmp_value"]), ("0", "100"))
        mine = [ln for ln in self.report.stdout.splitlines() if "__getitem__" in ln]
        self.assertEqual(len(mine), 1, self.report.stdout)
        # the script's own seed is the same in both runs
        own = [r for r in rows if r["function"] == "<module>"]
        self.assertEqual([r["equal"] for r in own], [True])


if __name__ == "__main__":
    unittest.main()
