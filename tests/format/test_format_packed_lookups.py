"""The reader helper checks a packed file's /index rows without looking each
record up by name (issue 42). A packed file (msprobe-dump(5) PACKED TENSORS)
has no group for a record whose tensors are all packed, and its root holds
thousands of links: libhdf5's H5Lexists for every record's name, to find
that it has none, was a twelfth of a helper's work on small packed tensors.
The helper now counts the root's links once: when they are the tables and
/packed alone, no record has a group, and none is looked up.

A library preloaded into msprobe (fmt_call_count.c), reading in process
(the same check as the helper's), counts its H5Lexists calls on msprobe-gen's
packed file of 1,000 records: fewer than 40 (the tables' own lookups;
5a110a0 made one a record and more).
The control, the same file with an empty group under row 0's record name,
which msprobe accepts as that record's group, is listed exactly as before
and costs a lookup a record again. The checks the lookups served still
refuse what they refused: a group the table does not name, and a packed row
past its segment's end, named by file, record and role as before."""
import os
import shutil
import subprocess
import sys
import unittest

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
from msp_build import gen_dump, sanitized_build  # noqa: E402


BIN = os.environ["MSPROBE_BIN"]
COUNTER = None  # fmt_call_count's path, from the command line
LAYERS = 500  # a forward and a backward record each


def text(v):
    return v.decode() if isinstance(v, bytes) else v


class PackedLookups(unittest.TestCase):
    def setUp(self):
        self.work, self.path = gen_dump(self, "msp-packed-lookups-", LAYERS,
                                        ["--numel", "256", "--pack-kib", "64"])
        self.addCleanup(shutil.rmtree, self.work, True)
        with h5py.File(self.path, "r") as f:
            self.assertIn("packed", f)
            self.rows = f["index"][()]
        self.records = sorted({text(r["record"]) for r in self.rows})
        self.assertEqual(len(self.records), 2 * LAYERS)

    def copy(self, name):
        out = os.path.join(self.work, name)
        shutil.copy(self.path, out)
        return out

    def lookups(self, path):
        """(`msprobe ls path`'s output, its H5Lexists calls), the file read in
        process (the helper links libhdf5 into itself, past a preloaded
        library's reach; the check is the same code)"""
        log = os.path.join(self.work, "counted.log")
        if os.path.exists(log):
            os.unlink(log)
        env = dict(os.environ, LD_PRELOAD=COUNTER, MSP_CALL_COUNT_LOG=log,
                   MSP_CALL_COUNT_AT_EXIT="1", MSPROBE_READER_INPROC="1")
        p = subprocess.run([BIN, "ls", path], capture_output=True, text=True, timeout=300,
                           env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(log) as f:
            counts = [int(w[2]) for w in (line.split() for line in f) if w[0] == "H5Lexists"]
        self.assertEqual(len(counts), 1, counts)  # msprobe, which read the file
        return p.stdout, counts[0]

    def ls(self, path):
        return subprocess.run([BIN, "ls", path], capture_output=True, text=True, timeout=300)

    def test_packed_rows_are_not_looked_up_by_name(self):
        if sanitized_build():
            self.skipTest("a preloaded library cannot come before AddressSanitizer's runtime")
        control = self.copy("control.h5")
        with h5py.File(control, "r+") as f:
            f.create_group(text(self.rows[0]["record"]))  # row 0's record, as a group of its own
        listed, n = self.lookups(self.path)
        self.assertLess(n, 40)
        listed_control, n_control = self.lookups(control)
        self.assertGreaterEqual(n_control, len(self.records))
        self.assertEqual(listed_control.replace(control, self.path), listed)
        for r in self.records:
            self.assertIn("  %s  order=" % r, listed)

    def test_a_group_the_table_does_not_name_is_refused(self):
        bad = self.copy("stray.h5")
        with h5py.File(bad, "r+") as f:
            f.create_group("Functional.stray.0.forward")
        p = self.ls(bad)
        self.assertEqual(p.returncode, 2, p.stdout[-300:])
        self.assertIn("file %s: /index names 1 of the file's 2 record groups" % bad, p.stderr)

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


if __name__ == "__main__":
    COUNTER = sys.argv.pop(1)
    unittest.main()
