"""The reader helper under faults from outside (issue 26, items 1, 7 and 9):
a helper or server killed (SIGKILL, as the OOM killer sends), stopped
(SIGSTOP) or hung up (SIGHUP under nohup) mid-request is retried once on a
fresh one, and a step that still cannot be read makes compare exit 3 and name
it on stdout; inherited ignored signals stay ignored in the helpers; helpers
die with their caller, whatever MSPROBE_READER_TIMEOUT says (inf, 1e300);
the time limit grows with the file from a short floor. The limit counts the
helper's work, its CPU time (issue 42, item 4): a healthy dump read by a
helper starved of CPU on a busy core is read, whatever the wall clock says,
and a mutated one is still refused at once, for what is wrong with it.

Faults are injected by a stand-in for msprobe-catalogue
(MSPROBE_CATALOGUE_HELPER): a small Python program that fails as told on its
first start (or every start), then runs the real helper. Expected values come
from an undisturbed run of the same compare, read back with openpyxl."""
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import uuid

import h5py
import numpy as np
import openpyxl

BIN = os.environ["MSPROBE_BIN"]
SRC = os.environ["MSPROBE_SOURCE_DIR"]
FIX = os.path.join(SRC, "fixtures")
REAL = os.path.join(os.path.dirname(BIN), "msprobe-catalogue")
SANITIZED = b"libasan" in subprocess.run(["ldd", BIN], capture_output=True).stdout

# A stand-in helper. MODE: what to do; ONCE: only on the first start (a marker
# file claimed with O_EXCL), later starts exec the real helper.
#   kill-serve: as a server, read one request, then SIGKILL itself (mid-request)
#   stop-serve: as a server, read one request, then SIGSTOP itself
#   kill-file:  as a per-file helper ("-- FILE", FILE's path holding ONLY), SIGKILL itself
#   stop-file:  as a per-file helper (likewise), SIGSTOP itself
#   hup:        send itself SIGHUP, then exec the real helper
FAULTY = textwrap.dedent("""\
    import os, signal, sys
    mode, once, marker, real, only = %r, %r, %r, %r, %r
    first = True
    if once:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            first = False
    serving = sys.argv[1:] == ["--serve"]
    if first and mode == "hup":
        os.kill(os.getpid(), signal.SIGHUP)
    elif first and serving and mode in ("kill-serve", "stop-serve"):
        hd = os.read(0, 24)
        n = int.from_bytes(hd[20:24], "little")
        got = b""
        while len(got) < n:
            got += os.read(0, n - len(got))
        os.kill(os.getpid(), signal.SIGKILL if mode == "kill-serve" else signal.SIGSTOP)
        os._exit(0)  # after SIGCONT (never sent)
    elif (first and not serving and sys.argv[1:2] == ["--"] and only in sys.argv[2]
          and mode in ("kill-file", "stop-file")):
        os.kill(os.getpid(), signal.SIGKILL if mode == "kill-file" else signal.SIGSTOP)
    os.execv(real, [real] + sys.argv[1:])
    """)


def details(out):
    ws = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)["details"]
    rows = list(ws.iter_rows(values_only=True))
    hdr = rows[0]
    keep = ("Step", "NPU Name", "Cosine", "MaxAbsErr", "Accuracy Reached or Not")
    return sorted(tuple(r[hdr.index(k)] for k in keep) for r in rows[1:])


