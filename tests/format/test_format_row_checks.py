"""The reader helper checks /index's rows against the file with fewer
libhdf5 calls (issue 42), and refuses what it refused.

A packed file (msprobe-dump(5) PACKED TENSORS) has no group for a record
whose tensors are all packed, and its root holds thousands of links:
libhdf5's H5Lexists for every record's name, to find that it has none, was a
twelfth of a helper's work on small packed tensors. The helper now counts
the root's links once: when they are the tables and /packed alone, no
record has a group, and none is looked up.

A tensor with its own dataset had the dataset's type taken apart (eight
libhdf5 calls, H5Tget_fields among them, and two snprintf) to compare it
with the row's dtype: a twentieth of a helper's work on small tensors. The
type msprobe writes for the row's dtype is now recognised whole (H5Tequal);
any other type is still taken apart, as before.

A library preloaded into msprobe (fmt_call_count.c), reading in process
(the same check as the helper's), counts the calls:
  - H5Lexists on msprobe-gen's packed file of 1,000 records: fewer than 40
    (the tables' own lookups; 5a110a0 made one a record and more). The
    control, the same file with an empty group under row 0's record name,
    which msprobe accepts as that record's group, is listed exactly as
    before, its records found in one listing of the root: fewer than 40
    too (11455f2 looked each record up there);
  - H5Tget_fields on the same records unpacked (2,500 datasets): none
    (5a110a0: one a dataset).
The checks still refuse what they refused: a group the table does not name;
a packed row past its segment's end, named by file, record and role; a row
whose dtype is not its dataset's (float32 said int32), named with the type
the dataset stores."""
import os
import shutil
import subprocess
import sys
import unittest

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from msp_build import gen_dump, sanitized_build  # noqa: E402
from fmt_counted import ls_in_process_counted  # noqa: E402


BIN = os.environ["MSPROBE_BIN"]
COUNTER = None  # fmt_call_count's path, from the command line
LAYERS = 500  # a forward and a backward record each


def text(v):
    return v.decode() if isinstance(v, bytes) else v


class Rows:
    """what both files share: the dump, the calls counted, the stray group"""
    PACK = None

    def setUp(self):
        self.work, self.path = gen_dump(self, "msp-row-checks-", LAYERS,
                                        ["--numel", "256", "--pack-kib", self.PACK])
        self.addCleanup(shutil.rmtree, self.work, True)
        with h5py.File(self.path, "r") as f:
            self.assertEqual("packed" in f, self.PACK != "0")
            self.rows = f["index"][()]
        self.records = sorted({text(r["record"]) for r in self.rows})
        self.assertEqual(len(self.records), 2 * LAYERS)

    def copy(self, name):
        out = os.path.join(self.work, name)
        shutil.copy(self.path, out)
        return out

    def calls(self, path, what):
        """(`msprobe ls path`'s output, its calls of libhdf5's what), read in
        process"""
        return ls_in_process_counted(self, self.work, COUNTER, path, what)

    def assert_every_record(self, listed):
        """`msprobe ls` listed every record of the file"""
        for r in self.records:
            self.assertIn("  %s  order=" % r, listed)

    def ls(self, path):
        return subprocess.run([BIN, "ls", path], capture_output=True, text=True, timeout=300)

    def test_a_group_the_table_does_not_name_is_refused(self):
        bad = self.copy("stray.h5")
        with h5py.File(bad, "r+") as f:
            groups = sum(1 for k in f if isinstance(f[k], h5py.Group))  # /packed or records'
            f.create_group("Functional.stray.0.forward")
        p = self.ls(bad)
        self.assertEqual(p.returncode, 2, p.stdout[-300:])
        self.assertIn("file %s: /index names %d of the file's %d record groups"
                      % (bad, groups, groups + 1), p.stderr)

class PackedRows(Rows, unittest.TestCase):
    PACK = "64"

    def test_packed_rows_are_not_looked_up_by_name(self):
        if sanitized_build():
            self.skipTest("a preloaded library cannot come before AddressSanitizer's runtime")
        control = self.copy("control.h5")
        with h5py.File(control, "r+") as f:
            f.create_group(text(self.rows[0]["record"]))  # row 0's record, as a group of its own
        listed, n = self.calls(self.path, "H5Lexists")
        self.assertLess(n, 40)
        listed_control, n_control = self.calls(control, "H5Lexists")
        self.assertLess(n_control, 40)  # its records found in one listing of the root
        self.assertEqual(listed_control.replace(control, self.path), listed)
        self.assert_every_record(listed)

    def test_a_row_past_its_segments_end_names_its_record_and_role(self):
        bad = self.copy("past.h5")
        with h5py.File(bad, "r+") as f:
            rows = f["index"][()]
            seg = f["packed"]["0"]
            end = seg.id.get_offset() + seg.shape[0]
            i = max((i for i, r in enumerate(rows) if r["has_data"] and r["offset"] < end),
                    key=lambda i: rows[i]["offset"])
            nbytes = int(rows[i]["nbytes"])
            rows[i]["offset"] = end - nbytes // 2  # begins inside, ends past it
            f["index"][i] = rows[i]
        p = self.ls(bad)
        self.assertEqual(p.returncode, 2, p.stdout[-300:])
        self.assertIn("file %s: /index: record %s: %s: the row says %d bytes at offset %d, past "
                      "the end of the /packed segment it begins in"
                      % (bad, text(rows[i]["record"]), text(rows[i]["role"]), nbytes,
                         end - nbytes // 2), p.stderr)


class UnpackedRows(Rows, unittest.TestCase):
    PACK = "0"

    def test_a_dataset_of_msprobes_own_type_is_not_taken_apart(self):
        if sanitized_build():
            self.skipTest("a preloaded library cannot come before AddressSanitizer's runtime")
        datasets = sum(1 for r in self.rows if r["has_data"])
        self.assertGreaterEqual(datasets, 2 * LAYERS)
        listed, n = self.calls(self.path, "H5Tget_fields")
        self.assertEqual(n, 0)
        self.assert_every_record(listed)

    def test_a_row_whose_dtype_is_not_its_datasets_is_refused(self):
        bad = self.copy("dtype.h5")
        with h5py.File(bad, "r+") as f:
            rows = f["index"][()]
            i = next(i for i, r in enumerate(rows)
                     if r["has_data"] and text(r["dtype"]) == "torch.float32")
            rows[i]["dtype"] = b"torch.int32"  # the same size, another type
            f["index"][i] = rows[i]
        p = self.ls(bad)
        self.assertEqual(p.returncode, 2, p.stdout[-300:])
        self.assertIn("file %s: /index: record %s: %s: the row says dtype torch.int32, the "
                      "dataset stores torch.float32"
                      % (bad, text(rows[i]["record"]), text(rows[i]["role"])), p.stderr)


if __name__ == "__main__":
    COUNTER = sys.argv.pop(1)
    unittest.main()
