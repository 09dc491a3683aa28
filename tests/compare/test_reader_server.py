"""The reader server (msprobe-catalogue --serve) answers each request with
the bytes a helper of its own (msprobe-catalogue -- FILE) writes for the same
file, framed "MSPR" u32 kind, i32 wait status, u64 n, n bytes, and refuses an
answer of cap bytes or more as too big, serving on after it (issue 42).

Since issue 42 the child writes its answer into a memfd that the server sends
with sendfile: the server holds no copy of an answer. Its peak RSS (VmHWM)
must grow by less than a quarter of an answer of more than 4 MB; through the
old pipe and buffer it grew by more than the answer. Files from msprobe-gen
(statistics dumps); each file's one-shot answer is taken once."""
import os
import socket
import struct
import subprocess
import tempfile
import shutil
import unittest

BIN = os.environ["MSPROBE_BIN"]
CAT = os.path.join(os.path.dirname(BIN), "msprobe-catalogue")
GEN = os.environ["MSPROBE_GEN"]

ENDED, TOO_BIG = 0, 2


def gen(out, layers):
    subprocess.run([GEN, "--out", out, "--steps", "1", "--ranks", "1", "--layers", str(layers),
                    "--numel", "16", "--task", "statistics", "--seed", "3"], check=True,
                   capture_output=True, timeout=300)
    return os.path.join(out, "bench", "step0", "rank0", "dump.h5")


def read_exact(s, n):
    parts = []
    while n:
        b = s.recv(min(n, 1 << 20))
        if not b:
            raise EOFError("the server closed the socket")
        parts.append(b)
        n -= len(b)
    return b"".join(parts)


def vm_hwm_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM for %d" % pid)


class ReaderServer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="msp-reader-server-")
        cls.small = gen(os.path.join(cls.work, "small"), 4)
        cls.big = gen(os.path.join(cls.work, "big"), 12000)
        cls.want = {}
        for path in (cls.small, cls.big):
            p = subprocess.run([CAT, "--", path], capture_output=True, timeout=120)
            assert p.returncode == 0, p.stderr
            cls.want[path] = p.stdout

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def setUp(self):
        self.sock, theirs = socket.socketpair()
        env = dict(os.environ)
        env.pop("MSPROBE_READER_INPROC", None)
        self.server = subprocess.Popen([CAT, "--serve"], stdin=theirs, stdout=theirs, env=env)
        theirs.close()

    def tearDown(self):
        self.sock.close()
        self.server.wait(timeout=60)

    def ask(self, path, cap):
        p = path.encode()
        self.sock.sendall(b"MSPQ" + struct.pack("<QdI", cap, 120.0, len(p)) + p)
        hd = read_exact(self.sock, 20)
        self.assertEqual(hd[:4], b"MSPR")
        kind, status, n = struct.unpack("<IiQ", hd[4:])
        return kind, status, read_exact(self.sock, n)

    def one_shot(self, path):
        p = subprocess.run([CAT, "--", path], capture_output=True, timeout=120)
        return p.returncode, p.stdout

    def test_answers_are_the_helpers_bytes_and_the_server_holds_none(self):
        want_small, want_big = self.want[self.small], self.want[self.big]
        self.assertGreater(len(want_big), 4 << 20)

        kind, status, got = self.ask(self.small, 1 << 30)
        self.assertEqual((kind, os.WIFEXITED(status), os.WEXITSTATUS(status)), (ENDED, True, 0))
        self.assertEqual(got, want_small)
        before = vm_hwm_kb(self.server.pid)
        kind, status, got = self.ask(self.big, 1 << 30)
        self.assertEqual((kind, os.WEXITSTATUS(status)), (ENDED, 0))
        self.assertEqual(got, want_big)
        grew = vm_hwm_kb(self.server.pid) - before
        self.assertLess(grew * 1024, len(want_big) // 4,
                        "the server's peak RSS grew by %d KiB for a %d-byte answer"
                        % (grew, len(want_big)))

    def test_an_answer_of_cap_bytes_is_too_big_and_the_server_goes_on(self):
        want = self.want[self.big]
        kind, _, got = self.ask(self.big, len(want))
        self.assertEqual((kind, got), (TOO_BIG, b""))
        kind, status, got = self.ask(self.big, len(want) + 1)
        self.assertEqual((kind, os.WEXITSTATUS(status), got), (ENDED, 0, want))
        kind, _, got = self.ask(self.small, 1 << 30)
        self.assertEqual((kind, got), (ENDED, self.want[self.small]))

    def test_a_missing_file_is_the_helpers_error_answer(self):
        missing = os.path.join(self.work, "no", "dump.h5")
        rc, want = self.one_shot(missing)
        self.assertEqual(rc, 2)
        kind, status, got = self.ask(missing, 1 << 30)
        self.assertEqual((kind, os.WEXITSTATUS(status)), (ENDED, 2))
        self.assertEqual(got, want)
        self.assertIn(missing.encode(), got)


if __name__ == "__main__":
    unittest.main()