class Faults(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        # a fixed expectation: the same compare, undisturbed
        cls.ref_out = os.path.join(d, "ref")
        p = subprocess.run([BIN, "compare", "-b", os.path.join(FIX, "bench"), "-c",
                            os.path.join(FIX, "npu"), "-o", cls.ref_out],
                           capture_output=True, text=True)
        assert p.returncode in (0, 1), p.stdout + p.stderr
        cls.ref_rc = p.returncode
        cls.ref = details(cls.ref_out)
        steps = {r[0] for r in cls.ref}
        assert steps == {0, 1}, steps

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.d = tempfile.mkdtemp(dir=self.tmp.name)

    def helper(self, mode, once=True, only="/"):
        path = os.path.join(self.d, "faulty-helper")
        with open(path, "w") as f:
            f.write("#!%s\n" % sys.executable)
            f.write(FAULTY % (mode, once, os.path.join(self.d, "marker"), REAL, only))
        os.chmod(path, 0o755)
        return path

    def compare(self, env, preexec=None, timeout=600):
        e = dict(os.environ)
        e.update(env)
        out = os.path.join(self.d, "out")
        p = subprocess.run([BIN, "compare", "-b", os.path.join(FIX, "bench"), "-c",
                            os.path.join(FIX, "npu"), "-o", out], capture_output=True,
                           text=True, env=e, timeout=timeout, preexec_fn=preexec)
        return p, out

    def assert_as_undisturbed(self, p, out):
        self.assertEqual(p.returncode, self.ref_rc, p.stdout + p.stderr)
        self.assertNotIn("not compared", p.stdout)
        self.assertEqual(details(out), self.ref)

    def test_server_killed_mid_request_is_retried_and_every_step_compared(self):
        p, out = self.compare({"MSPROBE_CATALOGUE_HELPER": self.helper("kill-serve")})
        self.assert_as_undisturbed(p, out)

    def test_per_file_helper_killed_is_retried_and_every_step_compared(self):
        p, out = self.compare({"MSPROBE_CATALOGUE_HELPER": self.helper("kill-file"),
                               "MSPROBE_READER_SERVER": "0"})
        self.assert_as_undisturbed(p, out)

    def test_stopped_server_is_given_up_and_retried(self):
        # the caller waits the wall-clock backstop (60 s: a stopped server does
        # no work) and 5 s for the server, then retries
        p, out = self.compare({"MSPROBE_CATALOGUE_HELPER": self.helper("stop-serve"),
                               "MSPROBE_READER_TIMEOUT": "1"})
        self.assert_as_undisturbed(p, out)

    def test_stopped_per_file_helper_is_not_called_corrupt_and_is_retried(self):
        p, out = self.compare({"MSPROBE_CATALOGUE_HELPER": self.helper("stop-file"),
                               "MSPROBE_READER_SERVER": "0", "MSPROBE_READER_TIMEOUT": "1"})
        self.assert_as_undisturbed(p, out)
        self.assertNotIn("corrupt", p.stderr)

    def test_helper_killed_every_time_is_exit_3_naming_the_step_on_stdout(self):
        npu1 = os.path.join("npu", "step1", "rank0", "dump.h5")
        p, out = self.compare({"MSPROBE_CATALOGUE_HELPER": self.helper("kill-file", False, npu1),
                               "MSPROBE_READER_SERVER": "0"})
        self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("not compared: ")]
        # every helper of that file dies: its step is named, not called corrupt
        self.assertEqual(len(lines), 1, p.stdout)
        self.assertTrue(lines[0].startswith("not compared: step 1 rank 0 skipped: "), lines[0])
        self.assertIn(npu1, lines[0])
        self.assertIn("failed twice", lines[0])
        self.assertIn("signal 9", lines[0])
        self.assertNotIn("corrupt", lines[0])
        self.assertIn("incomplete: 1 step/rank file could not be read", p.stdout)
        # the other step is compared as undisturbed
        self.assertEqual(details(out), [r for r in self.ref if r[0] == 0])

    def test_hangup_under_nohup_leaves_the_helpers_alive(self):
        # nohup: SIGHUP ignored in msprobe, and so in every helper it starts;
        # the stand-in hangs itself up before it becomes the real helper
        def nohup():
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
        for server in ("1", "0"):
            with self.subTest(server=server):
                p, out = self.compare({"MSPROBE_CATALOGUE_HELPER": self.helper("hup", once=False),
                                       "MSPROBE_READER_SERVER": server}, preexec=nohup)
                self.assert_as_undisturbed(p, out)
                self.assertNotIn("signal 1", p.stderr)


def hanging_dump(d):
    """A 92 KiB dump whose parse loops inside libhdf5 (a zeroed block in its
    metadata, found by the mutation campaign's generator)."""
    path = os.path.join(d, "hang.h5")
    with open(os.path.join(FIX, "npu", "step0", "rank0", "dump.h5"), "rb") as f:
        data = bytearray(f.read())
    data[68208:68408] = bytes(200)
    with open(path, "wb") as f:
        f.write(data)
    return path


