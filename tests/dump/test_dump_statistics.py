"""task "statistics" writes no tensor data, only statistics, and those equal
what numpy computes from the values the script recorded itself."""
import os
import sys
import unittest
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402


class Statistics(dt.ShimCase):
    def test_statistics_equal_numpy(self):
        cfg = self.write_config(dt.config("./s", mode="mix", steps="1", task="statistics"))
        self.train(["--steps", "2", "--record", "rec"], cfg)
        rec = np.load(self.path("rec", "record.npz"))
        files = dt.dump_files(self.path("s"))
        self.assertEqual(sorted(files), [(1, 0)])
        recs, root = dt.read_dump(files[(1, 0)])
        self.assertEqual(root["task"], "statistics")
        checked = 0
        for name, role, key in (("Functional.conv2d.0.forward", "output.0", "conv1.out"),
                                ("Functional.conv2d.0.forward", "input.1", "conv1.weight"),
                                ("Functional.relu.1.forward", "output.0", "relu2.out"),
                                ("Functional.linear.1.forward", "output.0", "fc2.out"),
                                ("Functional.conv2d.1.backward", "input.0", "conv2.grad_out"),
                                ("Functional.linear.0.backward", "output.1", "fc1.weight.grad"),
                                ("Module.fc1.Linear.forward.0", "output.0", "fc1.out")):
            with self.subTest(record=name, role=role):
                self.assertIn(role, recs[name])
                self.assertIsNone(recs[name][role], "statistics mode wrote tensor data")
                a = rec["step1/" + key]
                t = recs[name]["tattrs"][role]
                x = a.astype(np.float64)
                self.assertEqual(float(t["max"]), x.max())
                self.assertEqual(float(t["min"]), x.min())
                self.assertTrue(np.isclose(float(t["mean"]), x.mean(), rtol=1e-9, atol=0))
                self.assertTrue(np.isclose(float(t["norm"]), np.sqrt((x * x).sum()), rtol=1e-9,
                                           atol=0))
                self.assertEqual(int(t["nan_count"]), int(np.isnan(x).sum()))
                self.assertEqual(int(t["inf_count"]), int(np.isinf(x).sum()))
                self.assertEqual(int(t["crc32"]), zlib.crc32(a.tobytes()))
                self.assertEqual(list(t["shape"]), list(a.shape))
                checked += 1
        self.assertEqual(checked, 7)
        # statistics are /index rows alone: no dataset besides /index, and a
        # group only for a record with non-tensor arguments (~100 us saved a tensor)
        import h5py
        with h5py.File(files[(1, 0)], "r") as f:
            datasets = []
            f.visititems(lambda n, o: datasets.append(n) if isinstance(o, h5py.Dataset) else None)
            self.assertEqual(datasets, ["index"])
            for name, g in f.items():
                if name != "index":
                    self.assertTrue(set(g.attrs) - {"order"}, name + ": group without arguments")
            self.assertNotIn("Functional.linear.1.forward", f)  # three tensors, no arguments


if __name__ == "__main__":
    unittest.main()
