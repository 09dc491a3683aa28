"""What the reports cost the file system (issue 42): result.csv goes around
the page cache (O_DIRECT, src/common/seqfile.c) where the file system allows
it, byte for byte the file a plain write makes, and a full disk under it is
one clear error; libxlsxwriter's temp files are memory files, not a dozen
inodes made and removed in the output directory for every workbook
(src/report/rep_tmpfile.c)."""
import csv
import ctypes
import mmap
import os
import re
import struct
import subprocess
import sys
import unittest

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
from msp_build import GenTree  # noqa: E402

MSPROBE = os.environ.get("MSPROBE_BIN", "msprobe")
ROWS = os.environ.get("CMP_REPORT_ROWS") or os.path.join(
    os.environ.get("MSPROBE_BUILD_DIR", "build"), "tests", "compare", "cmp_report_rows")
FULL_DISK = sys.argv.pop(1) if len(sys.argv) > 1 and sys.argv[1].endswith(".so") else ""
IN_CREATE = 0x100


def fs_type(path):
    return subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True,
                          text=True).stdout.strip()


def takes_direct_io(d):
    """Whether a file in d written with O_DIRECT stays out of the page cache:
    one aligned block written so and counted (tmpfs keeps every page
    whatever the flag; some file systems refuse the flag or the write)."""
    if fs_type(d) in ("tmpfs", "ramfs") or not hasattr(os, "O_DIRECT"):
        return False
    probe = os.path.join(d, "direct-probe")
    block = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT wants
    block.write(b"x" * 4096)
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
        try:
            wrote = os.write(fd, block) == 4096
        finally:
            os.close(fd)
        return wrote and cached_bytes(probe) == 0
    except OSError:
        return False
    finally:
        block.close()
        if os.path.exists(probe):
            os.unlink(probe)


def cached_bytes(path):
    """Bytes of path in the page cache, as util-linux's fincore counts them."""
    r = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "-o", "RES", path],
                       capture_output=True, text=True, check=True)
    return int(r.stdout.split()[0])


def creations(fd):
    """Names of the IN_CREATE events queued on inotify fd."""
    names = []
    while True:
        try:
            buf = os.read(fd, 1 << 16)
        except BlockingIOError:
            return names
        at = 0
        while at < len(buf):
            _, mask, _, n = struct.unpack_from("iIII", buf, at)
            name = buf[at + 16:at + 16 + n].rstrip(b"\0").decode()
            if mask & IN_CREATE:
                names.append(name)
            at += 16 + n


