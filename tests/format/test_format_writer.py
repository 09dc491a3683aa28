"""The writer's output read back with h5py: values, dtypes, every attribute,
/index rows and raw offsets, root attributes, all against numpy/zlib."""
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


class WriterOutputReadByH5py(unittest.TestCase):
    ENV = {}

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.tmp.name, "dump.h5")
        subprocess.run([WRITE_SAMPLE, cls.path], check=True, env={**os.environ, **cls.ENV})
        cls.f = h5py.File(cls.path, "r")

    @classmethod
    def tearDownClass(cls):
        cls.f.close()
        cls.tmp.cleanup()

    def raw_at(self, offset, n):
        with open(self.path, "rb") as fh:
            fh.seek(offset)
            return fh.read(n)

    def test_no_disk_blocks_reserved_past_the_end(self):
        # The writer reserves file space ahead of the tensor data (64 MiB
        # steps); none of it may stay allocated once the file is closed.
        st = os.stat(self.path)
        allocated = st.st_blocks * 512
        self.assertGreater(st.st_size, 0)
        self.assertLessEqual(allocated, (st.st_size + 4095) // 4096 * 4096 + 4096,
                             "%d bytes allocated for a %d-byte file" % (allocated, st.st_size))

    def test_root_attributes(self):
        for k, v in X.ROOT_ATTRS.items():
            self.assertEqual(self.f.attrs[k], v, k)

    def test_records_with_data_are_groups_with_order(self):
        # a record gets a group only for tensor data; every record's order
        # is its /index rows' (msprobe-dump(5))
        names = {r for r, _, specs in X.RECORDS if specs}
        groups = {k for k in self.f if isinstance(self.f[k], h5py.Group)}
        self.assertEqual(groups, names)
        orders = {}
        for row in self.f["index"][()]:
            orders.setdefault(row["record"].decode(), set()).add(int(row["order"]))
        for rec, order, specs in X.RECORDS + [(X.EMPTY_RECORD[0], X.EMPTY_RECORD[1], [])]:
            self.assertEqual(orders[rec], {order}, rec)
            if specs:
                self.assertEqual(self.f[rec].attrs["order"], order)
                self.assertEqual(self.f[rec].attrs["order"].dtype, np.int64)

    def test_tensor_values_and_h5py_dtypes(self):
        h5py_dtype = {"torch.float32": np.float32, "torch.float16": np.float16,
                      "torch.bfloat16": np.float32, "torch.float64": np.float64,
                      "torch.int8": np.int8, "torch.int16": np.int16, "torch.int32": np.int32,
                      "torch.int64": np.int64, "torch.uint8": np.uint8, "torch.bool": np.bool_}
        for rec, _, role, dtype, shape, _, arr in X.all_tensors():
            with self.subTest(rec=rec, role=role):
                d = self.f[rec][role]
                self.assertEqual(d.shape, shape)
                self.assertEqual(d.dtype, h5py_dtype[dtype])
                got = d[()]
                if dtype == "torch.bool":
                    np.testing.assert_array_equal(got, arr.astype(bool))
                else:
                    np.testing.assert_array_equal(np.asarray(got, np.float64),
                                                  X.values(dtype, arr))
                self.assertIsNone(d.chunks)
                self.assertIsNone(d.compression)

    def test_bfloat16_is_an_hdf5_float_with_8_exponent_7_mantissa_bits(self):
        t = self.f["Functional.conv2d.0.forward"]["kwarg.weight"].id.get_type()
        self.assertIsInstance(t, h5py.h5t.TypeFloatID)
        self.assertEqual(t.get_size(), 2)
        self.assertEqual(t.get_fields(), (15, 7, 8, 0, 7))
        self.assertEqual(t.get_ebias(), 127)
        self.assertEqual(t.get_order(), h5py.h5t.ORDER_LE)

    def test_tensor_attributes(self):
        for rec, _, role, dtype, shape, salt, arr in X.all_tensors():
            with self.subTest(rec=rec, role=role):
                a = self.f[rec][role].attrs
                self.assertEqual(a["dtype"], dtype)
                np.testing.assert_array_equal(a["shape"], np.array(shape, dtype=np.int64))
                self.assertEqual(a["shape"].dtype, np.int64)
                exp = X.stats(dtype, arr)
                for k in ("max", "min", "mean", "norm"):
                    self.assertTrue(X.close(float(a[k]), exp[k]), (k, a[k], exp[k]))
                    self.assertEqual(a[k].dtype, np.float64)
                self.assertEqual(int(a["nan_count"]), exp["nan_count"])
                self.assertEqual(int(a["inf_count"]), exp["inf_count"])
                self.assertEqual(int(a["crc32"]), exp["crc32"])
                self.assertEqual(a["crc32"].dtype, np.uint32)
                self.assertEqual(a["device"], X.device_of(salt))
                self.assertEqual(bool(a["requires_grad"]), X.requires_grad_of(salt))
                self.assertEqual(a["requires_grad"].dtype, np.bool_)

    def test_raw_bytes_at_dataset_offset_are_native_little_endian(self):
        for rec, _, role, dtype, shape, _, arr in X.all_tensors():
            with self.subTest(rec=rec, role=role):
                d = self.f[rec][role]
                if arr.nbytes == 0:
                    continue
                off = d.id.get_offset()
                self.assertIsNotNone(off)
                raw = self.raw_at(off, arr.nbytes)
                self.assertEqual(raw, arr.tobytes())
                self.assertEqual(zlib.crc32(raw), int(d.attrs["crc32"]))

    def test_statistics_only_tensor_is_an_index_row_alone(self):
        rec, role, dtype, shape, st, dev, rg = X.STATS_ONLY
        # no dataset: creating one (and its attributes) per statistics-only
        # tensor cost ~100 us each, the whole budget of a small op
        self.assertNotIn(role, self.f[rec])
        rows = [r for r in self.f["index"][()]
                if r["record"].decode() == rec and r["role"].decode() == role]
        self.assertEqual(len(rows), 1)
        r = rows[0]
        self.assertEqual(r["dtype"].decode(), dtype)
        self.assertEqual((int(r["ndim"]), tuple(int(x) for x in r["shape"])),
                         (len(shape), tuple(shape)))
        self.assertEqual((int(r["has_data"]), int(r["offset"])), (0, -1))
        self.assertEqual(int(r["nbytes"]), 4 * 1000 * 1000)
        for k, v in st.items():
            self.assertEqual(r[k], v, k)
        self.assertEqual(r["device"].decode(), dev)
        self.assertEqual(bool(r["requires_grad"]), rg)
        # the only tensor given a producer link; the others have none
        self.assertEqual(r["producer"].decode(), "Functional.conv2d.0.forward/output.0")
        for r2, _, role2, *_ in X.all_tensors():
            self.assertNotIn("producer", self.f[r2][role2].attrs)

    def test_non_tensor_arguments_are_rows_of_attrs(self):
        # /attrs: one (record, key, value) row per attribute, in the order
        # set; a key set twice ("kwarg.alpha": "1" then "2") is one row
        # holding the last value; no attribute on any group but "order"
        t = self.f["attrs"]
        self.assertEqual(t.dtype.names, ("record", "key", "value"))
        for col in t.dtype.names:
            self.assertEqual(h5py.check_string_dtype(t.dtype[col]).encoding, "utf-8")
        rows = [tuple(v.decode() for v in r) for r in t[()]]
        want = [(rec, k, v) for rec, attrs in X.RECORD_ATTRS.items() for k, v in attrs.items()]
        self.assertEqual(sorted(rows), sorted(want))
        self.assertEqual(len(rows), len(set((r, k) for r, k, _ in rows)))
        for name, g in self.f.items():
            if isinstance(g, h5py.Group):
                self.assertEqual(set(g.attrs), {"order"}, name)
        self.assertNotIn(X.EMPTY_RECORD[0], self.f)

    def test_index_has_one_row_per_tensor_with_stats_and_offsets(self):
        idx = self.f["index"][()]
        cols = ["record", "role", "order", "dtype", "ndim", "shape", "has_data", "max", "min",
                "mean", "norm", "nan_count", "inf_count", "crc32", "offset", "nbytes",
                "device", "requires_grad", "producer"]
        self.assertEqual(list(idx.dtype.names), cols)
        prod = {(r["record"].decode(), r["role"].decode()): r["producer"].decode() for r in idx}
        self.assertEqual({k: v for k, v in prod.items() if v},
                         {(X.STATS_ONLY[0], "output.0"): "Functional.conv2d.0.forward/output.0"})
        rows = {(r["record"].decode(), r["role"].decode()): r for r in idx}
        expected = {(rec, role) for rec, _, role, *_ in X.all_tensors()}
        expected |= {(X.STATS_ONLY[0], X.STATS_ONLY[1]), (X.EMPTY_RECORD[0], "")}
        self.assertEqual(set(rows), expected)
        self.assertEqual(len(idx), len(expected))
        for rec, order, role, dtype, shape, salt, arr in X.all_tensors():
            with self.subTest(rec=rec, role=role):
                r = rows[(rec, role)]
                self.assertEqual(r["order"], order)
                self.assertEqual(r["dtype"].decode(), dtype)
                self.assertEqual(r["ndim"], len(shape))
                np.testing.assert_array_equal(r["shape"], np.array(shape, np.int64))
                self.assertTrue(r["has_data"])
                exp = X.stats(dtype, arr)
                for k in ("max", "min", "mean", "norm"):
                    self.assertTrue(X.close(float(r[k]), exp[k]), k)
                for k in ("nan_count", "inf_count", "crc32"):
                    self.assertEqual(int(r[k]), exp[k], k)
                self.assertEqual(r["nbytes"], arr.nbytes)
                self.assertEqual(r["device"].decode(), X.device_of(salt))
                self.assertEqual(bool(r["requires_grad"]), X.requires_grad_of(salt))
                if arr.nbytes:
                    self.assertEqual(self.raw_at(int(r["offset"]), arr.nbytes), arr.tobytes())
                else:
                    self.assertEqual(r["offset"], -1)
        so = rows[(X.STATS_ONLY[0], X.STATS_ONLY[1])]
        self.assertFalse(so["has_data"])
        self.assertEqual(so["offset"], -1)
        self.assertEqual(so["nbytes"], 4 * 1000 * 1000)
        self.assertEqual(so["max"], 2.5)
        self.assertEqual(so["crc32"], 0xDEADBEEF)
        marker = rows[(X.EMPTY_RECORD[0], "")]
        self.assertEqual(marker["order"], X.EMPTY_RECORD[1])
        self.assertFalse(marker["has_data"])


class WriterOutputPortablePaths(WriterOutputReadByH5py):
    """The same checks with the SIMD statistics and PCLMUL CRC turned off."""
    ENV = {"MSPROBE_FORMAT_PORTABLE": "1"}


if __name__ == "__main__":
    WRITE_SAMPLE = sys.argv.pop(1)
    unittest.main()
