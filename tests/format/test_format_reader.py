"""msp_dump_open / msp_dump_read_tensor / msp_dump_record_attrs (through the
fmt_read_dump helper) on our own file, on the same file without /index, on a
file written by h5py alone, and on broken files."""
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
import zlib

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fmt_expect as X  # noqa: E402
from fmt_readout import parse  # noqa: E402
import fmt_handmade as H  # noqa: E402

WRITE_SAMPLE = READ_DUMP = None


def read_dump(path, check=True):
    p = subprocess.run([READ_DUMP, path], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"fmt_read_dump {path}: rc {p.returncode}: {p.stderr}")
    return p


def role_key(role):
    kind = {"input": 0, "kwarg": 1, "output": 2}.get(role.split(".")[0], 3)
    rest = role.split(".", 1)[1]
    return (kind, int(rest) if rest.isdigit() else math.inf, rest)


class ReaderOnSample(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.tmp.name, "dump.h5")
        subprocess.run([WRITE_SAMPLE, cls.path], check=True)
        cls.noindex = os.path.join(cls.tmp.name, "noindex.h5")
        shutil.copy(cls.path, cls.noindex)
        with h5py.File(cls.noindex, "a") as f:
            del f["index"]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check_catalogue(self, path, has_index):
        head, recs, tensors, attrs = parse(read_dump(path).stdout)
        r = X.ROOT_ATTRS
        self.assertEqual(head, [str(has_index), str(r["step"]), str(r["rank"]),
                                str(r["world_size"]), r["task"], r["dump_mode"],
                                r["framework"], r["framework_version"]])
        # a record without tensor data is /index and /attrs rows alone:
        # without /index it is gone (msprobe-dump(5))
        want = sorted([(rec, order) for rec, order, _ in X.RECORDS] +
                      ([X.EMPTY_RECORD] if has_index else []), key=lambda x: x[1])
        self.assertEqual(recs, want)
        for rec, order, specs in X.RECORDS:
            exp = [(role, dtype) for role, dtype, *_ in specs]
            # a statistics-only tensor is its /index row alone: without
            # /index it is gone (msprobe-dump(5))
            if rec == X.STATS_ONLY[0] and has_index:
                exp.append((X.STATS_ONLY[1], X.STATS_ONLY[2]))
            exp.sort(key=lambda x: role_key(x[0]))
            self.assertEqual([(t["role"], t["dtype"]) for t in tensors[rec]], exp, rec)
        self.assertNotIn(X.EMPTY_RECORD[0], tensors)
        for rec, order, role, dtype, shape, salt, arr in X.all_tensors():
            with self.subTest(rec=rec, role=role, has_index=has_index):
                t = next(t for t in tensors[rec] if t["role"] == role)
                self.assertEqual(t["shape"], shape)
                self.assertEqual(t["ndim"], len(shape))
                self.assertEqual((t["has_data"], t["has_stats"]), (1, 1))
                self.assertEqual(t["nbytes"], arr.nbytes)
                self.assertEqual(t["data_crc"], zlib.crc32(arr.tobytes()))
                if arr.nbytes:
                    self.assertGreater(t["offset"], 0)  # pread equality checked by helper
                else:
                    self.assertEqual(t["offset"], -1)
                exp = X.stats(dtype, arr)
                for k in ("max", "min", "mean", "norm"):
                    self.assertTrue(X.close(t[k], exp[k]), (k, t[k], exp[k]))
                for k in ("nan_count", "inf_count", "crc32"):
                    self.assertEqual(t[k], exp[k], k)
                self.assertEqual(t["device"], X.device_of(salt))
                self.assertEqual(t["requires_grad"], int(X.requires_grad_of(salt)))
        self.assertEqual(attrs, {k: v for k, v in X.RECORD_ATTRS.items()
                                 if has_index or k != X.EMPTY_RECORD[0]})
        if not has_index:
            return
        rec, role, dtype, shape, st, dev, rg = X.STATS_ONLY
        t = next(t for t in tensors[rec] if t["role"] == role)
        self.assertEqual((t["has_data"], t["offset"], t["shape"], t["nbytes"]),
                         (0, -1, shape, 4 * 1000 * 1000))
        for k, v in st.items():
            self.assertEqual(t[k], v, k)
        self.assertEqual((t["device"], t["requires_grad"]), (dev, int(rg)))

    def test_catalogue_from_index(self):
        self.check_catalogue(self.path, 1)

    def test_catalogue_by_walking_groups_when_index_is_gone(self):
        self.check_catalogue(self.noindex, 0)