class ReportFiles(GenTree, unittest.TestCase):
    # 3 ranks x 800 records: a result.csv of several MiB, whole 1 MiB blocks
    # and a tail that is not a whole block
    GEN_PREFIX = "msp-report-files-"
    GEN_ARGS = ("--steps", "1", "--ranks", "3", "--layers", "400", "--numel", "64", "--task",
                "statistics", "--dtype", "bf16", "--plant", "100", "--plant-rank", "1",
                "--magnitude", "0.3", "--seed", "5")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.bench = os.path.join(cls.work, "bench")
        cls.npu = os.path.join(cls.work, "npu")

    def compare(self, out, env=None, extra=("--csv", "--no-html")):
        return subprocess.run([MSPROBE, "compare", "-b", self.bench, "-c", self.npu, "-o", out,
                               "--replay", "off", *extra], capture_output=True, text=True,
                              env=env, timeout=300)

    def test_result_csv_around_the_cache_is_the_plain_files_bytes(self):
        direct = os.path.join(self.work, "direct")
        plain = os.path.join(self.work, "plain")
        r = self.compare(direct)
        self.assertEqual(r.returncode, 1, r.stderr)  # the planted error fails records
        r = self.compare(plain, dict(os.environ, MSPROBE_DIRECT_IO="0"))
        self.assertEqual(r.returncode, 1, r.stderr)
        # what the writes left in the page cache, before reading puts it there:
        # the direct file (at most) its last partial block; the plain one all
        # of it, which shows the count can tell
        direct_cached = cached_bytes(os.path.join(direct, "result.csv"))
        plain_cached = cached_bytes(os.path.join(plain, "result.csv"))
        with open(os.path.join(direct, "result.csv"), "rb") as f:
            got = f.read()
        with open(os.path.join(plain, "result.csv"), "rb") as f:
            self.assertEqual(got, f.read())
        size = len(got)
        self.assertGreater(size, 3 << 20)
        self.assertNotEqual(size % 4096, 0)
        # every tensor of the npu side has its row, the last one whole
        want = set()
        for rank in range(3):
            with h5py.File(os.path.join(self.npu, "step0", f"rank{rank}", "dump.h5"), "r") as f:
                strs = bytes(f["strings"][...]).split(b"\0")
                for row in f["stats"][...]:
                    want.add((rank, strs[row["record"]].decode() + "." +
                              strs[row["role"]].decode()))
        rows = list(csv.reader(got.decode().splitlines()))
        head = rows[0]
        name, rank = head.index("NPU Name"), head.index("Rank")
        self.assertEqual({(int(r[rank]), r[name]) for r in rows[1:]}, want)
        self.assertEqual(len(rows) - 1, len(want))
        self.assertTrue(got.endswith(b"\r\n"))
        if not takes_direct_io(self.work):
            self.skipTest(f"{self.work} ({fs_type(self.work)}) takes no O_DIRECT writes")
        self.assertLessEqual(direct_cached, 8192)
        self.assertGreater(plain_cached, size // 2)

    @unittest.skipUnless(FULL_DISK and os.path.exists(FULL_DISK), "no full_disk helper built")
    def test_a_full_disk_under_result_csv_is_one_clear_error(self):
        out = os.path.join(self.work, "full")
        for direct in ("1", "0"):
            with self.subTest(direct=direct):
                env = dict(os.environ, LD_PRELOAD=FULL_DISK, FULL_DISK_PATHS=".result.csv.tmp.",
                           MSPROBE_DIRECT_IO=direct)
                r = self.compare(out, env)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertRegex(r.stderr, r"cannot write " + os.path.join(out, r"\.result\.csv")
                                 + r"\.tmp\.\d+: No space left on device")
                self.assertEqual(r.stderr.count("No space left on device"), 1, r.stderr)
                self.assertFalse([n for n in os.listdir(out) if "csv" in n])

    def test_workbooks_make_few_files_in_the_output_directory(self):
        """Per-rank workbooks (cmp_report_rows lowers a sheet to 500 rows):
        each is its temp name, libxlsxwriter's workbook and our rows' temp
        files in the output directory; libxlsxwriter's own dozen temp files
        a workbook are memory files."""
        out = os.path.join(self.work, "books")
        os.makedirs(out)
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        self.assertGreaterEqual(fd, 0)
        try:
            self.assertGreaterEqual(libc.inotify_add_watch(fd, out.encode(), IN_CREATE), 0)
            r = subprocess.run([ROWS, self.bench, self.npu, out, "--rows", "500", "--replay",
                                "off"], capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr)
            made = creations(fd)
        finally:
            os.close(fd)
        books = sorted(n for n in os.listdir(out) if n.endswith(".xlsx"))
        self.assertEqual(books, ["result.xlsx"] + [f"result_rank{k}.xlsx" for k in range(3)])
        # each book's temp name and libxlsxwriter's workbook, the rows' temp
        # files and result.csv's; before, a dozen "tmp.XXXXXX" a book too
        ours = re.compile(r"^(\.msprobe-rows\.|\.{1,2}result(_rank\d)?\.(xlsx|csv)\.tmp\.)")
        self.assertEqual([n for n in made if not ours.match(n)], [])
        self.assertEqual(len([n for n in made if ".xlsx.tmp." in n]), 2 * len(books) - 1)
        self.assertFalse([n for n in os.listdir(out) if n.startswith(".")])


if __name__ == "__main__":
    unittest.main()
