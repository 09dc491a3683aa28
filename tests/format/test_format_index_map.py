"""The reader reads /index's strings and shapes from the mapped file itself
(issue 42). libhdf5 converted each variable-length string of /index on its
own, a malloc for each and a free again in H5Dvlen_reclaim: a third of the
reader helper's work on a file of small packed tensors. The reader now reads
the table's rows and the global heap where they lie in the mapped file, each
string and shape copied into one block; a table stored otherwise (here:
chunked and deflated) still goes through H5Dread.

Every value the reader returns (fmt_read_dump: record, role, order, dtype,
shape, statistics, offset, device, requires_grad, producer) must be what h5py
reads from /index, through the helper and in process, for:
  - msprobe-shaped tables written by h5py: thousands of rows, names of 1 to
    300 characters (UTF-8 among them), shapes of 0 to 6 dimensions, empty
    and long producers, so that the strings span many heap collections;
  - the same file behind a 4 KiB user block (heap addresses count from it);
  - a table with padding between its columns and columns msprobe does not
    know, one of them a string before all the others;
  - the table chunked and deflated (libhdf5's path).
A library preloaded into the helper (fmt_call_count.c) counts a helper
child's mallocs on msprobe's own file of small packed tensors: under 4 a row
from the mapped file, over 6 a row with the same table chunked (libhdf5's
path, the control; 18cc4dc's helper made 10.7 a row of the plain file). A
file whose heap collection is damaged is still refused, naming the file."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
import msp_h5dump as D  # noqa: E402
from msp_build import gen_dump, sanitized_build  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fmt_counted import ls_counted  # noqa: E402
from fmt_readout import parse  # noqa: E402

BIN = os.environ["MSPROBE_BIN"]
COUNTER = READ_DUMP = None  # from the command line
N_RECORDS = 1500  # two tensors each


def name_of(i):
    """record names of 1 to 300 characters, some not ASCII"""
    stem = ("Módulo.层" if i % 7 == 0 else "Torch.op") + ".%d" % i
    return (stem + ".forward" + "x" * (i * 37 % 300))[: 1 + i * 53 % 300] + ".%d" % i


def records():
    rng = np.random.default_rng(42)
    out = []
    for i in range(N_RECORDS):
        shape = tuple(int(v) for v in rng.integers(1, 4, size=i % 7))  # 0 to 6 dimensions
        out.append((name_of(i), i, {
            "input.0": rng.standard_normal(shape).astype(np.float32),
            "output.0": rng.standard_normal((3,)).astype(np.float16)}))
    return out


def producers(recs):
    out = {}
    for k, (name, _, _) in enumerate(recs):
        if k % 3 == 1:
            out[(name, "input.0")] = recs[k - 1][0] + "/output.0"
        elif k % 3 == 2:
            out[(name, "input.0")] = ""
    return out


def from_h5py(path):
    """{(record, role): what /index says, as fmt_read_dump prints it}"""
    out = {}
    with h5py.File(path, "r") as f:
        for r in f["index"][()]:
            text = {k: (r[k].decode() if isinstance(r[k], bytes) else r[k])
                    for k in ("record", "role", "dtype", "device", "producer")}
            shape = tuple(int(v) for v in r["shape"])
            itemsize = np.dtype(text["dtype"].replace("torch.", "")).itemsize
            out[(text["record"], text["role"])] = dict(
                order=int(r["order"]), dtype=text["dtype"], ndim=int(r["ndim"]), shape=shape,
                has_data=int(bool(r["has_data"])), offset=int(r["offset"]),
                nbytes=int(np.prod(shape, dtype=np.int64)) * itemsize, max=float(r["max"]),
                min=float(r["min"]), mean=float(r["mean"]), norm=float(r["norm"]),
                nan_count=int(r["nan_count"]), inf_count=int(r["inf_count"]),
                crc32=int(r["crc32"]),
                device=text["device"], requires_grad=int(bool(r["requires_grad"])),
                producer=text["producer"] or "-")
    return out


def read_dump(path, inproc):
    """{(record, role): what the reader returned (fmt_read_dump), keyed as
    from_h5py keys it}"""
    env = dict(os.environ)
    env.pop("MSPROBE_READER_INPROC", None)
    if inproc:
        env["MSPROBE_READER_INPROC"] = "1"
    p = subprocess.run([READ_DUMP, path], capture_output=True, text=True, timeout=600, env=env)
    if p.returncode != 0:
        raise AssertionError("fmt_read_dump %s: rc %d: %s" % (path, p.returncode, p.stderr))
    _, recs, tensors, _ = parse(p.stdout)
    orders, out = dict(recs), {}
    for record, ts in tensors.items():
        for t in ts:
            got = {k: v for k, v in t.items()
                   if k not in ("role", "has_stats", "data_crc", "skip_crc")}
            got.update(order=orders[record], producer=t["producer"] or "-")
            out[(record, t["role"])] = got
    return out


def rewrite_index(src, dst, how):
    """dst: src with /index stored chunked and deflated ('chunked'), or with
    padding between its columns and two columns msprobe does not know, a
    string first ('padded')"""
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        rows = f["index"][()]
        del f["index"]
        if how == "chunked":
            f.create_dataset("index", data=rows, chunks=(256,), compression="gzip")
            return
        fields = [("note", h5py.string_dtype("utf-8")), ("spare", np.dtype("<i2"))]
        fields += [(n, rows.dtype.fields[n][0]) for n in rows.dtype.names]
        offsets, at = [], 0
        for k, (_, t) in enumerate(fields):  # 1 to 7 bytes of padding after each
            offsets.append(at)
            at += t.itemsize + 1 + k % 7
        wide = np.dtype({"names": [n for n, _ in fields], "formats": [t for _, t in fields],
                         "offsets": offsets, "itemsize": at})
        out = np.zeros(len(rows), dtype=wide)
        for n in rows.dtype.names:
            out[n] = rows[n]
        out["note"] = ["n%d" % i * (i % 5) for i in range(len(rows))]
        out["spare"] = np.arange(len(rows)) % 30000
        f.create_dataset("index", data=out)


class IndexFromTheMap(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="msp-index-map-")
        recs = records()
        cls.plain = os.path.join(cls.work, "plain", "dump.h5")
        D.write_dump(cls.plain, recs, producers=producers(recs), index=True)
        cls.ub = os.path.join(cls.work, "ub", "dump.h5")
        D.write_dump(cls.ub, recs, producers=producers(recs), index=True,
                     userblock=bytes(range(256)) * 12)
        cls.padded = os.path.join(cls.work, "padded.h5")
        rewrite_index(cls.plain, cls.padded, "padded")
        cls.chunked = os.path.join(cls.work, "chunked.h5")
        rewrite_index(cls.plain, cls.chunked, "chunked")
        cls.want = from_h5py(cls.plain)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def test_the_index_holds_what_the_test_means(self):
        self.assertEqual(len(self.want), 2 * N_RECORDS)
        lens = {len(r.encode()) for r, _ in self.want}
        self.assertLessEqual(min(lens), 5)
        self.assertGreaterEqual(max(lens), 290)
        self.assertEqual({len(v["shape"]) for v in self.want.values()}, set(range(7)))
        self.assertEqual(sum(v["producer"] not in ("-",) for v in self.want.values()),
                         N_RECORDS // 3)
        with h5py.File(self.ub, "r") as f:
            self.assertEqual(f.userblock_size, 4096)
        with open(self.plain, "rb") as fh:  # the strings span many heap collections
            self.assertGreater(fh.read().count(b"GCOL"), 20)
        for path in (self.padded, self.chunked):
            w = from_h5py(path)
            self.assertEqual(w, self.want)

    def assert_read_as_h5py(self, path):
        want = from_h5py(path)
        for inproc in (False, True):
            with self.subTest(path=os.path.basename(path), inproc=inproc):
                got = read_dump(path, inproc)
                self.assertEqual(set(got), set(want))
                for key, w in want.items():
                    g = dict(got[key])
                    if w["has_data"] and w["offset"] >= 0:
                        self.assertEqual(g["offset"], w["offset"], key)
                    self.assertEqual({k: v for k, v in g.items() if k != "offset"},
                                     {k: v for k, v in w.items() if k != "offset"}, key)

    def test_msprobe_shaped_table(self):
        self.assert_read_as_h5py(self.plain)

    def test_behind_a_user_block(self):
        self.assert_read_as_h5py(self.ub)

    def test_padded_table_with_unknown_columns(self):
        self.assert_read_as_h5py(self.padded)

    def test_chunked_table_through_libhdf5(self):
        self.assert_read_as_h5py(self.chunked)

    def helper_mallocs(self, path, server, rows):
        """mallocs a row of the helper child that read path (`msprobe ls`)"""
        _, lines = ls_counted(self, self.work, COUNTER, "MSP_CALL_COUNT_LOG", path, server)
        counts = [int(w[2]) for w in lines if w[0] == "malloc"]
        self.assertEqual(len(counts), 1, counts)  # the one process that read the file
        return counts[0] / rows

    def test_strings_cost_no_malloc_each(self):
        """msprobe's own file of small packed tensors (no dataset of its own
        for a tensor, so /index is most of what a helper reads)"""
        if sanitized_build():
            self.skipTest("a preloaded library cannot come before AddressSanitizer's runtime")
        work, packed = gen_dump(self, "msp-index-map-gen-", 500,
                                ["--numel", "256", "--pack-kib", "64"])
        self.addCleanup(shutil.rmtree, work, True)
        chunked, padded = os.path.join(work, "chunked.h5"), os.path.join(work, "padded.h5")
        rewrite_index(packed, chunked, "chunked")
        rewrite_index(packed, padded, "padded")
        with h5py.File(packed, "r") as f:
            rows = len(f["index"])
            self.assertIn("packed", f)
        self.assertGreaterEqual(rows, 1000)
        for path in (packed, chunked, padded):
            self.assert_read_as_h5py(path)
        for server in (True, False):
            with self.subTest(server=server):
                self.assertLess(self.helper_mallocs(packed, server, rows), 4.0)
                self.assertLess(self.helper_mallocs(padded, server, rows), 4.0)
                # the control: the same table through libhdf5
                self.assertGreater(self.helper_mallocs(chunked, server, rows), 6.0)

    def test_a_damaged_heap_is_still_refused(self):
        """the signature of the collection that holds row 0's record name
        clobbered: neither reader takes the row from it"""
        bad = os.path.join(self.work, "bad.h5")
        shutil.copy(self.ub, bad)
        with h5py.File(bad, "r") as f:
            at, ub = f["index"].id.get_offset(), f.userblock_size
        with open(bad, "r+b") as fh:
            fh.seek(at)
            ref = fh.read(16)  # row 0's record: length, collection address, index
            addr = int.from_bytes(ref[4:12], "little")
            fh.seek(ub + addr)
            self.assertEqual(fh.read(4), b"GCOL")
            fh.seek(ub + addr)
            fh.write(b"XCOL")
        p = subprocess.run([BIN, "ls", bad], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 2, p.stdout[-300:])
        self.assertIn(bad, p.stderr)


if __name__ == "__main__":
    COUNTER = sys.argv.pop(1)
    READ_DUMP = sys.argv.pop(1)
    unittest.main()