class ReaderOnHandWrittenFile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.tmp.name, "dump.h5")
        H.write(cls.path)
        cls.head, cls.recs, cls.tensors, cls.attrs = parse(read_dump(cls.path).stdout)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_missing_root_attributes_read_as_unknown(self):
        self.assertEqual(self.head, ["0", "4", "-1", "-1", "tensor", "", "pytorch", ""])

    def test_records_in_order_with_fallback_for_missing_order(self):
        self.assertEqual(self.recs, [(r, o) for r, o, _ in H.EXPECT])

    def test_dtypes_shapes_and_direct_offsets(self):
        for rec, _, specs in H.EXPECT:
            got = self.tensors[rec]
            self.assertEqual([t["role"] for t in got], [s[0] for s in specs], rec)
            for t, (role, dtype, shape, has_data, direct) in zip(got, specs):
                with self.subTest(rec=rec, role=role):
                    self.assertEqual((t["dtype"], t["shape"], t["has_data"]),
                                     (dtype, shape, int(has_data)))
                    self.assertEqual(t["offset"] >= 0, direct)

    def test_data_converted_to_native_little_endian(self):
        for rec, _, specs in H.EXPECT:
            for t, (role, _, _, has_data, _) in zip(self.tensors[rec], specs):
                if has_data:
                    with self.subTest(rec=rec, role=role):
                        b = H.native_bytes(rec, role)
                        self.assertEqual(t["nbytes"], len(b))
                        self.assertEqual(t["data_crc"], zlib.crc32(b))

    def test_a_stream_passes_over_what_it_skips(self):
        # direct (pread) and chunked or compressed (HDF5) tensors alike
        for rec, _, specs in H.EXPECT:
            for t, (role, _, _, has_data, _) in zip(self.tensors[rec], specs):
                if has_data:
                    with self.subTest(rec=rec, role=role):
                        b = H.native_bytes(rec, role)
                        kept = bytes(v for i, v in enumerate(b) if i % 8 < 5)
                        self.assertEqual(t["skip_crc"], zlib.crc32(kept))

    def test_statistics_present_only_where_written(self):
        by = {(r, t["role"]): t for r, ts in self.tensors.items() for t in ts}
        t = by[("Functional.linear.0.forward", "output.0")]
        x = H.arrays()[("Functional.linear.0.forward", "output.0")].astype(np.float64)
        self.assertEqual(t["has_stats"], 1)
        self.assertTrue(X.close(t["mean"], float(x.mean())))
        self.assertEqual((t["device"], t["requires_grad"]), ("cuda:0", 1))
        self.assertEqual(by[("Functional.linear.0.forward", "input.0")]["has_stats"], 0)
        s = by[("Torch.sum.0.forward", "output.1")]
        self.assertEqual((s["has_stats"], s["max"], s["min"], s["mean"], s["norm"]),
                         (1, 1.5, -2.0, 0.25, 9.0))

    def test_record_attributes_as_text(self):
        self.assertEqual(self.attrs, {"Functional.linear.0.forward": {"kwarg.bias": "None"},
                                      "Tensor.mul.2.forward": {"kwarg.other": "3"}})


class ReaderOnBrokenFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.good = os.path.join(cls.tmp.name, "good.h5")
        subprocess.run([WRITE_SAMPLE, cls.good], check=True)
        with open(cls.good, "rb") as fh:
            cls.data = fh.read()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def expect_error(self, path, words):
        p = read_dump(path, check=False)
        self.assertEqual(p.returncode, 2, (path, p.returncode, p.stderr))
        self.assertIn(path, p.stderr)
        for w in words:
            self.assertIn(w, p.stderr)

    def write(self, name, data):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as fh:
            fh.write(data)
        return path

    def test_missing_file(self):
        self.expect_error(os.path.join(self.tmp.name, "absent.h5"), ["No such file"])

    def test_text_and_empty_files_are_not_hdf5(self):
        self.expect_error(self.write("t.txt", b"hello\n" * 100), ["not an HDF5 file"])
        self.expect_error(self.write("empty.h5", b""), ["not an HDF5 file"])

    def test_random_bytes(self):
        rng = np.random.default_rng(1)
        for i in range(5):
            self.expect_error(self.write(f"rand{i}.h5", rng.bytes(5000 + 777 * i)), [])

    def test_truncated_dump_at_many_lengths(self):
        n = len(self.data)
        for cut in sorted({8, 100, 512, 2048, n // 4, n // 2, n - 4096, n - 100, n - 1}):
            with self.subTest(cut=cut):
                self.expect_error(self.write(f"cut{cut}.h5", self.data[:cut]), [])

    def test_hdf5_file_that_is_not_a_dump(self):
        path = os.path.join(self.tmp.name, "other.h5")
        with h5py.File(path, "w") as f:
            f["x"] = np.arange(3)
        self.expect_error(path, ["not an msprobe dump", "format"])

    def test_newer_format_version_is_refused(self):
        path = os.path.join(self.tmp.name, "newer.h5")
        shutil.copy(self.good, path)
        with h5py.File(path, "a") as f:
            f.attrs["format_version"] = np.int64(99)
        self.expect_error(path, ["format_version 99", "upgrade"])

    def test_dtype_attribute_contradicting_the_data(self):
        path = os.path.join(self.tmp.name, "contra.h5")
        with h5py.File(path, "w") as f:
            f.attrs["format"] = "msprobe-dump"
            d = f.create_group("Torch.add.0.forward").create_dataset("input.0",
                                                                     data=np.arange(4.0))
            d.attrs["dtype"] = "torch.int32"
        self.expect_error(path, ["Torch.add.0.forward", "input.0", "torch.int32"])


if __name__ == "__main__":
    READ_DUMP = sys.argv.pop(2)
    WRITE_SAMPLE = sys.argv.pop(1)
    unittest.main()
