"""A dump file with an HDF5 user block (bytes before the HDF5 signature:
h5py's userblock_size, or bytes prepended to a file) is read at the right
offsets (issue 37, item 3): every HDF5 address counts from the end of the
user block, and H5Dget_offset / h5py's get_offset already add it. The same
records written with and without a user block compare as identical tensors
(Cosine 1, MaxAbsErr 0), with and without /index, with and without the CRC-32
attribute that would otherwise catch a read at the wrong place; the bytes
msp_dump_read_tensor returns are the ones h5py reads. An /index whose offsets
do not count the user block is refused, not read."""
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import unittest
import zlib

import h5py
import numpy as np
import openpyxl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
import msp_h5dump as D  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fmt_readout import parse  # noqa: E402

BIN = os.environ["MSPROBE_BIN"]
READ_DUMP = None

# A pickle in the user block: bytes some tools would load and run; msprobe
# must only step over them.
PICKLE = pickle.dumps({"comment": "a user block", "weights": list(range(40))}, protocol=2)
WIDE = bytes((i * 37 + 11) % 256 for i in range(3000))  # a 4096-byte user block


def records():
    rng = np.random.default_rng(37)
    return [
        ("Torch.matmul.0.forward", 0, {
            "input.0": rng.standard_normal((16, 32)).astype(np.float32),
            "input.1": rng.standard_normal((32, 8)).astype(np.float16),
            "output.0": D.BF16(rng.standard_normal((16, 8))),
        }),
        ("Tensor.add.0.forward", 1, {
            "input.0": np.arange(-50, 50, dtype=np.int64),
            "input.1": D.Stored(rng.standard_normal(300).astype(np.float32), gzip=True),
            "output.0": rng.standard_normal(1000).astype(np.float64),
        }),
    ]


def zero_crcs(path):
    """The crc32 attribute (and /index column) set to 0: 'not recorded', so
    a read at the wrong place is not caught by the checksum."""
    with h5py.File(path, "r+") as f:
        for name, g in f.items():
            if isinstance(g, h5py.Group):
                for ds in g.values():
                    ds.attrs["crc32"] = np.uint32(0)
        if "index" in f:
            rows = f["index"][()]
            rows["crc32"] = 0
            f["index"][...] = rows


def h5py_bytes(path):
    """{(record, role): raw native bytes} as h5py reads them."""
    out = {}
    with h5py.File(path, "r") as f:
        for name, g in f.items():
            if not isinstance(g, h5py.Group):
                continue
            for role, ds in g.items():
                if ds.attrs["dtype"] == "torch.bfloat16":
                    a = np.empty(ds.shape, np.uint16)
                    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, a, mtype=D.bf16_type())
                else:
                    a = ds[()]
                    a = a.astype(a.dtype.newbyteorder("<"))
                out[(name, role)] = a.tobytes()
    return out


def read_back(path, inproc=False):
    """{(record, role): (CRC-32 of the bytes msprobe read, offset)} from fmt_read_dump,
    the file parsed in the reader helper (the default) or in-process."""
    env = dict(os.environ, MSPROBE_READER_INPROC="1") if inproc else None
    p = subprocess.run([READ_DUMP, path], capture_output=True, text=True, timeout=120, env=env)
    if p.returncode != 0:
        raise AssertionError(f"fmt_read_dump {path}: rc {p.returncode}: {p.stderr}")
    _, _, tensors, _ = parse(p.stdout)
    return {(record, t["role"]): (t["data_crc"], t["offset"])
            for record, ts in tensors.items() for t in ts if t["data_crc"] is not None}


