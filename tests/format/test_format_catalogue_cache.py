"""A catalogue the reader helper verified serves a later open of the same
unchanged file in the same process, and never a changed one.

compare opens each step file for its metrics, again for replay and again
for the report's samples; the helper's verification of every /index row is
most of an open. fmt_catalogue_cache (beside this file) opens one path four
times: as written, then with no helper program (only a kept catalogue can
answer), then rewritten with another dump's bytes and still no helper (it
must fail: the kept catalogue was the old file's), then with the helper
back. The record names expected are the ones written here with h5py."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

from msp_h5dump import write_dump

PROG = "fmt_catalogue_cache"


class CatalogueKept(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-catcache-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_an_unchanged_file_reopens_without_the_helper_and_a_changed_one_never(self):
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        a, b = os.path.join(self.work, "a.h5"), os.path.join(self.work, "b.h5")
        names_a = ["Functional.relu.0.forward", "Tensor.add.0.forward"]
        names_b = ["Functional.gelu.0.forward", "Tensor.mul.0.forward"]
        write_dump(a, [(n, i, {"input.0": x, "output.0": x}) for i, n in enumerate(names_a)])
        write_dump(b, [(n, i, {"input.0": x, "output.0": x}) for i, n in enumerate(names_b)])
        env = dict(os.environ, MSPROBE_READER_SERVER="0")
        env.pop("MSPROBE_READER_INPROC", None)
        env.pop("MSPROBE_CATALOGUE_HELPER", None)
        p = subprocess.run([PROG, a, b, os.path.join(self.work, "x.h5")], capture_output=True,
                           text=True, timeout=120, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = dict(l.split(":", 1) for l in p.stdout.splitlines())
        self.assertEqual(sorted(lines["open 1"].split()), sorted(names_a), p.stdout)
        # no helper program: the catalogue kept from open 1 answers
        self.assertEqual(sorted(lines["open 2"].split()), sorted(names_a), p.stdout)
        # rewritten: the kept catalogue is not the file's, and no helper can read it
        self.assertTrue(lines["open 3"].strip().startswith("error:"), p.stdout)
        self.assertEqual(sorted(lines["open 4"].split()), sorted(names_b), p.stdout)


if __name__ == "__main__":
    PROG = sys.argv.pop(1)
    unittest.main()
