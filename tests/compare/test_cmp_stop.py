"""A compare stopped from outside ends saying so (msprobe-compare(1), EXIT
STATUS and MPI), alone and under mpirun:

- SIGTERM or SIGINT: one line on stderr naming the signal (and, under MPI,
  the process) and what became of the report, no temp file of a report left
  behind, and the process ends by that signal (128+N to a shell);
- under mpirun, a process stopped with SIGSTOP: a process that waits for it
  names it within --mpi-timeout and the launch ends with status 4 instead of
  hanging forever.

Every signal is sent at a known point, found from outside: the compare has
started reading (a msprobe-catalogue child of its own, so it is past its
option parsing and, under MPI, past MPI_Init), or a report's temp file has
just been created (inotify on the report directory). The process is held
with SIGSTOP while the signal is queued, so nothing depends on how fast this
machine is."""
import ctypes
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
from msp_proc import alive, children

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cmp_h5 as H  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
MPIRUN = os.environ.get("MSPROBE_MPIRUN", "")
MPI_ENV = dict(os.environ, OMPI_MCA_btl="self,tcp", OMPI_MCA_btl_tcp_if_include="lo",
               OMPI_MCA_oob_tcp_if_include="lo", OMP_NUM_THREADS="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def make_tree(root, seed, ranks=2, steps=2, records=150, numel=20000):
    """root/step{S}/rank{R}/dump.h5: records relu-like records per file."""
    g = np.random.default_rng(7)
    noise = np.random.default_rng(seed)
    for s in range(steps):
        for r in range(ranks):
            recs = []
            for i in range(records):
                x = g.standard_normal(numel).astype(np.float32)
                y = np.maximum(x, 0) + (noise.standard_normal(numel).astype(np.float32) * 1e-3
                                        if seed else 0)
                recs.append(("Functional.relu.%d.forward" % i, {"input.0": x, "output.0": y}))
            H.write_dump(os.path.join(root, "step%d" % s, "rank%d" % r, "dump.h5"), recs,
                         step=s, rank=r, index=True)
    return root


# --mpi-timeout of the launches with a stopped process: short, for a quick
# test, yet long enough that a process merely starved of CPU on a busy
# machine (its sign-of-life thread beats every eighth of it) is not taken
# for the stopped one.
SILENCE = 10


def wait_for_child(pid, timeout=120):
    """Waits until process pid has a child of its own (its first
    msprobe-catalogue: it is reading the dumps)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if children(pid):
            return
        time.sleep(0.002)
    raise AssertionError("process %d started no reader in %d s" % (pid, timeout))


def mpi_rank(pid):
    with open("/proc/%d/environ" % pid, "rb") as f:
        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    return int(env[b"OMPI_COMM_WORLD_RANK"])


def mpi_processes(mpirun_pid, n, timeout=120):
    """{rank: pid} of the n msprobe processes mpirun started."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pids = children(mpirun_pid)
        try:
            ranks = {mpi_rank(p): p for p in pids}
        except (OSError, KeyError):
            ranks = {}
        if len(ranks) == n:
            return ranks
        time.sleep(0.01)
    raise AssertionError("mpirun did not start %d processes" % n)


class Inotify:
    """Files created in one directory, as they are created (inotify(7))."""
    IN_CREATE = 0x100

    def __init__(self, path):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init()
        if self.fd < 0 or self.libc.inotify_add_watch(self.fd, path.encode(), self.IN_CREATE) < 0:
            raise OSError(ctypes.get_errno(), "inotify")

    def names(self, timeout=120):
        """The names created from now on, as they come (for up to timeout s)."""
        end = time.monotonic() + timeout
        while select.select([self.fd], [], [], max(0.0, end - time.monotonic()))[0]:
            buf = os.read(self.fd, 65536)
            at = 0
            while at < len(buf):
                _, _, _, ln = struct.unpack_from("iIII", buf, at)
                yield buf[at + 16:at + 16 + ln].rstrip(b"\0").decode()
                at += 16 + ln

    def close(self):
        os.close(self.fd)


def setUpModule():
    global WORK, BENCH, CMP
    WORK = tempfile.mkdtemp(prefix="msp-cmp-stop-")
    BENCH = make_tree(os.path.join(WORK, "bench"), 0)
    CMP = make_tree(os.path.join(WORK, "cmp"), 1)


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


def report_files(out):
    return sorted(os.listdir(out)) if os.path.isdir(out) else []


class PlainCompareStopped(unittest.TestCase):
    def start(self, out, *extra):
        return subprocess.Popen([BIN, "compare", "-b", BENCH, "-c", CMP, "-o", out,
                                 "--replay", "off", *extra],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def test_sigterm_while_comparing_is_one_line_and_the_signal_status(self):
        out = os.path.join(WORK, "plain-term")
        p = self.start(out)
        wait_for_child(p.pid)
        readers = children(p.pid)
        os.kill(p.pid, signal.SIGSTOP)
        os.kill(p.pid, signal.SIGTERM)
        os.kill(p.pid, signal.SIGCONT)
        _, err = p.communicate(timeout=120)
        # ended by the signal itself: a shell's $? is 128+15
        self.assertEqual(p.returncode, -signal.SIGTERM, err)
        self.assertEqual(err, "msprobe: compare: stopped by SIGTERM (signal 15): no report "
                              "written\n")
        self.assertEqual(report_files(out), [])
        # its reader helpers die with it
        end = time.monotonic() + 30
        while any(alive(c) for c in readers) and time.monotonic() < end:
            time.sleep(0.05)
        self.assertEqual([c for c in readers if alive(c)], [])

    def test_sigint_while_writing_the_report_leaves_no_temp_file(self):
        out = os.path.join(WORK, "plain-int")
        os.makedirs(out)
        watch = Inotify(out)
        try:
            p = self.start(out, "--csv")
            caught = None
            # result.csv, result.xlsx, result.html: one caught before its
            # rename is enough
            for tmp in (n for n in watch.names() if ".tmp." in n):
                os.kill(p.pid, signal.SIGSTOP)
                if os.path.exists(os.path.join(out, tmp)):
                    caught = tmp
                    break
                os.kill(p.pid, signal.SIGCONT)
        finally:
            watch.close()
        self.assertIsNotNone(caught, "every report was renamed before it could be stopped")
        os.kill(p.pid, signal.SIGINT)
        os.kill(p.pid, signal.SIGCONT)
        _, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, -signal.SIGINT, err)
        self.assertEqual(err, "msprobe: compare: stopped by SIGINT (signal 2): the report in %s "
                              "is incomplete (the file being written was removed)\n" % out)
        left = report_files(out)
        self.assertEqual([n for n in left if ".tmp." in n], [], left)
        self.assertNotIn(caught.split(".tmp.")[0].lstrip("."), left)

    def test_an_ignored_sighup_stays_ignored(self):
        # nohup's promise: the compare runs on and writes its report
        out = os.path.join(WORK, "plain-nohup")
        p = subprocess.Popen(["nohup", BIN, "compare", "-b", BENCH, "-c", CMP, "-o", out,
                              "--replay", "off"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        wait_for_child(p.pid)
        os.kill(p.pid, signal.SIGHUP)
        _, err = p.communicate(timeout=300)
        self.assertIn(p.returncode, (0, 1), err)
        self.assertNotIn("stopped by", err)
        self.assertIn("result.xlsx", report_files(out))


@unittest.skipUnless(MPIRUN and os.access(MPIRUN, os.X_OK),
                     "msprobe was built without MPI (CMake found no MPI) or mpirun is missing")
class MPICompareStopped(unittest.TestCase):
    def mpirun(self, n, out, *extra):
        cmd = [MPIRUN, "--oversubscribe", "-np", str(n), BIN, "compare", "-b", BENCH, "-c", CMP,
               "-o", out, "--replay", "off", *extra]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=MPI_ENV)

    def test_sigterm_to_one_process_ends_each_with_its_line(self):
        out = os.path.join(WORK, "mpi-term")
        p = self.mpirun(2, out)
        procs = mpi_processes(p.pid, 2)
        wait_for_child(procs[1])
        os.kill(procs[1], signal.SIGSTOP)
        os.kill(procs[1], signal.SIGTERM)
        os.kill(procs[1], signal.SIGCONT)
        _, err = p.communicate(timeout=300)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        lines = [l for l in err.splitlines() if l.startswith("msprobe:")]
        # process 1 by the kill, process 0 by mpirun's SIGTERM that follows
        self.assertEqual(sorted(lines), [
            "msprobe: compare: stopped by SIGTERM (signal 15) on process 0 of 2: no report "
            "written",
            "msprobe: compare: stopped by SIGTERM (signal 15) on process 1 of 2: no report "
            "written (process 0 writes it)"], err)
        self.assertEqual(report_files(out), [])

    def stopped(self, n, which, timeout=SILENCE):
        out = os.path.join(WORK, "mpi-stop-%d-%d" % (n, which))
        p = self.mpirun(n, out, "--mpi-timeout", str(timeout))
        procs = mpi_processes(p.pid, n)
        wait_for_child(procs[which])
        os.kill(procs[which], signal.SIGSTOP)
        try:
            # forever, before --mpi-timeout: the bound here only keeps a
            # regression from hanging the suite
            _, err = p.communicate(timeout=timeout + 120)
        except subprocess.TimeoutExpired:
            os.kill(procs[which], signal.SIGKILL)
            p.kill()
            p.communicate()
            self.fail("the launch with process %d stopped did not end" % which)
        self.assertEqual(p.returncode, 4, err)
        self.assertEqual(report_files(out), [])
        # mpirun's MPI_Abort took the stopped process down too
        end = time.monotonic() + 30
        while alive(procs[which]) and time.monotonic() < end:
            time.sleep(0.05)
        self.assertFalse(alive(procs[which]))
        return err

    def named(self, err, silent, n, finder):
        """The line of the process that found the silence itself."""
        want = "msprobe: MPI: process %d of %d sent no sign of life for " % (silent, n)
        lines = [l for l in err.splitlines() if l.startswith(want) and
                 "(--mpi-timeout %d) while process %d was " % (SILENCE, finder) in l]
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].endswith("it is stopped (SIGSTOP, a debugger), hung or cut "
                                          "off; ending the launch"), lines[0])

    def test_a_stopped_process_is_named_by_process_0(self):
        self.named(self.stopped(2, 1), 1, 2, 0)

    def test_a_stopped_process_0_is_named_by_the_other(self):
        self.named(self.stopped(2, 0), 0, 2, 1)

    def test_process_0_tells_the_others_which_process_fell_silent(self):
        err = self.stopped(3, 1)
        self.named(err, 1, 3, 0)
        # process 2 heard it from process 0: in its own line, or in the line
        # of the SIGTERM mpirun stops it with
        own = "msprobe: MPI: process 1 of 3 sent no sign of life for "
        relayed = [l for l in err.splitlines()
                   if (l.startswith(own) and "as process 0 found, while process 2 was" in l) or
                   (l.startswith("msprobe: compare: stopped by SIGTERM (signal 15) on process 2 "
                                 "of 3, after process 0 found process 1 silent for "))]
        # both lines when the SIGTERM comes after its own line: either says it
        self.assertGreaterEqual(len(relayed), 1, err)
        # and no process but 0 claims to have found the silence itself
        self.assertFalse([l for l in err.splitlines() if l.startswith(own) and
                          "(--mpi-timeout %d) while process 2 was" % SILENCE in l], err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
