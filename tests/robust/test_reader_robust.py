"""Readers that never crash, hang or lie (issue 10, items 1-3): a corrupt
file, a FIFO, external storage, a lying /index, a flipped data bit, a file
that shrinks while compare reads it. Every case is a clear exit 2 (or a row
naming the damage), never a signal or a hang; expectations come from h5py,
zlib and the bytes the test itself wrote."""
import os
import shutil
import stat
import subprocess
import tempfile
import time
import unittest
import zlib

import h5py
import numpy as np
import openpyxl

BIN = os.environ["MSPROBE_BIN"]
SRC = os.environ["MSPROBE_SOURCE_DIR"]
FIX = os.path.join(SRC, "fixtures")
NPU = os.path.join(FIX, "npu", "step1", "rank0", "dump.h5")
# under ASan, freed memory sits in its quarantine (256 MiB): RSS says nothing then
SANITIZED = b"libasan" in subprocess.run(["ldd", BIN], capture_output=True).stdout


def run(*args, timeout=60, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout, env=e)


class Readers(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, *p):
        return os.path.join(self.d, *p)

    def assert_clean_failure(self, p, name):
        self.assertGreaterEqual(p.returncode, 0, "killed by a signal: " + p.stderr)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn(name, p.stderr)

    def test_issue_reproducer_is_an_error_not_a_segfault(self):
        c = self.path("c.h5")
        shutil.copy(NPU, c)
        with open(c, "r+b") as f:  # the byte from the issue: libhdf5 1.10 segfaults on it
            f.seek(68942)
            f.write(b"\x02")
        p = run("ls", c)
        self.assert_clean_failure(p, c)
        self.assertIn("corrupt or not a dump", p.stderr)

    def test_one_server_parses_every_file_and_a_crash_stays_with_its_file(self):
        # Six steps, the third one the issue's segfaulting file: each file is
        # parsed in a process of its own (the crash is named, the steps after
        # it are listed) while the helper program starts once, not six times.
        for s in range(6):
            os.makedirs(self.path("root", "step%d" % s, "rank0"))
            shutil.copy(NPU, self.path("root", "step%d" % s, "rank0", "dump.h5"))
        bad = self.path("root", "step2", "rank0", "dump.h5")
        with open(bad, "r+b") as f:
            f.seek(68942)
            f.write(b"\x02")
        real = os.path.join(os.path.dirname(BIN), "msprobe-catalogue")
        log, wrapper = self.path("starts.log"), self.path("counting-helper")
        with open(wrapper, "w") as f:
            f.write('#!/bin/sh\necho "$@" >> "%s"\nexec "%s" "$@"\n' % (log, real))
        os.chmod(wrapper, 0o755)
        tag = "msprobe-test-%d-%s" % (os.getpid(), os.path.basename(self.d))
        p = run("ls", self.path("root"), env={"MSPROBE_CATALOGUE_HELPER": wrapper,
                                              "MSPROBE_TEST_TAG": tag})
        self.assertGreaterEqual(p.returncode, 0, "killed by a signal: " + p.stderr)
        self.assertIn(bad, p.stderr)
        self.assertIn("corrupt or not a dump", p.stderr)
        with h5py.File(NPU, "r") as f:
            n_records = (len({r["record"] for r in f["index"][()]}) if "index" in f
                         else len([k for k in f.keys() if isinstance(f[k], h5py.Group)]))
        headers = [l for l in p.stdout.splitlines() if l.startswith("step ")]
        listed = sorted(l.split(": ")[1].split()[0] for l in headers)
        self.assertEqual(listed, sorted(self.path("root", "step%d" % s, "rank0", "dump.h5")
                                        for s in (0, 1, 3, 4, 5)))
        for l in headers:
            self.assertIn("records=%d" % n_records, l)
        with open(log) as f:
            starts = f.read().split("\n")[:-1]
        self.assertTrue(starts and all(s == "--serve" for s in starts), starts)
        self.assertLessEqual(len(starts), 2, starts)
        # the servers end with the program that started them
        for _ in range(50):
            left = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open("/proc/%s/environ" % pid, "rb") as f:
                        if tag.encode() in f.read():
                            left.append(pid)
                except OSError:
                    pass
            if not left:
                break
            time.sleep(0.05)
        self.assertEqual(left, [])

    def test_fifo_named_dump_h5_does_not_hang(self):
        os.makedirs(self.path("step0", "rank0"))
        fifo = self.path("step0", "rank0", "dump.h5")
        os.mkfifo(fifo)
        self.assertTrue(stat.S_ISFIFO(os.stat(fifo).st_mode))
        p = run("ls", fifo, timeout=300)
        self.assert_clean_failure(p, fifo)
        self.assertIn("not a regular file", p.stderr)
        p = run("compare", "-b", self.d, "-c", self.d, "-o", self.path("out"), timeout=300)
        self.assertGreaterEqual(p.returncode, 0)
        self.assertIn(fifo, p.stderr)  # the tree scanner skips it by name

    def write_handmade(self, p, external=None, chunked_huge=False):
        with h5py.File(p, "w") as f:
            f.attrs.update(format="msprobe-dump", format_version=np.int64(1), framework="pytorch",
                           task="tensor", dump_mode="api", step=np.int64(0), rank=np.int64(0),
                           world_size=np.int64(1))
            g = f.create_group("Torch.add.0.forward")
            g.attrs["order"] = np.int64(0)
            if external:
                n = os.path.getsize(external) // 4
                d = g.create_dataset("output.0", shape=(n,), dtype="<f4",
                                     external=[(external, 0, n * 4)])
            elif chunked_huge:
                d = g.create_dataset("output.0", shape=(1 << 28,), dtype="<f4", chunks=(4096,))
            else:
                d = g.create_dataset("output.0", data=np.arange(6, dtype="<f4"))
            d.attrs["dtype"] = "torch.float32"

    def test_external_storage_is_refused(self):
        secret = self.path("secret.bin")
        payload = b"root:x:0:0:SECRET-PAYLOAD:/root:/bin/sh\n" * 4
        with open(secret, "wb") as f:
            f.write(payload)
        p0 = self.path("ext.h5")
        self.write_handmade(p0, external=secret)
        # h5py itself reads the other file's bytes through that dataset
        with h5py.File(p0, "r") as f:
            self.assertEqual(f["Torch.add.0.forward/output.0"][()].tobytes(), payload)
        for args in (("ls", p0), ("compare", "-b", p0, "-c", p0, "-o", self.path("o"))):
            p = run(*args)
            self.assert_clean_failure(p, p0)
            self.assertIn("external storage", p.stderr)
            self.assertNotIn("SECRET-PAYLOAD", p.stdout + p.stderr)

    def test_chunked_dataset_declaring_gigabytes_is_refused(self):
        p0 = self.path("huge.h5")
        self.write_handmade(p0, chunked_huge=True)
        self.assertLess(os.path.getsize(p0), 1 << 20)
        p = run("compare", "-b", p0, "-c", p0, "-o", self.path("o"), timeout=60)
        self.assert_clean_failure(p, p0)
        self.assertIn("refused", p.stderr)

    def test_compressed_tensor_is_compared_in_blocks(self):
        # 64 MiB a side, gzip in 256 KiB chunks: compare streams it from the
        # reader helper a block at a time, so neither compare nor the helper
        # holds the whole tensor (before: both sides whole in compare, and
        # the whole tensor in each helper)
        n = 16 << 20
        x = (np.arange(n, dtype=np.int64) % 1000).astype("<f4") / np.float32(7)
        y = x.copy()
        y[12_345_678] += np.float32(0.5)
        y[n - 1] -= np.float32(0.25)
        paths = []
        for name, data in (("b.h5", x), ("c.h5", y)):
            p0 = self.path(name)
            with h5py.File(p0, "w") as f:
                f.attrs.update(format="msprobe-dump", format_version=np.int64(1),
                               framework="pytorch", task="tensor", dump_mode="api",
                               step=np.int64(0), rank=np.int64(0), world_size=np.int64(1))
                g = f.create_group("Torch.add.0.forward")
                g.attrs["order"] = np.int64(0)
                d = g.create_dataset("output.0", data=data.reshape(4096, 4096),
                                     chunks=(16, 4096), compression="gzip")
                d.attrs["dtype"] = "torch.float32"
            paths.append(p0)
            self.assertLess(os.path.getsize(p0), n * 4 // 4)  # stored compressed
        probe = ("import resource, subprocess, sys\n"
                 "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
                 "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
        env = dict(os.environ, OMP_NUM_THREADS="2")
        # replay off: its worker (a Python with torch, ~400 MB) is not the reader
        p = subprocess.run(["/usr/bin/python3", "-c", probe, BIN, "compare", "-b", paths[0], "-c",
                            paths[1], "-o", self.path("out"), "--replay", "off"],
                           capture_output=True, text=True,
                           timeout=120, env=env)
        rc, maxrss_kib = (int(v) for v in p.stdout.split())
        self.assertIn(rc, (0, 1), p.stderr)
        # the largest process of the run (compare or a helper) stays far below
        # one side's 64 MiB
        if not SANITIZED:
            self.assertLess(maxrss_kib, 48 << 10, "peak RSS %d KiB" % maxrss_kib)
        ws = openpyxl.load_workbook(self.path("out", "result.xlsx"))["details"]
        hdr = [c.value for c in ws[1]]
        rows = [r for r in ws.iter_rows(min_row=2, values_only=True)
                if r[hdr.index("NPU Name")] == "Torch.add.0.forward.output.0"]
        self.assertEqual(len(rows), 1)
        row = rows[0]
        d = y.astype(np.float64) - x.astype(np.float64)
        self.assertAlmostEqual(float(row[hdr.index("MaxAbsErr")]), np.abs(d).max(), places=6)
        cos = float(np.dot(x, y.astype(np.float64)) /
                    (np.linalg.norm(x.astype(np.float64)) * np.linalg.norm(y.astype(np.float64))))
        self.assertAlmostEqual(float(row[hdr.index("Cosine")]), cos, places=9)
        self.assertEqual(float(row[hdr.index("NPU max")]), float(y.max()))
        self.assertEqual(float(row[hdr.index("Bench min")]), float(x.min()))

    def copy_npu(self):
        root = self.path("c")
        shutil.copytree(os.path.join(FIX, "npu"), root)
        return root, os.path.join(root, "step1", "rank0", "dump.h5")

    def test_index_row_with_a_moved_offset_is_refused(self):
        root, c = self.copy_npu()
        with h5py.File(c, "r+") as f:
            rows = f["index"][()]
            i = next(k for k, r in enumerate(rows) if r["has_data"] and r["nbytes"] > 64)
            rows[i]["offset"] += 16
            f["index"][i] = rows[i]
            rec, role = rows[i]["record"].decode(), rows[i]["role"].decode()
        p = run("ls", c)
        self.assert_clean_failure(p, c)
        self.assertIn(rec, p.stderr)
        self.assertIn(role, p.stderr)
        self.assertIn("offset", p.stderr)

    def test_index_declaring_more_rows_than_the_file_holds_is_refused(self):
        root, c = self.copy_npu()
        with h5py.File(c, "r+") as f:
            dt = f["index"].dtype
            del f["index"]
            f.create_dataset("index", shape=(20_000_000,), dtype=dt, chunks=(65536,),
                             compression="gzip")
        self.assertLess(os.path.getsize(c), 4 << 20)
        p = run("ls", c, timeout=60)
        self.assert_clean_failure(p, c)
        self.assertIn("20000000 rows", p.stderr)

    def test_flipped_data_bit_is_named_on_its_row(self):
        bench = os.path.join(FIX, "bench")
        root, c = self.copy_npu()
        with h5py.File(c, "r") as f:
            rows = f["index"][()]
            r = next(r for r in rows if r["has_data"] and r["nbytes"] > 64)
            rec, role, off, n = (r["record"].decode(), r["role"].decode(), int(r["offset"]),
                                 int(r["nbytes"]))
            stored = int(r["crc32"])
        with open(c, "r+b") as fh:
            fh.seek(off)
            data = bytearray(fh.read(n))
            self.assertEqual(zlib.crc32(bytes(data)), stored)
            data[n // 2] ^= 0x10
            fh.seek(off)
            fh.write(data)
        p = run("compare", "-b", bench, "-c", root, "-o", self.path("out"))
        # the report is written, and the exit status and stdout say the data is damaged
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("damaged: 1 tensor fails the CRC-32", p.stdout)
        ws = openpyxl.load_workbook(self.path("out", "result.xlsx"))["details"]
        hdr = [c.value for c in ws[1]]
        name, msg, step = hdr.index("NPU Name"), hdr.index("Err_message"), hdr.index("Step")
        hits = [row for row in ws.iter_rows(min_row=2, values_only=True)
                if row[msg] and "CRC-32" in row[msg]]
        self.assertEqual(len(hits), 1, hits)
        self.assertEqual((hits[0][name], hits[0][step]), (rec + "." + role, 1))
        self.assertIn("%08x" % stored, hits[0][msg])
        self.assertIn("%08x" % zlib.crc32(bytes(data)), hits[0][msg])

    def test_file_shrinking_while_compare_reads_is_an_error_not_sigbus(self):
        # The helper parses the file, then (as a new run writing into the same
        # dump_path would) the file shrinks before compare reads the tensors.
        root, c = self.copy_npu()
        real = os.path.join(os.path.dirname(BIN), "msprobe-catalogue")
        wrapper = self.path("shrinking-helper")
        with open(wrapper, "w") as f:
            # only once c itself is parsed: the other files' helpers run at
            # the same time (both sides, and the next pair while this one reads)
            f.write('#!/bin/sh\n"%s" "$@"; rc=$?\n[ "$2" = "%s" ] && truncate -s 20000 "%s"\n'
                    'exit $rc\n' % (real, c, c))
        os.chmod(wrapper, 0o755)
        bench = os.path.join(FIX, "bench")
        # one helper per file (no server), so the wrapper sees each file
        for io in ({}, {"MSPROBE_CATALOGUE_HELPER": wrapper, "MSPROBE_READER_SERVER": "0"}):
            p = run("compare", "-b", bench, "-c", root, "-o", self.path("out"), env=io)
            if not io:
                self.assertIn(p.returncode, (0, 1), p.stderr)
                continue
            self.assertGreaterEqual(p.returncode, 0, "killed by a signal (SIGBUS?)")
            self.assertEqual(os.path.getsize(c), 20000)
            self.assertIn(c, p.stderr)
            self.assertIn("truncated", p.stderr)


if __name__ == "__main__":
    unittest.main()
