"""The mutation campaign (issue 10, item 7): byte-level mutants of the
committed dumps, a fixed seed, through `msprobe ls` and `msprobe compare`,
each run under a timeout. Zero signals, zero timeouts; every file that
cannot be read is reported by name, and a run on a single file that fails
exits 2. MSP_MUTANTS sets the count (default 5000)."""
import concurrent.futures
import glob
import os
import random
import subprocess
import tempfile
import unittest

BIN = os.environ["MSPROBE_BIN"]
SRC = os.environ["MSPROBE_SOURCE_DIR"]
N = int(os.environ.get("MSP_MUTANTS", "5000"))
PER_ROOT = 125
SEED = 20261123
# A parse of these files takes milliseconds and a few MiB: tighter limits
# than a user's (60 s, 4 GiB) keep memory bombs and endless loops cheap.
ENV = dict(os.environ, MSPROBE_READER_TIMEOUT="3", MSPROBE_READER_MEMORY_MB="768")


def mutate(rng, data):
    b = bytearray(data)
    kind = rng.randrange(6)
    # the metadata lives mostly in the first 64 KiB and at the end (/index)
    def pos():
        if rng.random() < 0.7:
            return rng.randrange(min(len(b), 65536))
        return rng.randrange(len(b))
    if kind == 0:  # flip a few bits
        for _ in range(rng.randint(1, 8)):
            b[pos()] ^= 1 << rng.randrange(8)
    elif kind == 1:  # random bytes
        for _ in range(rng.randint(1, 16)):
            b[pos()] = rng.randrange(256)
    elif kind == 2:  # truncated
        del b[rng.randrange(len(b)):]
    elif kind == 3:  # a zeroed block
        p = pos()
        b[p:p + rng.randint(1, 512)] = bytes(min(len(b) - p, rng.randint(1, 512)))
    elif kind == 4:  # a block copied over another
        p, q, n = pos(), pos(), rng.randint(8, 256)
        chunk = b[q:q + n]
        b[p:p + len(chunk)] = chunk
    else:  # an 8-byte field set to a large value (sizes, addresses, counts)
        p = pos()
        b[p:p + 8] = rng.choice([b"\xff" * 8, (1 << 31).to_bytes(8, "little"),
                                 (1 << 40).to_bytes(8, "little"), b"\x00" * 8])
    return bytes(b)


class Campaign(unittest.TestCase):
    def test_mutants_never_crash_or_hang_ls_or_compare(self):
        sources = sorted(glob.glob(os.path.join(SRC, "fixtures", "*", "step*", "rank0", "dump.h5")))
        self.assertGreaterEqual(len(sources), 4)
        originals = []
        for s in sources:
            with open(s, "rb") as f:
                originals.append(f.read())
        rng = random.Random(SEED)
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        roots = []
        for r in range((N + PER_ROOT - 1) // PER_ROOT):
            mut, ref = os.path.join(tmp.name, "m%03d" % r), os.path.join(tmp.name, "r%03d" % r)
            for i in range(min(PER_ROOT, N - r * PER_ROOT)):
                k = rng.randrange(len(sources))
                for root, data in ((mut, mutate(rng, originals[k])), (ref, None)):
                    d = os.path.join(root, "step%d" % i, "rank0")
                    os.makedirs(d)
                    if data is None:
                        os.link(sources[k], os.path.join(d, "dump.h5"))
                    else:
                        with open(os.path.join(d, "dump.h5"), "wb") as f:
                            f.write(data)
            roots.append((mut, ref))

        def one(args):
            try:
                p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=600,
                                   env=ENV)
            except subprocess.TimeoutExpired:
                return args, None, ""
            return args, p.returncode, p.stderr

        jobs = []
        for mut, ref in roots:
            jobs.append(("ls", mut))
            jobs.append(("compare", "-b", ref, "-c", mut, "-o", mut + ".out"))
        singles = [os.path.join(roots[0][0], "step%d" % i, "rank0", "dump.h5") for i in range(40)]
        jobs += [("ls", s) for s in singles]
        outcomes = {"ok": 0, "error": 0}
        skipped = 0
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
            for args, rc, err in ex.map(one, jobs):
                what = " ".join(args)
                self.assertIsNotNone(rc, "timed out: " + what)
                self.assertGreaterEqual(rc, 0, "killed by signal %d: %s" % (-rc if rc else 0, what))
                # 3: compare's report written without the unreadable steps
                self.assertIn(rc, (0, 1, 2, 3), what + "\n" + err)
                self.assertNotIn("HDF5-DIAG", err, what)  # libhdf5's own error stack
                if rc == 2 and args[0] == "ls" and args[1] in singles:
                    self.assertIn(args[1], err, "a failure that does not name its file")
                for line in err.splitlines():
                    if "skipped" in line or "corrupt or not a dump" in line:
                        skipped += 1
                        self.assertIn(os.path.dirname(args[-1] if args[0] == "ls" else args[4]),
                                      line)
                outcomes["ok" if rc in (0, 1, 3) else "error"] += 1
        print("mutation campaign: %d mutants (seed %d) in %d roots, %d runs: %d finished, "
              "%d clear errors, %d unreadable files named, 0 signals, 0 timeouts"
              % (N, SEED, len(roots), len(jobs), outcomes["ok"], outcomes["error"], skipped))


if __name__ == "__main__":
    unittest.main()
