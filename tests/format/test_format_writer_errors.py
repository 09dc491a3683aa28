"""Misuse of the writer API returns the documented error code with a detail
naming the file and record, and leaves a complete, readable file behind."""
import os
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

WRITE_SAMPLE = None
# error codes from include/msprobe/common.h (fixed, only ever appended)
OK, IO, USAGE, UNSUPPORTED = 0, 2, 6, 7


class WriterErrors(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        p = subprocess.run([WRITE_SAMPLE, "--errors", cls.tmp.name], capture_output=True,
                           text=True, check=True)
        cls.rows = [l.split("\t") for l in p.stdout.splitlines()]
        cls.by = {}
        for name, code, detail in cls.rows:
            cls.by.setdefault(name, []).append((int(code), detail))
        cls.path = os.path.join(cls.tmp.name, "errors.h5")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def expect(self, name, code, *words):
        (got, detail), = self.by[name]
        self.assertEqual(got, code, (name, detail))
        for w in words:
            self.assertIn(w, detail, name)

    def test_open_in_missing_directory_names_the_path(self):
        self.expect("open_missing_dir", IO, os.path.join(self.tmp.name, "no/such/dir/dump.h5"))

    def test_calls_outside_a_record(self):
        self.expect("tensor_outside_record", USAGE, self.path, "outside a record")
        self.expect("attr_outside_record", USAGE, self.path, "outside a record")
        self.expect("end_without_begin", USAGE, self.path)

    def test_bad_record_names_and_nesting(self):
        self.expect("record_named_index", USAGE, "'index'")
        self.expect("record_named_attrs", USAGE, "'attrs'")
        self.expect("record_with_slash", USAGE, "'a/b'")
        self.expect("begin_while_open", USAGE, "Torch.add.1.forward", "Torch.add.0.forward")
        self.expect("duplicate_record", USAGE, "Torch.add.0.forward", "already exists")

    def test_bad_tensors_name_record_and_role(self):
        self.expect("same_role_twice", USAGE, "Torch.add.0.forward", "input.0", "already")
        self.expect("invalid_dtype", UNSUPPORTED, "Torch.add.0.forward", "input.1")
        self.expect("negative_dim", USAGE, "input.1", "-1")
        self.expect("too_many_dims", USAGE, "33")
        self.expect("no_data_no_stats", USAGE, "input.1", "neither data nor statistics")
        self.expect("attr_order_reserved", USAGE, "'order'")

    def test_a_role_twice_in_a_record_of_thousands(self):
        # 3000 roles, then six of them again (the first few, compared one by
        # one, and later ones, found by hash) and one new
        self.assertNotIn("many_roles", self.by)
        again = self.by["many_role_again"]
        self.assertEqual([c for c, _ in again], [USAGE] * 6)
        for (code, detail), k in zip(again, (0, 7, 15, 16, 1500, 2999)):
            self.assertIn("Optimizer.SGD.0.step", detail)
            self.assertIn("input.param.%d:" % k, detail)
            self.assertIn("already", detail)
        for name in ("many_begin", "many_new_role", "many_end", "after_many", "after_many_role",
                     "after_many_end"):
            self.expect(name, OK)
        with h5py.File(self.path, "r") as f:
            roles = [r["role"].decode() for r in f["index"][()]
                     if r["record"].decode() == "Optimizer.SGD.0.step"]
        self.assertEqual(len(roles), 3001)
        self.assertEqual(len(set(roles)), 3001)

    def test_good_calls_succeed(self):
        for name in ("begin", "tensor", "end", "close"):
            self.expect(name, OK)
        self.assertEqual([c for c, _ in self.by["attr_twice_last_wins"]], [OK, OK])

    def test_file_after_errors_is_complete(self):
        with h5py.File(self.path, "r") as f:
            # the others: rows alone
            self.assertEqual(set(f), {"Torch.add.0.forward", "index", "attrs"})
            g = f["Torch.add.0.forward"]
            self.assertEqual(set(g), {"input.0"})
            np.testing.assert_array_equal(g["input.0"][()], [[1, 2], [3, 4]])
            alpha = [r["value"].decode() for r in f["attrs"][()]
                     if (r["record"], r["key"]) == (b"Torch.add.0.forward", b"kwarg.alpha")]
            self.assertEqual(alpha, ["2"])  # set twice: one row, the last value
            # one row of Torch.add.0.forward; the optimizer's 3001 and the one after it
            recs = [r["record"].decode() for r in f["index"][()]]
            self.assertEqual(recs.count("Torch.add.0.forward"), 1)
            self.assertEqual(len(recs), 1 + 3001 + 1)
            # NULL meta strings fall back to the documented defaults
            self.assertEqual((f.attrs["framework"], f.attrs["task"], f.attrs["dump_mode"],
                              f.attrs["framework_version"]), ("pytorch", "tensor", "api", ""))
            self.assertEqual(g["input.0"].attrs["device"], "cpu")


if __name__ == "__main__":
    WRITE_SAMPLE = sys.argv.pop(1)
    unittest.main()
