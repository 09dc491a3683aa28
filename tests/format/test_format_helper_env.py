"""The reader helper runs with glibc's malloc asked for transparent huge
pages (issue 42): GLIBC_TUNABLES in its environment gains
glibc.malloc.hugetlb=1 after any tunables the user set, and a hugetlb the
user set is kept as it is. It also binds every symbol at its start
(LD_BIND_NOW=1 unless the user set it), so that a server's children inherit
the bindings. A wrapper named by MSPROBE_CATALOGUE_HELPER logs the
GLIBC_TUNABLES and LD_BIND_NOW it was started with, then runs the real
helper, for a helper per file (MSPROBE_READER_SERVER=0) and for the reader
server; `msprobe ls` must still list the records written here with h5py. A
server's child parses on fresh huge pages (ServerChildFaults); a small file
is read whole (SmallFilesReadWhole)."""
import os
import shutil
import socket
import stat
import struct
import subprocess
import tempfile
import unittest

import numpy as np

from msp_build import statistics_dump
from msp_h5dump import write_dump

BIN = os.environ["MSPROBE_BIN"]
REAL = os.path.join(os.path.dirname(BIN), "msprobe-catalogue")
NAMES = ["Functional.relu.0.forward", "Tensor.add.0.forward"]


class HelperEnvironment(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-helper-env-")
        self.dump = os.path.join(self.work, "dump.h5")
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        write_dump(self.dump, [(n, i, {"input.0": x, "output.0": x}) for i, n in enumerate(NAMES)])
        self.log = os.path.join(self.work, "tunables.log")
        self.wrapper = os.path.join(self.work, "helper.sh")
        with open(self.wrapper, "w") as f:
            f.write('#!/bin/sh\nprintf "T:%%s\\nB:%%s\\n" "${GLIBC_TUNABLES-(unset)}" '
                    '"${LD_BIND_NOW-(unset)}" >> "%s"\nexec "%s" "$@"\n' % (self.log, REAL))
        os.chmod(self.wrapper, stat.S_IRWXU)

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def tunables_seen(self, server, user, what="T", var="GLIBC_TUNABLES"):
        """the values of var (GLIBC_TUNABLES, logged as T:, or LD_BIND_NOW,
        B:) that the helpers of `msprobe ls` started with, when the user's
        is user (None: unset)"""
        env = dict(os.environ, MSPROBE_CATALOGUE_HELPER=self.wrapper,
                   MSPROBE_READER_SERVER="1" if server else "0")
        env.pop("MSPROBE_READER_INPROC", None)
        env.pop(var, None)
        if user is not None:
            env[var] = user
        if os.path.exists(self.log):
            os.unlink(self.log)
        p = subprocess.run([BIN, "ls", self.dump], capture_output=True, text=True, timeout=120,
                           env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for n in NAMES:
            self.assertIn(n, p.stdout)
        with open(self.log) as f:
            return {line[2:] for line in f.read().split() if line.startswith(what + ":")}

    def test_hugetlb_is_added_to_the_users_tunables(self):
        for server in (False, True):
            with self.subTest(server=server):
                self.assertEqual(self.tunables_seen(server, None), {"glibc.malloc.hugetlb=1"})
                self.assertEqual(self.tunables_seen(server, "glibc.malloc.tcache_count=0"),
                                 {"glibc.malloc.tcache_count=0:glibc.malloc.hugetlb=1"})

    def test_a_hugetlb_the_user_set_is_kept(self):
        for server in (False, True):
            with self.subTest(server=server):
                self.assertEqual(self.tunables_seen(server, "glibc.malloc.hugetlb=0"),
                                 {"glibc.malloc.hugetlb=0"})

    def test_symbols_are_bound_at_start_unless_the_user_says(self):
        for server in (False, True):
            with self.subTest(server=server):
                self.assertEqual(self.tunables_seen(server, None, "B", "LD_BIND_NOW"), {"1"})
                self.assertEqual(self.tunables_seen(server, "yes", "B", "LD_BIND_NOW"), {"yes"})


def sanitized(exe):
    """Whether exe runs on AddressSanitizer's allocator (no glibc heap)."""
    p = subprocess.run(["ldd", exe], capture_output=True, text=True)
    return "libasan" in p.stdout


class ServerHeapSteps(unittest.TestCase):
    """The reader server grows its heap 32 MiB at a time, before it forks a
    child per file (issue 42: a child that grew it 132 KiB at a time took
    three times the page faults), unless the user's GLIBC_TUNABLES sets
    glibc.malloc.top_pad. Read from /proc/PID/maps once the server has
    answered a request, as msprobe asks it (msprobe-catalogue --serve on a
    socket): "MSPQ", u64 cap, f64 seconds, u32 length, the path; the answer
    "MSPR", u32 kind, i32 status, u64 n, n bytes of catalogue."""

    def setUp(self):
        if sanitized(REAL):
            self.skipTest("the helper runs on AddressSanitizer's allocator")
        self.work = tempfile.mkdtemp(prefix="msp-helper-heap-")
        self.dump = os.path.join(self.work, "dump.h5")
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        write_dump(self.dump, [(n, i, {"input.0": x, "output.0": x}) for i, n in enumerate(NAMES)])

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def heap_mib(self, tunables):
        env = dict(os.environ)
        env.pop("GLIBC_TUNABLES", None)
        if tunables:
            env["GLIBC_TUNABLES"] = tunables
        ours, theirs = socket.socketpair()
        p = subprocess.Popen([REAL, "--serve"], stdin=theirs, stdout=theirs, env=env)
        theirs.close()
        try:
            path = self.dump.encode()
            ours.sendall(b"MSPQ" + struct.pack("<QdI", 1 << 30, 60.0, len(path)) + path)
            ours.settimeout(60)
            got = b""
            while len(got) < 20 or len(got) < 20 + struct.unpack("<Q", got[12:20])[0]:
                k = ours.recv(1 << 20)
                self.assertTrue(k, "the server ended without an answer")
                got += k
            kind, status = struct.unpack("<Ii", got[4:12])
            self.assertEqual((got[:4], kind, status, got[20:24]), (b"MSPR", 0, 0, b"MSPC"))
            with open("/proc/%d/maps" % p.pid) as f:
                heaps = [line.split()[0] for line in f if line.rstrip().endswith("[heap]")]
            self.assertEqual(len(heaps), 1, heaps)
            lo, hi = (int(v, 16) for v in heaps[0].split("-"))
            return (hi - lo) / 2**20
        finally:
            ours.close()
            p.wait(timeout=60)

    def test_the_heap_grows_in_steps_of_32_mib(self):
        self.assertGreaterEqual(self.heap_mib(None), 32.0)
        self.assertGreaterEqual(self.heap_mib("glibc.malloc.tcache_count=0"), 32.0)

    def test_a_top_pad_the_user_set_is_kept(self):
        # 64 KiB of pad: the heap stays within a few MiB of what the
        # server itself uses (under 1 MiB)
        self.assertLess(self.heap_mib("glibc.malloc.top_pad=65536"), 8.0)


def serve(tunables, paths):
    """msprobe-catalogue --serve with GLIBC_TUNABLES=tunables (as msprobe
    starts it), asked for each of paths in turn as msprobe asks it (see
    ServerHeapSteps); the page faults of its children, each waited for by the
    server (cminflt of /proc/PID/stat), a child."""
    env = dict(os.environ, GLIBC_TUNABLES=tunables, LD_BIND_NOW="1")
    ours, theirs = socket.socketpair()
    p = subprocess.Popen([REAL, "--serve"], stdin=theirs, stdout=theirs, env=env)
    theirs.close()
    try:
        ours.settimeout(60)
        for path in paths:
            path = path.encode()
            ours.sendall(b"MSPQ" + struct.pack("<QdI", 1 << 30, 60.0, len(path)) + path)
            got = b""
            while len(got) < 20 or len(got) < 20 + struct.unpack("<Q", got[12:20])[0]:
                k = ours.recv(1 << 20)
                if not k:
                    raise AssertionError("the server ended without an answer")
                got += k
            if struct.unpack("<Ii", got[4:12]) != (0, 0) or got[20:24] != b"MSPT":  # tables
                raise AssertionError("no catalogue for %s: %r" % (path, got[:64]))
        with open("/proc/%d/stat" % p.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[8]) / len(paths)  # cminflt, the 11th field
    finally:
        ours.close()
        p.wait(timeout=60)


class ServerChildFaults(unittest.TestCase):
    """A server's child parses on fresh huge pages (issue 42). The server's
    heap ends inside a huge page's span that holds pages of its own, where
    the kernel maps small pages only: a child's first two MiB or so of parse
    were a fault a page, often a copy of a server's page, their number set
    by where address-space randomisation put the heap (200 to 600 faults a
    child for this statistics file of 5,000 records, against 750 without
    huge pages). Now a child's parse starts at the next huge-page boundary:
    about 130, wherever the heap is. Eight servers, so that a layout that
    happens to suit the old child is not the only one tried."""

    def setUp(self):
        if sanitized(REAL):
            self.skipTest("the helper runs on AddressSanitizer's allocator")
        try:
            with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
                if "[never]" in f.read():
                    self.skipTest("transparent huge pages are off here")
        except OSError:
            self.skipTest("no transparent huge pages here")
        self.work, self.dump = statistics_dump(self, "msp-helper-faults-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_a_child_faults_a_fraction_of_its_pages_in(self):
        small = serve("glibc.malloc.hugetlb=0", [self.dump] * 4)
        huge = [serve("glibc.malloc.hugetlb=1", [self.dump] * 4) for _ in range(8)]
        self.assertGreater(small, 400)  # the parse touches some 3 MB
        self.assertLess(max(huge), 0.4 * small, (small, huge))


class SmallFilesReadWhole(unittest.TestCase):
    """A file of up to 16 MiB is mapped when the helper opens it (issue 42):
    checking /index against 600 datasets read each object header on its
    own, about 3,000 reads of 512 bytes for this 3.6 MB file, most of the
    helper's time on files of small tensors; read whole instead, every
    tensor byte was copied for nothing. The helper's reads are counted by
    the kernel: /proc/PID/io's syscr (calls) and rchar (bytes) of a shell
    hold those of the children it waited for."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-helper-whole-")
        self.dump = os.path.join(self.work, "dump.h5")
        x = np.arange(1024, dtype=np.float32)
        write_dump(self.dump, [("Functional.linear.%d.forward" % i, i,
                                {"input.0": x, "output.0": x + i}) for i in range(300)],
                   index=True)

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def reads(self, *cmd, field="syscr"):
        """read-family calls (syscr) or bytes read by them (rchar) of cmd and
        of the shell that waits for it"""
        line = " ".join("'%s'" % c for c in cmd)
        p = subprocess.run(["sh", "-c", line + ' >"$0"; grep "^%s:" /proc/$$/io' % field,
                            os.path.join(self.work, "answer")],
                           capture_output=True, text=True, timeout=120)
        if not p.stdout.startswith(field + ":"):
            self.skipTest("no /proc/PID/io here: " + p.stderr.strip())
        return int(p.stdout.split()[1])

    def test_a_file_of_600_small_tensors_in_a_few_reads(self):
        base = self.reads("true")
        helper = self.reads(REAL, "--", self.dump) - base
        self.assertLess(helper, 100)
        with open(os.path.join(self.work, "answer"), "rb") as f:
            answer = f.read()
        # the catalogue still names every record h5py wrote
        for i in (0, 150, 299):
            self.assertIn(b"Functional.linear.%d.forward" % i, answer)

    def test_no_tensor_byte_is_read_for_the_catalogue(self):
        """the file is mapped, not copied: the catalogue reads the metadata
        pages libhdf5 asks for and none of the 2.4 MB of tensor data (read
        whole into a buffer, every byte was read)"""
        size = os.path.getsize(self.dump)
        data = 600 * 1024 * 4
        self.assertGreater(data, size // 2)
        base = self.reads("true", field="rchar")
        helper = self.reads(REAL, "--", self.dump, field="rchar") - base
        self.assertLess(helper, size - data)
        with open(os.path.join(self.work, "answer"), "rb") as f:
            self.assertIn(b"Functional.linear.299.forward", f.read())


class ServerCannotStartChildren(unittest.TestCase):
    """A reader server that cannot start the child for a file (here: no
    descriptors left for the child's answer and the pipe that says it ended,
    as where memfd_create is refused) says nothing of the file: it is read by
    a helper of its own. Before, the file was not read ("cannot start the
    reader helper")."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-helper-nofd-")
        self.dump = os.path.join(self.work, "dump.h5")
        x = np.arange(6, dtype=np.float32)
        write_dump(self.dump, [(n, i, {"input.0": x, "output.0": x}) for i, n in enumerate(NAMES)])
        self.wrapper = os.path.join(self.work, "helper.sh")
        with open(self.wrapper, "w") as f:
            f.write('#!/bin/sh\nif [ "$1" = --serve ]; then ulimit -n 4; fi\nexec "%s" "$@"\n' % REAL)
        os.chmod(self.wrapper, stat.S_IRWXU)

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_the_file_is_read_by_a_helper_of_its_own(self):
        env = dict(os.environ, MSPROBE_CATALOGUE_HELPER=self.wrapper, MSPROBE_READER_SERVER="1")
        env.pop("MSPROBE_READER_INPROC", None)
        p = subprocess.run([BIN, "ls", self.dump], capture_output=True, text=True, timeout=120,
                           env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for n in NAMES:
            self.assertIn(n, p.stdout)


if __name__ == "__main__":
    unittest.main()