def tagged_pids(tag):
    """Processes whose environment carries tag (the caller's helpers inherit it)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if tag.encode() in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def children_cpu():
    """CPU seconds of the processes this one started and reaped, and of
    theirs: the work they did, whatever the wall clock said."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ls_stats(text):
    """{(record, role): (max, min, mean, norm)} as `msprobe ls FILE` prints them."""
    stats, record = {}, None
    for line in text.splitlines():
        if line.startswith("  ") and not line.startswith("    "):
            record = line.split()[0]
        elif line.startswith("    ") and "max=" in line:
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            stats[(record, line.split()[0])] = tuple(
                float(fields[k]) for k in ("max", "min", "mean", "norm"))
    return stats


def h5_stats(path):
    """The same figures worked out here from the tensors' data, read with h5py."""
    stats = {}
    with h5py.File(path, "r") as f:
        for record, g in f.items():
            if record == "index":
                continue
            for role, d in g.items():
                x = np.asarray(d[()], dtype=np.float64).ravel()
                stats[(record, role)] = (x.max(), x.min(), x.mean(), np.sqrt((x * x).sum()))
    return stats


class StarvedOfCpu(unittest.TestCase):
    """msprobe and its reader helpers pinned, at the lowest priority (nice
    19), to one core that busy loops keep busy: the helper gets a few tenths
    of a per cent of that core, so the wall clock runs hundreds of times
    faster than its work. Its limit of work (1 s) is far above the few
    milliseconds a healthy file costs, so the file is read; a wall-clock
    limit of 1 s (today's main until issue 42) called it corrupt."""

    LIMIT = "1"

    @classmethod
    def setUpClass(cls):
        cls.core = min(os.sched_getaffinity(0))
        # under ASan a helper does some ten times the work: fewer hogs keep
        # its wall time within the backstop (60 s) all the same
        n = 1 if SANITIZED else 3
        hog = "import os\nos.sched_setaffinity(0, {%d})\nwhile True:\n    pass\n" % cls.core
        cls.hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(n)]
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        for h in cls.hogs:
            h.kill()
            h.wait()
        cls.tmp.cleanup()

    def starved(self, *args, **env):
        """msprobe ARGS on the busy core at nice 19: (process, wall s, CPU s)."""
        core = self.core

        def low():
            os.sched_setaffinity(0, {core})
            os.nice(19)
        e = dict(os.environ, MSPROBE_READER_TIMEOUT=self.LIMIT, **env)
        before, t0 = children_cpu(), time.monotonic()
        p = subprocess.run([BIN, *args], capture_output=True, text=True, env=e, timeout=600,
                           preexec_fn=low)
        return p, time.monotonic() - t0, children_cpu() - before

    def test_a_healthy_dump_is_read_by_a_helper_starved_of_cpu(self):
        path = os.path.join(FIX, "bench", "step0", "rank0", "dump.h5")
        want = h5_stats(path)
        self.assertEqual(len(want), 30)
        for server in ("1", "0"):
            with self.subTest(server=server):
                p, wall, _ = self.starved("ls", path, MSPROBE_READER_SERVER=server)
                # starved indeed: far more wall clock than the limit of work
                self.assertGreater(wall, float(self.LIMIT), "the core was not busy")
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertNotIn("corrupt", p.stderr)
                got = ls_stats(p.stdout)
                self.assertEqual(sorted(got), sorted(want))
                for key, figures in want.items():
                    for g, w in zip(got[key], figures):  # ls prints 6 significant digits
                        self.assertAlmostEqual(g, w, delta=1e-5 * max(1.0, abs(w)), msg=key)

    def test_a_mutated_dump_is_still_refused_for_what_is_wrong_with_it(self):
        src = os.path.join(FIX, "bench", "step0", "rank0", "dump.h5")
        with open(src, "rb") as f:
            data = f.read()
        # the object header of the root group, and of a dataset deep in the
        # file: a signature spoilt each
        first, deep = data.find(b"OHDR"), data.find(b"OHDR", 24000)
        self.assertGreater(deep, first)
        for at in (first, deep):
            path = os.path.join(self.tmp.name, "ohdr-%d.h5" % at)
            with open(path, "wb") as f:
                f.write(data[:at] + b"XXXX" + data[at + 4:])
            with self.subTest(at=at):
                p, _, work = self.starved("ls", path, MSPROBE_READER_SERVER="0")
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(path, p.stderr)
                self.assertIn("HDF5: bad object header", p.stderr)
                self.assertNotIn("timed out", p.stderr)
                self.assertNotIn("wall-clock", p.stderr)
                # refused at once: msprobe's and its helper's work together,
                # well below the helper's limit of 1 s alone
                self.assertLess(work, 0.9 if not SANITIZED else 5.0, p.stderr)


