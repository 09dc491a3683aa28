"""Files that lie about their data are refused, never read as something else
(issue 26, item 5): an /index whose dtype string, duplicate rows, has_data
flag or missing rows disagree with the datasets; a dump.json with data after
its JSON value; a shape [3.7, 4]; a .pt whose byteorder member is not exactly
"little". Each is an error naming the file and what is wrong; an unchanged
copy of each input is read fine (the control). Edits are made with h5py,
json and zipfile."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

import h5py
import numpy as np

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
import msprobe_layout as ML  # noqa: E402

BIN = os.environ["MSPROBE_BIN"]
SRC = os.environ["MSPROBE_SOURCE_DIR"]
FIX = os.path.join(SRC, "fixtures")


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120)


class IndexLies(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = os.path.join(self.tmp.name, "c")
        shutil.copytree(os.path.join(FIX, "npu"), self.root)
        self.c = os.path.join(self.root, "step1", "rank0", "dump.h5")
        self.assertEqual(run("ls", self.c).returncode, 0)  # the control

    def tearDown(self):
        self.tmp.cleanup()

    def data_row(self, rows):
        return next(i for i, r in enumerate(rows) if r["has_data"] and r["dtype"] == b"torch.bfloat16")

    def assert_refused(self, *words):
        p = run("ls", self.c)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn(self.c, p.stderr)
        for w in words:
            self.assertIn(w, p.stderr)
        # in a tree, compare names the step as not compared (exit 3), never
        # compares the file's data under the lie
        p = run("compare", "-b", os.path.join(FIX, "bench"), "-c", self.root, "-o",
                os.path.join(self.tmp.name, "out"))
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        self.assertIn("not compared: step 1 rank 0", p.stdout)

    def test_dtype_string_that_is_not_the_stored_type_is_refused(self):
        with h5py.File(self.c, "r+") as f:
            rows = f["index"][()]
            i = self.data_row(rows)
            rows[i]["dtype"] = b"torch.float16"  # same element size: only the name lies
            f["index"][i] = rows[i]
            rec, role = rows[i]["record"].decode(), rows[i]["role"].decode()
        self.assert_refused(rec, role, "the row says dtype torch.float16")

    def test_attrs_table_of_the_wrong_type_is_refused(self):
        # format_version 2 keeps records' attributes in /attrs: a table of
        # three strings; anything else is named, never read as attributes
        with h5py.File(self.c, "r+") as f:
            f.attrs["format_version"] = np.int64(2)
            f.create_dataset("attrs", data=np.arange(6, dtype=np.int64))
        self.assert_refused("/attrs is not a one-dimensional table")

    def test_duplicate_row_is_refused(self):
        with h5py.File(self.c, "r+") as f:
            rows = f["index"][()]
            i = self.data_row(rows)
            dt = f["index"].dtype
            del f["index"]
            f.create_dataset("index", data=np.concatenate([rows, rows[i:i + 1]]).astype(dt))
            rec, role = rows[i]["record"].decode(), rows[i]["role"].decode()
        self.assert_refused(rec, role, "two rows")

    def test_empty_index_of_a_file_with_records_is_refused(self):
        with h5py.File(self.c, "r+") as f:
            dt = f["index"].dtype
            groups = len([k for k in f.keys() if isinstance(f[k], h5py.Group)])
            del f["index"]
            f.create_dataset("index", shape=(0,), dtype=dt)
        self.assertGreater(groups, 0)
        self.assert_refused("names 0 of the file's %d record groups" % groups)

    def test_row_claiming_no_data_for_a_dataset_with_data_is_refused(self):
        with h5py.File(self.c, "r+") as f:
            rows = f["index"][()]
            i = self.data_row(rows)
            rows[i]["has_data"] = 0  # would silently turn the tensor into statistics
            f["index"][i] = rows[i]
            rec = rows[i]["record"].decode()
        self.assert_refused(rec, "has no data, the dataset holds some")

    # The checks a helper makes without listing the file object by object
    # (src/format/fmt_h5index.c: the root's link count, the header's
    # messages instead of a copy of the creation properties) refuse what the
    # listing and the copy refused.

    def test_a_group_the_index_does_not_name_is_refused(self):
        with h5py.File(self.c, "r+") as f:
            groups = len([k for k in f.keys() if isinstance(f[k], h5py.Group)])
            rows = len(set(r["record"] for r in f["index"][()] if r["has_data"]))
            f.create_group("Torch.hidden.0.forward").create_dataset(
                "output.0", data=np.arange(4, dtype="<f4"))
        self.assertEqual(groups, rows)
        self.assert_refused("names %d of the file's %d record groups" % (groups, groups + 1))

    def test_a_second_soft_name_for_a_record_is_no_record(self):
        """a soft link is no part of the format: the root holds one more
        link than its records and tables, and the file is still read"""
        with h5py.File(self.c, "r+") as f:
            rec = f["index"][self.data_row(f["index"][()])]["record"].decode()
            f["alias"] = h5py.SoftLink("/" + rec)
        p = run("ls", self.c)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(rec, p.stdout)

    def test_external_storage_behind_a_row_with_an_offset_is_refused(self):
        secret = os.path.join(self.tmp.name, "secret.bin")
        with h5py.File(self.c, "r+") as f:
            rows = f["index"][()]
            i = next(k for k, r in enumerate(rows) if r["has_data"] and r["offset"] >= 0)
            rec, role = rows[i]["record"].decode(), rows[i]["role"].decode()
            old = f[rec][role]
            shape, dtype, attrs = old.shape, old.dtype, dict(old.attrs)
            with open(secret, "wb") as out:
                out.write(b"SECRET-PAYLOAD" * (1 + int(np.prod(shape)) * dtype.itemsize // 14))
            del f[rec][role]
            d = f[rec].create_dataset(role, shape=shape, dtype=dtype,
                                      external=[(secret, 0, int(np.prod(shape)) * dtype.itemsize)])
            d.attrs.update(attrs)
        self.assertGreaterEqual(rows[i]["offset"], 0)
        self.assert_refused(rec, role, "external storage")

    def test_compressed_data_behind_a_row_with_an_offset_is_refused(self):
        with h5py.File(self.c, "r+") as f:
            rows = f["index"][()]
            i = next(k for k, r in enumerate(rows) if r["has_data"] and r["offset"] >= 0)
            rec, role = rows[i]["record"].decode(), rows[i]["role"].decode()
            old = f[rec][role]
            # the same stored type and bytes, chunked and deflated
            tid, shape, attrs = old.id.get_type(), old.shape, dict(old.attrs)
            raw = np.empty(int(rows[i]["nbytes"]), dtype=np.uint8)
            old.id.read(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=tid)
            del f[rec][role]
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_chunk(shape)
            dcpl.set_deflate(4)
            d = h5py.h5d.create(f[rec].id, role.encode(), tid, h5py.h5s.create_simple(shape),
                                dcpl=dcpl)
            d.write(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=tid)
            f[rec][role].attrs.update(attrs)
            self.assertIsNotNone(f[rec][role].compression)
        self.assert_refused(rec, role, "offset")


class MsprobeDirLies(unittest.TestCase):
    def setUp(self):
        import torch
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        g = torch.Generator().manual_seed(7)
        x = torch.randn(3, 4, generator=g)
        self.rdir = ML.write(os.path.join(d, "ms"), [
            ("Functional.relu.0.forward", {"input_args": [x], "output": [torch.relu(x)]}),
            ("Functional.gelu.1.forward", {"input_args": [x], "output": [torch.nn.functional.gelu(x)]}),
        ])
        self.json = os.path.join(self.rdir, "dump.json")
        p = run("ls", self.rdir)
        self.assertEqual(p.returncode, 0, p.stderr)  # the control
        self.assertIn("Functional.gelu.1.forward", p.stdout)

    def tearDown(self):
        self.tmp.cleanup()

    def test_dump_json_with_data_after_its_value_is_refused(self):
        with open(self.json, "a") as f:
            f.write('\n{"task": "tensor", "data": {}}\n')
        p = run("ls", self.rdir)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn(self.json, p.stderr)
        self.assertIn("data after the JSON value", p.stderr)
        self.assertNotIn("records=0", p.stdout)

    def test_fractional_shape_is_refused_not_truncated(self):
        with open(self.json) as f:
            doc = json.load(f)
        doc["data"]["Functional.relu.0.forward"]["input_args"][0]["shape"] = [3.7, 4]
        with open(self.json, "w") as f:
            json.dump(doc, f)
        p = run("ls", self.rdir)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("Functional.relu.0.forward", p.stderr)
        self.assertIn("bad shape", p.stderr)
        self.assertNotIn("[3, 4]", p.stdout)

    def test_pt_with_an_over_long_byteorder_is_refused(self):
        bench = os.path.join(self.tmp.name, "ms_bench")
        shutil.copytree(os.path.join(self.tmp.name, "ms"), bench)  # before the edit
        tdir = os.path.join(self.rdir, "dump_tensor_data")
        pt = os.path.join(tdir, "Functional.relu.0.forward.input.0.pt")
        with zipfile.ZipFile(pt) as z:
            members = [(i, z.read(i)) for i in z.infolist()]
        prefix = members[0][0].filename.split("/")[0]
        with zipfile.ZipFile(pt, "w") as z:
            for info, data in members:
                if not info.filename.endswith("/byteorder"):
                    z.writestr(info, data)
            # "big" and padding: longer than the 16 bytes a byteorder may take
            z.writestr(prefix + "/byteorder", b"big" + b" " * 40)
        out = os.path.join(self.tmp.name, "out")
        p = run("compare", "-b", os.path.join(bench, "step0", "rank0"), "-c", self.rdir, "-o", out)
        text = p.stdout + p.stderr
        self.assertNotIn(p.returncode, (0, 1), text)
        self.assertIn("byteorder", text)
        self.assertIn("Functional.relu.0.forward.input.0.pt", text)


if __name__ == "__main__":
    unittest.main()
