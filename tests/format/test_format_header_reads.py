"""The reader helper reads a dataset's object header from the mapped file
instead of opening the dataset with libhdf5 (issue 42), and refuses what it
refused.

Checking /index against an unpacked file opened and closed every dataset
with libhdf5 (H5Dopen2 and H5Dclose: some 92,000 instructions a dataset,
most of a helper's work on small tensors). The helper now opens with libhdf5
the first dataset of each dtype; when that one is accepted, any later
dataset whose version 2 object header has its datatype, fill value and
layout kind byte for byte, and whose checksums hold, is checked from the
header's own dataspace and layout: the row's shape, and its offset and bytes
the dataset's contiguous storage. Any other header goes to libhdf5 as
before (src/format/fmt_h5ohdr.h).

msprobe-gen's unpacked dump of 1,000 records (2,500 float32 datasets), read
by `msprobe ls` in process with a library preloaded that counts H5Dopen2
(fmt_call_count.c): fewer than 20 opens (5a110a0: one a dataset), and every
record listed with its shape as h5py reads it. Then a later dataset's header
rewritten, each time with its checksum made good again by this test's own
lookup3 (checked first against the checksums libhdf5 wrote): its shape, its
storage address, its datatype (float32 made a signed 32-bit integer). Each
file is refused, naming its file, record and role (the storage and type ones
with the row check's messages), as the row check refused them before. And a dump of a real torch run, written by
the preload shim, with a 2-d dataset's dimensions swapped.

A record's group is read from its header as well (its links, when they are
compact): a group h5py gave a dataset the table does not name, or in which
it renamed one, is refused as before.

/index's rows are grouped by record through a hash of the names instead of
sorted, and the root's links found through one (fmt_h5index.c): the same
file read in process with qsort counted sorts nothing (27ea2f4: three sorts,
the rows, the records and the root's links), its records listed in the order
of h5py's order column; the table's rows shuffled by h5py give the same
catalogue; a row copied over another far from it is refused as written
twice."""
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from msp_build import gen_dump, sanitized_build  # noqa: E402
from fmt_counted import ls_in_process_counted  # noqa: E402
import msp_shim  # noqa: E402

BIN = os.environ["MSPROBE_BIN"]
COUNTER = None  # fmt_call_count's path, from the command line
LAYERS = 500  # a forward and a backward record each
M32 = 0xFFFFFFFF


def rot(x, k):
    return ((x << k) | (x >> (32 - k))) & M32


def lookup3(data):
    """Bob Jenkins' lookup3 hashlittle of data, initval 0: HDF5's checksum of
    its metadata"""
    n = len(data)
    a = b = c = (0xdeadbeef + n) & M32
    i = 0
    while n > 12:
        a = (a + int.from_bytes(data[i:i + 4], "little")) & M32
        b = (b + int.from_bytes(data[i + 4:i + 8], "little")) & M32
        c = (c + int.from_bytes(data[i + 8:i + 12], "little")) & M32
        a = ((a - c) & M32) ^ rot(c, 4); c = (c + b) & M32
        b = ((b - a) & M32) ^ rot(a, 6); a = (a + c) & M32
        c = ((c - b) & M32) ^ rot(b, 8); b = (b + a) & M32
        a = ((a - c) & M32) ^ rot(c, 16); c = (c + b) & M32
        b = ((b - a) & M32) ^ rot(a, 19); a = (a + c) & M32
        c = ((c - b) & M32) ^ rot(b, 4); b = (b + a) & M32
        n -= 12
        i += 12
    if n == 0:
        return c
    tail = bytes(data[i:i + n]) + bytes(12 - n)
    a = (a + int.from_bytes(tail[0:4], "little")) & M32
    b = (b + int.from_bytes(tail[4:8], "little")) & M32
    c = (c + int.from_bytes(tail[8:12], "little")) & M32
    c ^= b; c = (c - rot(b, 14)) & M32
    a ^= c; a = (a - rot(c, 11)) & M32
    b ^= a; b = (b - rot(a, 25)) & M32
    c ^= b; c = (c - rot(b, 16)) & M32
    a ^= c; a = (a - rot(c, 4)) & M32
    b ^= a; b = (b - rot(a, 14)) & M32
    c ^= b; c = (c - rot(b, 24)) & M32
    return c