class Limits(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.hang = hanging_dump(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_hung_parse_of_a_small_file_is_refused_after_the_short_floor(self):
        # a helper of its own (no server), reaped by msprobe: its CPU time is
        # counted in msprobe's, and so in this process's children's
        env = {k: v for k, v in os.environ.items() if k != "MSPROBE_READER_TIMEOUT"}
        env["MSPROBE_READER_SERVER"] = "0"
        before = children_cpu()
        p = subprocess.run([BIN, "ls", self.hang], capture_output=True, text=True, env=env,
                           timeout=600)
        work = children_cpu() - before
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(self.hang, p.stderr)
        # the floor: the file is 92 KiB; a limit reached is no verdict on the file
        self.assertIn("timed out after 10 s of work", p.stderr)
        self.assertIn("MSPROBE_READER_TIMEOUT", p.stderr)
        self.assertNotIn("corrupt", p.stderr)
        # the endless parse costs its 10 s of work, however long the wall
        # clock a loaded machine makes of them (was 60 s for every file)
        self.assertGreaterEqual(work, 10.0, p.stderr)
        self.assertLess(work, 15.0, p.stderr)

    def test_an_endless_parse_is_ended_at_the_limit_set_for_it(self):
        for server in ("1", "0"):
            with self.subTest(server=server):
                env = dict(os.environ, MSPROBE_READER_TIMEOUT="1.5",
                           MSPROBE_READER_SERVER=server)
                p = subprocess.run([BIN, "ls", self.hang], capture_output=True, text=True,
                                   env=env, timeout=600)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("%s: timed out after 1.5 s of work" % self.hang, p.stderr)
                self.assertIn("the limit MSPROBE_READER_TIMEOUT sets", p.stderr)
                self.assertNotIn("corrupt", p.stderr)

    def test_a_server_forks_from_one_thread(self):
        # A server forks a child per file: a second thread (the old caller
        # watch) could hold a lock at the fork that the child then waits on
        # forever; under AddressSanitizer that was its allocator's, one
        # catalogue in ~30 hung until the time limit.
        a, b = socket.socketpair()
        p = subprocess.Popen([REAL, "--serve"], stdin=b, stdout=b, stderr=subprocess.DEVNULL)
        b.close()
        try:
            time.sleep(0.5)  # past its start, where the watch began
            with open("/proc/%d/status" % p.pid) as f:
                threads = [ln.split()[1] for ln in f if ln.startswith("Threads:")]
            self.assertEqual(threads, ["1"])
        finally:
            a.close()  # the caller gone: the server ends
            self.assertEqual(p.wait(timeout=30), 0)

    def test_helpers_die_with_a_killed_caller_whatever_the_time_limit(self):
        for limit in ("inf", "1e300"):
            for server in ("1", "0"):
                with self.subTest(limit=limit, server=server):
                    tag = "MSP_FAULT_TAG=" + uuid.uuid4().hex
                    env = dict(os.environ, MSPROBE_READER_TIMEOUT=limit,
                               MSPROBE_READER_SERVER=server)
                    env[tag.split("=")[0]] = tag.split("=")[1]
                    p = subprocess.Popen([BIN, "ls", self.hang], env=env,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    # wait for the parse to be under way in a helper
                    deadline = time.monotonic() + 20
                    while time.monotonic() < deadline and len(tagged_pids(tag)) < 2:
                        time.sleep(0.05)
                    time.sleep(0.3)
                    self.assertGreaterEqual(len(tagged_pids(tag)), 2, "no helper started")
                    p.kill()
                    p.wait()
                    deadline = time.monotonic() + 60  # a helper left alive would live forever (inf)
                    while time.monotonic() < deadline and tagged_pids(tag):
                        time.sleep(0.05)
                    left = tagged_pids(tag)
                    for pid in left:  # never leave them running
                        os.kill(pid, signal.SIGKILL)
                    self.assertEqual(left, [], "helpers outlived their caller")


if __name__ == "__main__":
    unittest.main()
