"""Eight threads writing and reading dumps at once through msp_format (whose
one lock serialises HDF5): every file comes out complete and correct, read
back with h5py against the formula; a truncated copy fails cleanly in every
thread without HDF5 printing anything (its error printing is per thread in a
thread-safe HDF5 build)."""
import os
import subprocess
import sys
import tempfile
import unittest
import zlib

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fmt_expect as X  # noqa: E402

WRITE_SAMPLE = None


class ConcurrentWritersAndReaders(unittest.TestCase):
    def test_eight_threads(self):
        with tempfile.TemporaryDirectory() as tmp:
            p = subprocess.run([WRITE_SAMPLE, "--threads", tmp], capture_output=True, text=True,
                               timeout=600)
            self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "ok\n" * 8, ""))
            for k in range(8):
                with h5py.File(os.path.join(tmp, f"t{k}.h5"), "r") as f:
                    self.assertEqual(int(f.attrs["rank"]), k)
                    self.assertEqual(len(f["index"]), 300)
                    for i in range(300):
                        g = f[f"Torch.mul.{i}.forward"]
                        self.assertEqual(int(g.attrs["order"]), i)
                        exp = X.native("torch.float32", (100 + i % 50,), 1000 * k + i, 0)
                        got = g["output.0"][()]
                        np.testing.assert_array_equal(got, exp)
                        self.assertEqual(int(g["output.0"].attrs["crc32"]),
                                         zlib.crc32(exp.tobytes()))


if __name__ == "__main__":
    WRITE_SAMPLE = sys.argv.pop(1)
    unittest.main()