def header(buf, addr):
    """(end of chunk 0's messages, {message type: offset of its data}) of the
    version 2 object header at addr, as HDF5's file format specification
    lays it out"""
    assert buf[addr:addr + 4] == b"OHDR" and buf[addr + 4] == 2
    flags = buf[addr + 5]
    at = addr + 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
    width = 1 << (flags & 3)
    size0 = int.from_bytes(buf[at:at + width], "little")
    at += width
    end = at + size0
    head = 6 if flags & 0x04 else 4
    msgs = {}
    while end - at >= head:
        mtype, size = buf[at], int.from_bytes(buf[at + 1:at + 3], "little")
        msgs.setdefault(mtype, at + head)
        at += head + size
    return end, msgs


class Dump:
    """msprobe-gen's unpacked dump, a dataset in the middle of it, and what
    the tests below do with them"""

    def setUp(self):
        self.work, self.path = gen_dump(self, "msp-header-reads-", LAYERS, ["--numel", "256"])
        self.addCleanup(shutil.rmtree, self.work, True)
        with h5py.File(self.path, "r") as f:
            rows = [r for r in f["index"][()] if r["has_data"]]
            self.shapes = {(r["record"].decode(), r["role"].decode()): tuple(r["shape"])
                           for r in rows}
            # a dataset well past the first of its dtype, and its header
            rec, role = sorted(self.shapes)[len(self.shapes) // 2]
            d = f[rec][role]
            self.assertEqual(d.dtype, "float32")
            self.target = (rec, role, h5py.h5o.get_info(d.id).addr, d.id.get_offset(), d.shape)

    def calls(self, path):
        """(`msprobe ls path`'s output, its H5Dopen2 calls), read in process"""
        return ls_in_process_counted(self, self.work, COUNTER, path, "H5Dopen2")

    def rewritten(self, name, patch):
        """a copy whose target header patch(buf, data offsets) rewrote, its
        checksum made good again"""
        out = os.path.join(self.work, name)
        with open(self.path, "rb") as f:
            buf = bytearray(f.read())
        addr = self.target[2]
        end, msgs = header(buf, addr)
        stored = int.from_bytes(buf[end:end + 4], "little")
        self.assertEqual(lookup3(buf[addr:end]), stored)  # this lookup3 is HDF5's
        patch(buf, msgs)
        buf[end:end + 4] = lookup3(buf[addr:end]).to_bytes(4, "little")
        with open(out, "wb") as f:
            f.write(buf)
        return out

    def refused(self, path):
        p = subprocess.run([BIN, "ls", path], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 2, p.stdout[-300:])
        rec, role = self.target[:2]
        self.assertIn("file %s: /index: record %s: %s: " % (path, rec, role), p.stderr)
        return p.stderr


class HeaderReads(Dump, unittest.TestCase):
    def test_datasets_are_checked_from_their_headers(self):
        if sanitized_build():
            self.skipTest("a preloaded library cannot come before AddressSanitizer's runtime")
        self.assertGreaterEqual(len(self.shapes), 2 * LAYERS)
        listed, opens = self.calls(self.path)
        self.assertLess(opens, 20)
        for (rec, role), shape in self.shapes.items():
            self.assertIn("  %s  order=" % rec, listed)

    def test_a_header_whose_shape_is_not_its_rows_is_refused(self):
        n = self.target[4][0]

        def half(buf, m):
            space = m[1]
            self.assertEqual(buf[space], 2)  # dataspace version 2: dims from byte 4
            at = space + 4
            self.assertEqual(int.from_bytes(buf[at:at + 8], "little"), n)
            buf[at:at + 8] = (n // 2).to_bytes(8, "little")
        self.refused(self.rewritten("shape.h5", half))

    def test_a_header_whose_storage_moved_is_refused(self):
        def moved(buf, m):
            layout = m[8]
            self.assertEqual(buf[layout + 1], 1)  # contiguous: address, then size
            at = int.from_bytes(buf[layout + 2:layout + 10], "little")
            self.assertEqual(at, self.target[3])
            buf[layout + 2:layout + 10] = (at + 8).to_bytes(8, "little")
        err = self.refused(self.rewritten("moved.h5", moved))
        self.assertIn("the row says %d bytes at offset %d, the dataset's own storage differs"
                      % (4 * self.target[4][0], self.target[3]), err)

    def test_a_header_of_another_type_is_refused(self):
        def integer(buf, m):
            dtype = m[3]
            # float32: class 1, its bit field (little-endian, IEEE mantissa,
            # sign at bit 31), bit offset 0 and precision 32 first
            self.assertEqual(bytes(buf[dtype:dtype + 8]),
                             bytes([buf[dtype] & 0xF0 | 1, 0x20, 31, 0, 4, 0, 0, 0]))
            # a signed little-endian integer of the same size and precision
            buf[dtype] &= 0xF0
            buf[dtype + 1:dtype + 4] = bytes([0x08, 0, 0])
        err = self.refused(self.rewritten("dtype.h5", integer))
        self.assertIn("the row says dtype torch.float32, the dataset stores", err)


class GroupReads(Dump, unittest.TestCase):
    """A record's group's links are read from its header too: a dataset the
    table does not name, or a dataset renamed, in a group h5py changed,
    are refused as before."""

    def test_a_dataset_the_table_does_not_name_is_refused(self):
        rec = self.target[0]
        bad = os.path.join(self.work, "extra.h5")
        shutil.copy(self.path, bad)
        with h5py.File(bad, "r+") as f:
            held = len(f[rec])
            f[rec].create_dataset("extra.0", data=[1.0, 2.0])
        p = subprocess.run([BIN, "ls", bad], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 2, p.stdout[-300:])
        self.assertIn("file %s: /index: record %s: the record's group holds %d datasets, the "
                      "table names %d of them" % (bad, rec, held + 1, held), p.stderr)

    def test_a_renamed_dataset_is_refused(self):
        rec, role = self.target[:2]
        bad = os.path.join(self.work, "renamed.h5")
        shutil.copy(self.path, bad)
        with h5py.File(bad, "r+") as f:
            f[rec].move(role, "x" + role)
        self.assertIn("the row names a dataset the file does not have", self.refused(bad))


class CatalogueOrder(Dump, unittest.TestCase):
    """/index's rows grouped by record through a hash of the names, not sorted
    (three sorts a file before: the rows, the records, the root's links): a
    table in its writer's order is catalogued without one sort, and a table
    whose rows h5py shuffled gives the same catalogue, a row written twice
    far apart still refused."""

    def listed(self, out):
        return [line.split()[0] for line in out.splitlines() if "  order=" in line]

    def test_a_table_in_order_is_catalogued_without_a_sort(self):
        if sanitized_build():
            self.skipTest("a preloaded library cannot come before AddressSanitizer's runtime")
        out, sorts = ls_in_process_counted(self, self.work, COUNTER, self.path, "qsort")
        self.assertEqual(sorts, 0)
        with h5py.File(self.path, "r") as f:
            order = {r["record"].decode(): int(r["order"]) for r in f["index"][()]}
        self.assertEqual(self.listed(out), sorted(order, key=lambda k: (order[k], k)))
        self.assertEqual(len(self.listed(out)), 2 * LAYERS)

    def shuffled(self, name, change=None):
        out = os.path.join(self.work, name)
        shutil.copy(self.path, out)
        with h5py.File(out, "r+") as f:
            rows = f["index"][()]
            perm = list(range(len(rows)))
            random.Random(5).shuffle(perm)
            rows = rows[perm]
            if change:
                change(rows)
            f["index"][...] = rows
        return out

    def test_rows_in_any_order_give_the_same_catalogue(self):
        mixed = self.shuffled("mixed.h5")
        with h5py.File(mixed, "r") as f:  # h5py reads the rows as shuffled
            first = [r["record"].decode() for r in f["index"][:8]]
        self.assertNotEqual(first, self.listed(self.ls(self.path))[:8])
        self.assertEqual(self.ls(mixed).split("\n", 1)[1], self.ls(self.path).split("\n", 1)[1])

    def test_a_row_written_twice_far_apart_is_refused(self):
        rec, role = self.target[:2]

        def twice(rows):
            at = [k for k, r in enumerate(rows) if (r["record"].decode(), r["role"].decode())
                  == (rec, role)]
            other = next(k for k, r in enumerate(rows) if r["record"].decode() != rec and
                         abs(k - at[0]) > len(rows) // 3)
            rows[other] = rows[at[0]]
        bad = self.shuffled("twice.h5", twice)
        p = subprocess.run([BIN, "ls", bad], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 2, p.stdout[-300:])
        self.assertIn("file %s: /index: record %s: %s has two rows" % (bad, rec, role), p.stderr)

    def ls(self, path):
        p = subprocess.run([BIN, "ls", path], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout


TRAIN = """
import torch
torch.manual_seed(0)
lin = torch.nn.Linear(16, 8)
x = torch.randn(4, 16)
for _ in range(30):
    y = torch.relu(lin(x))
"""


class TorchHeaderReads(unittest.TestCase):
    """A dump the preload shim wrote of a real torch run (2-d tensors of 4 x 16
    and 4 x 8): a later dataset's dimensions swapped, its checksum made good
    (the same number of elements and bytes: only the shape tells them
    apart), is refused as the row check refused it, with its message."""

    def test_a_header_whose_dimensions_are_swapped_is_refused(self):
        work = tempfile.mkdtemp(prefix="msp-header-torch-")
        self.addCleanup(shutil.rmtree, work, True)
        script = os.path.join(work, "train.py")
        with open(script, "w") as f:
            f.write(TRAIN)
        root = msp_shim.dump(work, "dump", script, level="api")
        [path] = [os.path.join(d, n) for d, _, names in os.walk(root) for n in names
                  if n == "dump.h5"]
        with h5py.File(path, "r") as f:
            rows = [r for r in f["index"][()] if r["has_data"] and r["ndim"] == 2 and
                    r["shape"][0] != r["shape"][1]]
            self.assertGreater(len(rows), 20)
            r = rows[-1]
            rec, role = r["record"].decode(), r["role"].decode()
            d = f[rec][role]
            addr, shape = h5py.h5o.get_info(d.id).addr, d.shape
        self.assertEqual(shape, tuple(r["shape"][:2]))
        with open(path, "rb") as f:
            buf = bytearray(f.read())
        end, msgs = header(buf, addr)
        self.assertEqual(lookup3(buf[addr:end]), int.from_bytes(buf[end:end + 4], "little"))
        space = msgs[1]
        self.assertEqual((buf[space], buf[space + 1]), (2, 2))  # version 2, two dimensions
        dims = [int.from_bytes(buf[space + 4 + 8 * k:space + 12 + 8 * k], "little")
                for k in (0, 1)]
        self.assertEqual(tuple(dims), shape)
        buf[space + 4:space + 20] = dims[1].to_bytes(8, "little") + dims[0].to_bytes(8, "little")
        buf[end:end + 4] = lookup3(buf[addr:end]).to_bytes(4, "little")
        bad = os.path.join(work, "swapped.h5")
        with open(bad, "wb") as f:
            f.write(buf)
        p = subprocess.run([BIN, "ls", bad], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 2, p.stdout[-300:])
        self.assertIn("file %s: /index: record %s: %s: the row's shape differs from the "
                      "dataset's" % (bad, rec, role), p.stderr)
        self.assertEqual(subprocess.run([BIN, "ls", path], capture_output=True,
                                        timeout=300).returncode, 0)


if __name__ == "__main__":
    COUNTER = sys.argv.pop(1)
    unittest.main()
