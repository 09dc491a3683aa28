"""Packed tensors (msprobe-dump(5) PACKED TENSORS, format_version 4, issue
42): torchvision's mobilenet_v3_small trained one AdamW step under
`msprobe dump --pack-kib 64`, and again without it. In the packed dump every
tensor of fewer than 64 KiB is a slice of a /packed segment (no dataset of
its own) and every larger one keeps its dataset; the bytes at each /index
offset, read with plain file reads, have the statistics numpy and zlib
compute from them and are the bytes of the same tensor in the unpacked dump;
msprobe compare of the two finds no difference in any tensor; and a packed
file that lies (a row past its segment's end, two rows on the same bytes, a
segment that is not bytes, a dataset under a packed row's name, no /index,
an older format_version) is refused naming the file and what is wrong.
MSPROBE_PACK_KIB alone (a preloaded run) sets the bound; a bad value is one
warning and no packing, and a bad --pack-kib stops msprobe dump before its
command runs."""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "")
BELOW = 64 * 1024

SCRIPT = r"""
import torch, torchvision
torch.manual_seed(0)
torch.set_num_threads(1)
m = torchvision.models.mobilenet_v3_small(num_classes=10)
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
x, y = torch.randn(2, 3, 64, 64), torch.randint(0, 10, (2,))
for step in range(2):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.step()
"""

NP = {"torch.float32": "<f4", "torch.float64": "<f8", "torch.float16": "<f2", "torch.int64": "<i8",
      "torch.int32": "<i4", "torch.uint8": "u1", "torch.int8": "i1", "torch.bool": "u1",
      "torch.int16": "<i2"}


def values(raw, dtype):
    """The elements of raw bytes as float64 (bfloat16: the upper half of a float32)."""
    if dtype == "torch.bfloat16":
        u = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
        return u.view("<f4").astype(np.float64)
    return np.frombuffer(raw, NP[dtype]).astype(np.float64)


def index_rows(path):
    """/index rows with data: [(record, role, dtype, offset, nbytes, stats)], and the
    segments of /packed as (file offset, size), read with h5py."""
    import h5py
    with h5py.File(path, "r") as f:
        segs = []
        if "packed" in f:
            for name, d in f["packed"].items():
                assert d.dtype == np.uint8 and len(d.shape) == 1, name
                segs.append((d.id.get_offset(), d.shape[0]))
        rows = []
        for r in f["index"][()]:
            if not r["has_data"] or not r["nbytes"]:
                continue
            rows.append((r["record"].decode(), r["role"].decode(), r["dtype"].decode(),
                         int(r["offset"]), int(r["nbytes"]),
                         (r["max"], r["min"], r["mean"], r["norm"], int(r["crc32"]))))
        has = {(rec, role): rec in f and role in f[rec] for rec, role, *_ in rows}
        version = int(f.attrs["format_version"])
    return rows, segs, has, version


def ls(path):
    return subprocess.run([BIN, "ls", path], capture_output=True, text=True, timeout=300)


DUMPS = {}  # "plain", "packed": the step's dump.h5; "tmp": their directory


