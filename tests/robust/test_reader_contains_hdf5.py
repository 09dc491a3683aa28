"""Readers never crash or hang on hostile files: libhdf5's metadata parsing is
contained (a crash becomes exit 2 with an "msprobe:" message naming the
file), special files are refused, and a fixed-seed mutation campaign over
the committed dumps gives zero signals and zero timeouts."""
import concurrent.futures
import os
import random
import shutil
import subprocess
import tempfile
import unittest

MSPROBE = os.environ.get("MSPROBE_BIN")
SRC = os.environ.get("MSPROBE_SOURCE_DIR", ".")
NPU = os.path.join(SRC, "fixtures", "npu", "step1", "rank0", "dump.h5")
BENCH = os.path.join(SRC, "fixtures", "bench", "step1", "rank0", "dump.h5")
MUTANTS = int(os.environ.get("MSPROBE_MUTANTS", "2600"))
LIMIT = 40  # seconds per command; the reader gives its metadata child 10 s


def run(args, timeout=LIMIT):
    try:
        p = subprocess.run([MSPROBE, *args], capture_output=True, text=True,
                           errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return p


class ReaderContainsHdf5(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def check_clean_failure(self, p, path):
        self.assertIsNotNone(p, "timed out")
        self.assertGreaterEqual(p.returncode, 0, "killed by signal %d" % -p.returncode)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertTrue(p.stderr.startswith("msprobe: "), p.stderr)
        self.assertIn(path, p.stderr)

    def test_issue_reproducer_is_exit_2_naming_the_file(self):
        # the byte from issue 10 that made libhdf5 1.10 segfault in ls
        c = os.path.join(self.tmp, "c.h5")
        shutil.copy(NPU, c)
        with open(c, "r+b") as f:
            f.seek(68942)
            f.write(b"\x02")
        p = run(["ls", c])
        self.check_clean_failure(p, c)
        self.assertIn("corrupt or not a dump", p.stderr)
        out = os.path.join(self.tmp, "out")
        p = run(["compare", "-b", BENCH, "-c", c, "-o", out])
        self.check_clean_failure(p, c)

    def test_fifo_named_dump_h5_is_refused_not_read(self):
        fifo = os.path.join(self.tmp, "dump.h5")
        os.mkfifo(fifo)
        p = run(["ls", fifo], timeout=10)
        self.check_clean_failure(p, fifo)
        self.assertIn("not a regular file", p.stderr)

    def test_mutation_campaign_ls_no_signal_no_timeout(self):
        self.campaign(with_compare=False)

    def campaign(self, with_compare):
        rng = random.Random(20261123)
        seeds = [open(NPU, "rb").read(), open(BENCH, "rb").read()]
        jobs = []
        for i in range(MUTANTS):
            which = i % 2
            data = bytearray(seeds[which])
            for _ in range(rng.choice((1, 1, 2, 4, 8))):
                pos = rng.randrange(len(data))
                kind = rng.randrange(3)
                if kind == 0:
                    data[pos] ^= 1 << rng.randrange(8)
                elif kind == 1:
                    data[pos] = rng.choice((0, 0xff, 0x7f, 0x80, 1, 2))
                else:
                    data[pos] = rng.randrange(256)
            path = os.path.join(self.tmp, "m%05d.h5" % i)
            with open(path, "wb") as f:
                f.write(data)
            # ls on every mutant; compare (against the other clean side) on every 4th
            if not with_compare:
                jobs.append((["ls", path], path))
            elif i % 4 == 0:
                other = BENCH if which == 0 else NPU
                jobs.append((["compare", "-b", other, "-c", path, "-o",
                              os.path.join(self.tmp, "o%05d" % i)], path))
        bad = []

        def one(job):
            args, path = job
            p = run(args)
            if p is None:
                return "%s: timeout" % " ".join(args)
            if p.returncode < 0:
                return "%s: signal %d" % (" ".join(args), -p.returncode)
            if p.returncode not in (0, 1, 2):
                return "%s: exit %d" % (" ".join(args), p.returncode)
            if p.returncode == 2 and not p.stderr.startswith("msprobe: "):
                return "%s: exit 2 without an msprobe: message: %r" % (" ".join(args),
                                                                     p.stderr[:200])
            return None

        with concurrent.futures.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as ex:
            for r in ex.map(one, jobs):
                if r:
                    bad.append(r)
        print("mutants: %d, commands: %d, failures: %d" % (MUTANTS, len(jobs), len(bad)))
        self.assertEqual(bad, [], "\n".join(bad[:20]))


if __name__ == "__main__":
    unittest.main()
