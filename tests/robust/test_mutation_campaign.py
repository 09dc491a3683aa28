"""The mutation campaign (issue 10, item 7): byte-level mutants of the
committed dumps, a fixed seed, through `msprobe ls` and `msprobe compare`,
each run under a timeout. Zero signals, zero timeouts; every file that
cannot be read is reported by name, and a run on a single file that fails
exits 2. MSP_MUTANTS sets the most mutants (default 5000).

The campaign fits its work to a time budget (issue 42, item 5: on two busy
cores it ran into ctest's 900 s): mutants come in roots of PER_ROOT, always
in the same order from the seed, and a root is started only while the
budget (MSP_CAMPAIGN_BUDGET_S, default 420 s) lasts; the first MIN_ROOTS
roots and the single files are run whatever it says, so a slow machine runs
a shorter prefix of the same campaign, never none of it. The summary line
says how many mutants ran."""
import concurrent.futures
import glob
import os
import random
import subprocess
import tempfile
import time
import unittest

BIN = os.environ["MSPROBE_BIN"]
SRC = os.environ["MSPROBE_SOURCE_DIR"]
N = int(os.environ.get("MSP_MUTANTS", "5000"))
PER_ROOT = 125
MIN_ROOTS = 2
BUDGET_S = float(os.environ.get("MSP_CAMPAIGN_BUDGET_S", "420"))
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
        deadline = time.monotonic() + BUDGET_S
        rng = random.Random(SEED)
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)

        def make_root(r):
            """Root r's mutants and their originals: (mutants' dir, originals' dir, count)."""
            mut, ref = os.path.join(tmp.name, "m%03d" % r), os.path.join(tmp.name, "r%03d" % r)
            count = min(PER_ROOT, N - r * PER_ROOT)
            for i in range(count):
                k = rng.randrange(len(sources))
                for root, data in ((mut, mutate(rng, originals[k])), (ref, None)):
                    d = os.path.join(root, "step%d" % i, "rank0")
                    os.makedirs(d)
                    if data is None:
                        os.link(sources[k], os.path.join(d, "dump.h5"))
                    else:
                        with open(os.path.join(d, "dump.h5"), "wb") as f:
                            f.write(data)
            return mut, ref, count

        def one(args):
            try:
                p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=600,
                                   env=ENV)
            except subprocess.TimeoutExpired:
                return args, None, ""
            return args, p.returncode, p.stderr

        def jobs_of(mut, ref):
            return [("ls", mut), ("compare", "-b", ref, "-c", mut, "-o", mut + ".out")]

        # roots are made as the campaign goes, each once the one before is
        # under way, and none once the budget is spent (past MIN_ROOTS)
        n_roots = (N + PER_ROOT - 1) // PER_ROOT
        mut0, ref0, mutants = make_root(0)
        singles = [os.path.join(mut0, "step%d" % i, "rank0", "dump.h5")
                   for i in range(min(40, mutants))]
        workers = os.cpu_count() or 2
        outcomes = {"ok": 0, "error": 0}
        skipped = 0
        runs = 0
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
            futures = [ex.submit(one, j) for j in jobs_of(mut0, ref0) + [("ls", s) for s in singles]]
            made = 1
            while made < n_roots and (made < MIN_ROOTS or time.monotonic() < deadline):
                # no more than a root's jobs queued ahead of the workers
                pending = [f for f in futures if not f.done()]
                while len(pending) > workers + 2:
                    pending = concurrent.futures.wait(
                        pending, return_when=concurrent.futures.FIRST_COMPLETED).not_done
                if made >= MIN_ROOTS and time.monotonic() >= deadline:
                    break
                mut, ref, count = make_root(made)
                futures += [ex.submit(one, j) for j in jobs_of(mut, ref)]
                mutants += count
                made += 1
            for fut in futures:
                args, rc, err = fut.result()
                runs += 1
                what = " ".join(args)
                self.assertIsNotNone(rc, "timed out: " + what)
                self.assertGreaterEqual(rc, 0, "killed by signal %d: %s" % (-rc if rc else 0, what))
                # 3: compare's report written without the unreadable steps
                self.assertIn(rc, (0, 1, 2, 3), what + "\n" + err)
                self.assertNotIn("HDF5-DIAG", err, what)  # libhdf5's own error stack
                if rc == 2 and args[0] == "ls" and args[1] in singles:
                    self.assertIn(args[1], err, "a failure that does not name its file")
                for line in err.splitlines():
                    if any(w in line for w in ("skipped", "corrupt or not a dump", "timed out")):
                        skipped += 1
                        self.assertIn(os.path.dirname(args[-1] if args[0] == "ls" else args[4]),
                                      line)
                outcomes["ok" if rc in (0, 1, 3) else "error"] += 1
        print("mutation campaign: %d mutants of %d (seed %d; a budget of %.0f s) in %d roots, "
              "%d runs: %d finished, %d clear errors, %d unreadable files named, 0 signals, "
              "0 timeouts" % (mutants, N, SEED, BUDGET_S, made, runs, outcomes["ok"],
                              outcomes["error"], skipped))


if __name__ == "__main__":
    unittest.main()