class UserBlock(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="msp-ub-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, index, userblock=b"", crc=True):
        path = os.path.join(self.tmp, name)
        D.write_dump(path, records(), index=index, userblock=userblock)
        if not crc:
            zero_crcs(path)
        return path

    def compare(self, bench, cmp):
        out = os.path.join(self.tmp, "out-" + os.path.basename(cmp))
        p = subprocess.run([BIN, "compare", "-b", bench, "-c", cmp, "-o", out, "--no-html",
                            "--replay", "off"], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("damaged", p.stdout)
        ws = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)["details"]
        rows = list(ws.iter_rows(values_only=True))
        col = {h: i for i, h in enumerate(rows[0])}
        return [{k: r[col[k]] for k in ("NPU Name", "Cosine", "MaxAbsErr", "Err_message")}
                for r in rows[1:]]

    def assert_identical(self, bench, cmp):
        rows = self.compare(bench, cmp)
        want = sorted(f"{n}.{role}" for n, _, ts in records() for role in ts)
        self.assertEqual(sorted(r["NPU Name"] for r in rows), want)
        for r in rows:
            # identical data: no element differs; the cosine is 1 up to the
            # float64 rounding of dot/(|n||b|), which the build's summation
            # order decides (0.9999999999999999 under ASan)
            self.assertEqual(r["MaxAbsErr"], 0, r)
            self.assertAlmostEqual(r["Cosine"], 1, delta=4e-16, msg=r)

    def assert_reads_like_h5py(self, path, userblock_size):
        with h5py.File(path, "r") as f:
            self.assertEqual(f.userblock_size, userblock_size)  # the file is what the test means
        want = h5py_bytes(path)
        for inproc in (False, True):
            got = read_back(path, inproc)
            self.assertEqual(set(got), set(want))
            for key, raw in want.items():
                crc, offset = got[key]
                self.assertEqual(crc, zlib.crc32(raw), (key, inproc))
                if offset >= 0:  # a direct read: past the user block
                    self.assertGreaterEqual(offset, userblock_size, (key, inproc))
            # every contiguous dataset is read directly (the gzip one is not)
            direct = {k for k, (_, off) in got.items() if off >= 0}
            self.assertEqual(direct, set(want) - {("Tensor.add.0.forward", "input.1")}, inproc)

    def test_user_block_dump_compares_identical_to_the_same_dump_without_one(self):
        for index in (False, True):
            for crc in (True, False):
                for ub in (PICKLE, WIDE):
                    with self.subTest(index=index, crc=crc, userblock=len(ub)):
                        tag = f"{int(index)}{int(crc)}-{len(ub)}"
                        plain = self.write(f"plain{tag}.h5", index, crc=crc)
                        blocked = self.write(f"ub{tag}.h5", index, ub, crc=crc)
                        with open(blocked, "rb") as fh:
                            self.assertEqual(fh.read(len(ub)), ub)
                        self.assert_identical(plain, blocked)
                        self.assert_identical(blocked, plain)
                        self.assert_reads_like_h5py(blocked, 512 if ub is PICKLE else 4096)

    def test_bytes_prepended_to_a_file_without_index_are_stepped_over(self):
        # libhdf5 finds the signature at 512 and takes it as the base address
        plain = self.write("plain.h5", False, crc=False)
        moved = os.path.join(self.tmp, "moved.h5")
        with open(plain, "rb") as a, open(moved, "wb") as b:
            b.write(PICKLE.ljust(512, b"\0") + a.read())
        self.assert_identical(plain, moved)
        self.assert_reads_like_h5py(moved, 512)

    def test_index_offsets_that_do_not_count_the_user_block_are_refused(self):
        # /index written for the file alone, then the file moved 512 bytes on:
        # every row's offset now points 512 bytes early
        plain = self.write("plain.h5", True)
        moved = os.path.join(self.tmp, "moved.h5")
        with open(plain, "rb") as a, open(moved, "wb") as b:
            b.write(PICKLE.ljust(512, b"\0") + a.read())
        p = subprocess.run([BIN, "ls", moved], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn(moved, p.stderr)
        self.assertIn("the dataset's own storage differs", p.stderr)


if __name__ == "__main__":
    READ_DUMP = sys.argv.pop(1)
    unittest.main()