def setUpModule():
    """The two runs, once for every test of the file."""
    if not dt.PRELOAD or not os.path.exists(dt.PRELOAD):
        raise unittest.SkipTest("MSPROBE_PRELOAD_LIB not set (run through ctest)")
    tmp = DUMPS["tmp"] = tempfile.mkdtemp(prefix="msp-packed-")
    with open(os.path.join(tmp, "train.py"), "w") as f:
        f.write(SCRIPT)
    for name, extra in (("plain", []), ("packed", ["--pack-kib", "64"])):
        cfg = os.path.join(tmp, name + ".json")
        with open(cfg, "w") as f:
            json.dump(dt.config(os.path.join(tmp, name), steps=[1]), f)
        env = dict(os.environ, MSPROBE_PRELOAD_LIB=dt.PRELOAD)
        env.pop("MSPROBE_PACK_KIB", None)
        p = subprocess.run([BIN, "dump", "-c", cfg, *extra, "--", dt.PYTHON, "train.py"], cwd=tmp,
                           env=env, capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            raise RuntimeError("msprobe dump %s failed:\n%s" % (" ".join(extra), p.stderr[-3000:]))
        DUMPS[name] = os.path.join(tmp, name, "step1", "rank0", "dump.h5")


def tearDownModule():
    if "tmp" in DUMPS:
        shutil.rmtree(DUMPS["tmp"], ignore_errors=True)


class Packed(unittest.TestCase):
    files = DUMPS

    def test_small_tensors_are_slices_of_segments_with_their_own_statistics(self):
        rows, segs, has, version = index_rows(self.files["packed"])
        self.assertEqual(version, 4)
        self.assertTrue(segs)
        small = [r for r in rows if r[4] < BELOW]
        large = [r for r in rows if r[4] >= BELOW]
        # the model has both kinds, in float32 and int64 (the targets)
        self.assertGreater(len(small), 300)
        self.assertGreater(len(large), 10)
        self.assertEqual({r[2] for r in small}, {"torch.float32", "torch.int64"})
        spans = []
        with open(self.files["packed"], "rb") as fh:
            for rec, role, dtype, off, n, st in rows:
                where = "%s %s" % (rec, role)
                inside = [s for s in segs if s[0] <= off and off + n <= s[0] + s[1]]
                self.assertEqual(bool(inside), n < BELOW, where)
                self.assertEqual(has[(rec, role)], n >= BELOW, where)  # a dataset or a slice
                if inside:
                    spans.append((off, n))
                fh.seek(off)
                raw = fh.read(n)
                x = values(raw, dtype)
                self.assertEqual(x.size * np.dtype(NP[dtype]).itemsize, n, where)
                self.assertEqual((st[0], st[1]), (x.max(), x.min()), where)
                self.assertAlmostEqual(st[2], x.mean(), delta=1e-7 * max(1.0, abs(x.mean())),
                                       msg=where)
                norm = np.sqrt((x * x).sum())
                self.assertAlmostEqual(st[3], norm, delta=1e-7 * max(1.0, norm), msg=where)
                self.assertEqual(st[4], zlib.crc32(raw), where)
        spans.sort()
        for (a, n), (b, _) in zip(spans, spans[1:]):
            self.assertLessEqual(a + n, b)  # no two tensors share a byte

    def test_packed_bytes_are_the_unpacked_dumps_tensors(self):
        plain, _, has, version = index_rows(self.files["plain"])
        packed, _, _, _ = index_rows(self.files["packed"])
        self.assertEqual(version, 2)
        self.assertTrue(all(has.values()))  # every tensor its dataset, as before
        a = {(r[0], r[1]): r for r in plain}
        b = {(r[0], r[1]): r for r in packed}
        self.assertEqual(sorted(a), sorted(b))
        with open(self.files["plain"], "rb") as fa, open(self.files["packed"], "rb") as fb:
            for key in a:
                fa.seek(a[key][3])
                fb.seek(b[key][3])
                self.assertEqual(fa.read(a[key][4]), fb.read(b[key][4]), key)
        # an object header a small tensor saved
        self.assertLess(os.path.getsize(self.files["packed"]), os.path.getsize(self.files["plain"]))

    def test_compare_finds_the_packed_dump_equal_to_the_unpacked_one(self):
        tmp = DUMPS["tmp"]
        out = os.path.join(tmp, "cmp")
        p = subprocess.run([BIN, "compare", "-b", os.path.join(tmp, "plain"), "-c",
                            os.path.join(tmp, "packed"), "-o", out, "--csv", "--replay",
                            "off", "--no-html"], capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(out, "result.csv"), newline="") as f:
            got = list(csv.DictReader(f))
        rows, _, _, _ = index_rows(self.files["packed"])
        # every tensor with data, but grad_fn.K (msprobe-compare(1): not
        # compared between two dumps of ours)
        want = {r[0] + "." + r[1] for r in rows if not r[1].startswith("grad_fn.")}
        self.assertEqual({r["NPU Name"] for r in got}, want)
        for r in got:
            self.assertEqual(float(r["MaxAbsErr"]), 0.0, r["NPU Name"])
            if r["Cosine"] == "N/A":  # a 0-d tensor
                self.assertEqual(r["NPU Tensor Shape"], "[]", r["NPU Name"])
            else:
                self.assertAlmostEqual(float(r["Cosine"]), 1.0, delta=1e-12, msg=r["NPU Name"])
        # ls lists the same tensors and statistics from either layout
        la, lb = ls(self.files["plain"]), ls(self.files["packed"])
        self.assertEqual((la.returncode, lb.returncode), (0, 0), la.stderr + lb.stderr)
        strip = [l for l in la.stdout.splitlines() if "dump.h5" not in l and "format" not in l]
        self.assertEqual(strip, [l for l in lb.stdout.splitlines()
                                 if "dump.h5" not in l and "format" not in l])


class PackSwitch(unittest.TestCase):
    """MSPROBE_PACK_KIB in a preloaded run without msprobe dump: its bound
    is the one given; a bad value is one warning and no packing; a bad
    --pack-kib stops msprobe dump before the command runs."""

    def preloaded(self, name, pack):
        tmp = DUMPS["tmp"]
        cfg = os.path.join(tmp, name + ".json")
        with open(cfg, "w") as f:
            json.dump(dt.config(os.path.join(tmp, name), steps=[1]), f)
        env = dict(os.environ, LD_PRELOAD=dt.PRELOAD, MSPROBE_PATH=cfg, MSPROBE_PACK_KIB=pack)
        p = subprocess.run([dt.PYTHON, "train.py"], cwd=tmp, env=env, capture_output=True,
                           text=True, timeout=900)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        return p, os.path.join(tmp, name, "step1", "rank0", "dump.h5")

    def test_the_environment_sets_the_bound(self):
        _, path = self.preloaded("env16", "16")
        rows, segs, has, version = index_rows(path)
        self.assertEqual(version, 4)
        self.assertTrue(segs)
        self.assertTrue(any(r[4] < 16384 for r in rows) and any(r[4] >= 16384 for r in rows))
        for rec, role, _, off, n, _ in rows:
            self.assertEqual(has[(rec, role)], n >= 16384, (rec, role, n))
            inside = any(a <= off and off + n <= a + m for a, m in segs)
            self.assertEqual(inside, n < 16384, (rec, role, n))

    def test_a_bad_value_is_one_warning_and_no_packing(self):
        p, path = self.preloaded("envbad", "2000")
        self.assertEqual(p.stderr.count("MSPROBE_PACK_KIB=2000 is not a number of KiB from 0 to "
                                        "1024; using 0"), 1, p.stderr[-3000:])
        rows, segs, has, version = index_rows(path)
        self.assertEqual((version, segs), (2, []))
        self.assertTrue(rows and all(has.values()))

    def test_a_bad_option_stops_before_the_command(self):
        tmp = DUMPS["tmp"]
        mark = os.path.join(tmp, "ran")
        env = dict(os.environ, MSPROBE_PRELOAD_LIB=dt.PRELOAD)
        for bad in ("2000", "-1", "4k"):
            p = subprocess.run([BIN, "dump", "-c", os.path.join(tmp, "plain.json"), "--pack-kib",
                                bad, "--", "touch", mark], cwd=tmp, env=env, capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("--pack-kib", p.stderr)
            self.assertIn(bad, p.stderr)
            self.assertFalse(os.path.exists(mark))


class PackedLies(unittest.TestCase):
    """A copy of the packed dump, edited with h5py, is refused by ls (exit
    2, naming the file and what is wrong); the unchanged copy is read."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "dump.h5")
        shutil.copy(DUMPS["packed"], self.path)
        self.assertEqual(ls(self.path).returncode, 0)  # the control

    def tearDown(self):
        self.tmp.cleanup()

    def refused(self, *words):
        p = ls(self.path)
        self.assertEqual(p.returncode, 2, p.stdout[-2000:] + p.stderr)
        self.assertIn(self.path, p.stderr)
        for w in words:
            self.assertIn(w, p.stderr)

    def packed_rows(self, f):
        rows = f["index"][()]
        return rows, [i for i, r in enumerate(rows) if r["has_data"] and 0 < r["nbytes"] < BELOW]

    def test_a_row_past_its_segments_end_is_refused(self):
        import h5py
        with h5py.File(self.path, "r+") as f:
            rows, small = self.packed_rows(f)
            seg = f["packed"]["0"]
            end = seg.id.get_offset() + seg.shape[0]
            i = max((i for i in small if rows[i]["offset"] < end), key=lambda i: rows[i]["offset"])
            rows[i]["offset"] = end - rows[i]["nbytes"] // 2  # begins inside, ends past it
            f["index"][i] = rows[i]
        self.refused("past the end of the /packed segment")

    def test_two_rows_on_the_same_bytes_are_refused(self):
        import h5py
        with h5py.File(self.path, "r+") as f:
            rows, small = self.packed_rows(f)
            i, j = small[0], small[1]
            rows[j]["offset"] = rows[i]["offset"]
            f["index"][j] = rows[j]
        self.refused("two packed rows share bytes")

    def test_a_segment_that_is_not_bytes_is_refused(self):
        import h5py
        with h5py.File(self.path, "r+") as f:
            n = f["packed"]["0"].shape[0]
            del f["packed"]["0"]
            f["packed"].create_dataset("0", data=np.zeros(n // 4, np.float32))
        self.refused("/packed/0", "not a segment of packed tensors")

    def test_a_dataset_under_a_packed_rows_name_is_refused(self):
        import h5py
        with h5py.File(self.path, "r+") as f:
            rows, small = self.packed_rows(f)
            rec, role = rows[small[0]]["record"].decode(), rows[small[0]]["role"].decode()
            g = f[rec] if rec in f else f.create_group(rec)
            k = len(g)  # its large tensors' datasets
            g.create_dataset(role, data=np.zeros(3, np.float32))
        self.refused(rec, "holds %d datasets, the table names %d of them" % (k + 1, k))

    def test_packed_tensors_without_an_index_are_refused(self):
        import h5py
        with h5py.File(self.path, "r+") as f:
            del f["index"]
        self.refused("/packed holds tensor data, but the file has no /index")

    def test_an_older_format_version_does_not_read_packed_rows(self):
        import h5py
        with h5py.File(self.path, "r+") as f:
            f.attrs["format_version"] = np.int64(2)  # /packed is no layout before 4
        self.refused("the row names a dataset the file does not have")


if __name__ == "__main__":
    unittest.main()
