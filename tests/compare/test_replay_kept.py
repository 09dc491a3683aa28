"""The kept replay worker: torch is imported once for a run of compares.

A replay worker stays MSPROBE_REPLAY_KEEP seconds after its last session and
serves the compares that follow (msprobe-compare(1), REPLAY): the second
compare of a pair must be a session of the first one's worker (same process,
from /proc), a compare whose torch-related environment differs must get a
worker of its own, the worker must leave when its time is up, and a socket
directory that others may enter must never be used. Every compare must still
name the planted op: F.gelu with approximate="tanh" on the compare side only,
its error computed here in float64."""
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

import numpy as np
import openpyxl

from msp_h5dump import write_dump
from msp_proc import alive, children, descendants
from msp_ref import gelu

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


KEPT = re.compile(r"replay: kept worker (\d+)(?: started)?, session (\d+)")


class KeptWorker(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-kept-")
        self.tmp = os.path.join(self.work, "tmp")
        os.makedirs(self.tmp)
        # long enough for the whole case on a loaded machine or under ASan; tearDown
        # ends the workers it saw
        self.env = dict(os.environ, TMPDIR=self.tmp, MSPROBE_REPLAY_KEEP="300")
        self.env.pop("XDG_RUNTIME_DIR", None)
        self.pids = set()
        x = np.random.default_rng(3).standard_normal((8, 32)).astype(np.float32)
        self.x = x
        for side in ("gpu", "npu"):
            out = gelu(x, tanh=(side == "npu")).astype(np.float32)
            write_dump(os.path.join(self.work, side, "step0", "rank0", "dump.h5"),
                       [("Functional.gelu.0.forward", 0, {"input.0": x, "output.0": out})])

    def tearDown(self):
        for pid in self.pids:  # leave no worker behind a failing test
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        shutil.rmtree(self.work, ignore_errors=True)

    def compare(self, env=None):
        out = os.path.join(self.work, "out")
        shutil.rmtree(out, ignore_errors=True)
        p = subprocess.run([BIN, "-v", "compare", "-b", "gpu", "-c", "npu", "-o", out],
                           capture_output=True, text=True, timeout=300, env=env or self.env,
                           cwd=self.work)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        # the planted op, judged by replay
        e = np.linalg.norm(gelu(self.x, True) - gelu(self.x)) / np.linalg.norm(gelu(self.x))
        self.assertGreater(e, 1e-4)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = list(wb["summary"].iter_rows(values_only=True))
        row = dict(zip(rows[0], [r for r in rows[1:] if r[rows[0].index("Name")] ==
                                 "Functional.gelu.0.forward"][0]))
        self.assertTrue((row["Replay"] or "").startswith("introduced"), row)
        m = KEPT.search(p.stderr)
        if m:
            self.pids.add(int(m.group(1)))
        return p, (int(m.group(1)), int(m.group(2))) if m else None

    def test_the_next_compare_is_a_session_of_the_same_worker_until_its_time_is_up(self):
        p1, (pid1, s1) = self.compare()
        self.assertEqual(s1, 1, p1.stderr)
        self.assertIn("started", p1.stderr)
        self.assertTrue(alive(pid1))  # the compare is over, its worker stays
        p2, (pid2, s2) = self.compare()
        self.assertEqual((pid2, s2), (pid1, 2), p2.stderr)
        self.assertNotIn("started", p2.stderr)
        # the socket and its directory: this user's alone
        d = os.path.join(self.tmp, "msprobe-%d" % os.geteuid())
        st = os.stat(d)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (os.geteuid(), 0o700))
        # another torch environment is another worker
        other = dict(self.env, OMP_NUM_THREADS="1")
        p3, (pid3, s3) = self.compare(other)
        self.assertNotEqual(pid3, pid1)
        self.assertEqual(s3, 1, p3.stderr)
        # a short keep: the worker leaves that long after its last session
        short = dict(self.env, MSPROBE_REPLAY_KEEP="1")
        p4, (pid4, _) = self.compare(short)
        self.assertNotIn(pid4, (pid1, pid3))
        # (a generous wait for a loaded machine: a worker that ignored its
        # keep would stay the 300 s of the others)
        t0 = time.monotonic()
        while alive(pid4) and time.monotonic() - t0 < 90:
            time.sleep(0.2)
        self.assertFalse(alive(pid4))
        # the worker of the first two, still within its 300 s, still serves
        p5, (pid5, s5) = self.compare()
        self.assertEqual((pid5, s5), (pid1, 3), p5.stderr)

    def test_a_session_asked_for_ahead_and_not_needed_ends_with_its_compare(self):
        # a compare asks the kept worker for its session before it computes
        # metrics; one with nothing to replay (a dump against itself) ends it
        # unused, and leaves neither a process nor a session directory
        _, (pid1, s1) = self.compare()
        self.assertEqual(s1, 1)
        p = subprocess.run([BIN, "-v", "compare", "-b", "gpu", "-c", "gpu", "-o", "same"],
                           capture_output=True, text=True, timeout=300, env=self.env,
                           cwd=self.work)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("no introduced error", p.stdout)
        self.assertIsNone(KEPT.search(p.stderr), p.stderr)  # it replayed nothing
        kept = os.path.join(self.tmp, "msprobe-%d" % os.geteuid())
        dirs = [d for d in os.listdir(kept) if d.endswith(".d")]
        self.assertEqual(len(dirs), 1, dirs)
        self.assertEqual(os.listdir(os.path.join(kept, dirs[0])), [])
        self.assertTrue(alive(pid1))
        # the session's process leaves once it has cleaned up: what stays is
        # the spare forked ahead for the next compare, which has no directory
        spare = self.wait_for_spare(pid1, kept, dirs[0])
        self.assertEqual(len(spare), 2, spare)
        # the next compare is the worker's third session: the second was that one
        _, (pid3, s3) = self.compare()
        self.assertEqual((pid3, s3), (pid1, 3))

    def wait_for_spare(self, pid, kept, d):
        """[the spare session, its job child] once they are all the worker
        has (both named msprobe-spare: /proc/PID/comm) and no session
        directory is left (a generous wait for a loaded machine), else what
        there is."""
        t0 = time.monotonic()
        while True:
            tree = descendants(pid)
            kids = children(pid)
            if (len(tree) == 2 and len(kids) == 1 and
                    [comm(p) for p in tree] == ["msprobe-spare"] * 2 and
                    not os.listdir(os.path.join(kept, d))):
                return kids + children(kids[0])
            if time.monotonic() - t0 > 90:
                return tree
            time.sleep(0.05)

    def test_the_next_compare_is_served_by_a_session_forked_ahead(self):
        # an idle kept worker holds one session, with its first job child,
        # forked before any compare asks: the next compare's session is that
        # process (its pid in the -v line), its job child replays the planted
        # op (compare() checks the verdict), and both leave with the session,
        # a new spare taking their place; the spare is not a session (no
        # directory) and does not keep the worker past its time
        _, (pid1, _) = self.compare()
        kept = os.path.join(self.tmp, "msprobe-%d" % os.geteuid())
        d = [x for x in os.listdir(kept) if x.endswith(".d")][0]
        first = self.wait_for_spare(pid1, kept, d)
        self.assertEqual(len(first), 2, first)
        p2, (pid2, s2) = self.compare()
        self.assertEqual((pid2, s2), (pid1, 2), p2.stderr)
        self.assertIn("session 2 (process %d)" % first[0], p2.stderr)
        # the session cleaned up before its compare ended; it and its job
        # child leave a moment later
        t0 = time.monotonic()
        while any(alive(p) for p in first) and time.monotonic() - t0 < 90:
            time.sleep(0.05)
        self.assertFalse(any(alive(p) for p in first), first)
        second = self.wait_for_spare(pid1, kept, d)
        self.assertEqual(len(second), 2, second)
        self.assertFalse(set(first) & set(second), (first, second))
        # a short keep: a worker whose only child is its spare still leaves
        short = dict(self.env, MSPROBE_REPLAY_KEEP="2")
        _, (pid4, _) = self.compare(short)
        self.assertNotEqual(pid4, pid1)
        t0 = time.monotonic()
        while alive(pid4) and time.monotonic() - t0 < 90:
            time.sleep(0.2)
        self.assertFalse(alive(pid4))

    def test_compares_that_start_together_share_one_worker(self):
        # none is kept yet: each finds no worker, and one of them starts it;
        # the others must become its sessions, never start a second worker
        # (one that unlinked the first's socket would leave it unreachable)
        procs = []
        for i in range(5):
            procs.append(subprocess.Popen(
                [BIN, "-v", "compare", "-b", "gpu", "-c", "npu", "-o", "out%d" % i],
                cwd=self.work, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True))
        pids, sessions = set(), []
        for p in procs:
            out, err = p.communicate(timeout=300)
            self.assertIn(p.returncode, (0, 1), out + err)
            m = KEPT.search(err)
            self.assertIsNotNone(m, err)
            self.pids.add(int(m.group(1)))
            pids.add(int(m.group(1)))
            sessions.append(int(m.group(2)))
        self.assertEqual(len(pids), 1, pids)
        self.assertEqual(sorted(sessions), [1, 2, 3, 4, 5])

    def test_keep_zero_leaves_no_process_and_no_socket(self):
        env = dict(self.env, MSPROBE_REPLAY_KEEP="0")
        proc = subprocess.Popen([BIN, "-v", "compare", "-b", "gpu", "-c", "npu", "-o", "out"],
                                cwd=self.work, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        seen = set()
        while proc.poll() is None:
            seen |= set(descendants(proc.pid))
            time.sleep(0.05)
        out, err = proc.communicate()
        self.assertIn(proc.returncode, (0, 1), out + err)
        self.assertTrue(seen, "compare started no worker")
        # what compare killed (a worker slow to leave on a loaded machine, and
        # its job child) is gone a moment later, never left running
        t0 = time.monotonic()
        while [p for p in seen if alive(p)] and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        self.assertEqual([p for p in seen if alive(p)], [])
        self.assertIsNone(KEPT.search(err), err)
        self.assertEqual(os.listdir(self.tmp), [])

    def test_a_socket_directory_others_may_enter_is_not_used(self):
        d = os.path.join(self.tmp, "msprobe-%d" % os.geteuid())
        os.makedirs(d)
        os.chmod(d, 0o777)
        p, kept = self.compare()
        self.assertIsNone(kept, p.stderr)
        self.assertIn("not a private one", p.stderr)
        self.assertEqual(os.listdir(d), [])


    def test_a_statistics_compare_starts_no_worker(self):
        """A statistics dump holds no tensor to call an API on: replay decides
        each candidate without a worker and starts none (a cold one imports
        torch, seconds on a tree that needs nothing of it). With no Python to
        start, the compare must not even try: no warning, and the suspect's
        Replay cell says why it was not replayed. The planted op: gelu with
        approximate="tanh", its statistics from numpy."""
        x = self.x
        for side in ("sgpu", "snpu"):
            out = gelu(x, tanh=(side == "snpu")).astype(np.float32)
            write_dump(os.path.join(self.work, side, "step0", "rank0", "dump.h5"),
                       [("Functional.gelu.0.forward", 0, {"input.0": x, "output.0": out})],
                       task="statistics", stats_only=True)
        env = dict(self.env, MSPROBE_PYTHON=os.path.join(self.work, "no-such-python"))
        out = os.path.join(self.work, "sout")
        p = subprocess.run([BIN, "-v", "compare", "-b", "sgpu", "-c", "snpu", "-o", out],
                           capture_output=True, text=True, timeout=300, env=env, cwd=self.work)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        self.assertNotIn("no-such-python", p.stdout + p.stderr)
        self.assertNotIn("error ratios alone", p.stdout + p.stderr)
        self.assertIsNone(KEPT.search(p.stderr), p.stderr)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = list(wb["summary"].iter_rows(values_only=True))
        head = rows[0]
        row = [dict(zip(head, r)) for r in rows[1:] if r[head.index("Name")] ==
               "Functional.gelu.0.forward"][0]
        # the output's max differs by more than bf16's floor: a candidate
        self.assertGreater(abs(float(gelu(x, True).max()) - float(gelu(x).max())), 1e-4)
        self.assertEqual(row["Replay"],
                         "not replayable: the compare side holds statistics only for it")
        # decided as the pair was compared: nothing waits for a replay phase
        self.assertIn("compare: 1 of 1 pairs finished as compared, 0 spooled for replay "
                      "(replay's candidates: 0 for the worker, 1 decided without it)", p.stderr)

    def test_pairs_before_the_first_candidate_are_finished_as_compared(self):
        """A pair with nothing for the worker, before the first that has a
        candidate, is finished as it is compared; that pair and the ones
        after it wait for replay. Step 0: gelu alike on both sides (its error
        is rounding alone, no candidate); step 1: the planted tanh gelu. The
        report lists both steps in order and step 1's record is judged by
        replay, step 0's is not."""
        x = self.x
        for side in ("tgpu", "tnpu"):
            for step, tanh in ((0, False), (1, side == "tnpu")):
                write_dump(os.path.join(self.work, side, "step%d" % step, "rank0", "dump.h5"),
                           [("Functional.gelu.0.forward", 0,
                             {"input.0": x, "output.0": gelu(x, tanh=tanh).astype(np.float32)})],
                           step=step)
        out = os.path.join(self.work, "tout")
        p = subprocess.run([BIN, "-v", "compare", "-b", "tgpu", "-c", "tnpu", "-o", out],
                           capture_output=True, text=True, timeout=300, env=self.env,
                           cwd=self.work)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        m = KEPT.search(p.stderr)
        if m:
            self.pids.add(int(m.group(1)))
        self.assertIn("compare: 1 of 2 pairs finished as compared, 1 spooled for replay "
                      "(replay's candidates: 1 for the worker, 0 decided without it)", p.stderr)
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = list(wb["summary"].iter_rows(values_only=True))
        head = rows[0]
        got = [(r[head.index("Step")], r[head.index("Name")], r[head.index("Replay")])
               for r in rows[1:]]
        self.assertEqual([g[:2] for g in got], [(0, "Functional.gelu.0.forward"),
                                               (1, "Functional.gelu.0.forward")], got)
        self.assertFalse(got[0][2], got)
        self.assertTrue(got[1][2].startswith("introduced"), got)


if __name__ == "__main__":
    unittest.main()
