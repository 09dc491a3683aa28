"""Reading a pack costs memory bounded by the documented caps, not by what a
hostile pack declares or inflates to: the members together and the number of
JSON values are capped (msprobe-config_check(1)). Each run is measured by the
child's peak RSS and held under an address-space limit, so a reader that
parses first and checks later fails here instead of taking the machine."""
import json
import os
import random
import resource
import subprocess
import tempfile
import unittest
import zipfile

from cc_testlib import BIN, clean_env

MANIFEST = {"format": "msprobe-config-check", "format_version": 1, "tool": "msprobe", "tool_version": "x",
            "kind": "static", "host": "h", "time": "2026-01-01T00:00:00Z", "rank": 0, "world_size": 1}
MIB = 1 << 20
# An ASan build reserves terabytes of address space and keeps freed memory
# in quarantine: no address-space limit there, and a looser RSS bound.
SANITIZED = b"libasan" in subprocess.run(["ldd", BIN], capture_output=True).stdout if BIN else False
AS_LIMIT = "" if SANITIZED else "resource.setrlimit(resource.RLIMIT_AS,(3<<30,3<<30))\n"
RSS_SCALE = 4 if SANITIZED else 1


def run_measured(*args):
    """(exit status, stderr, the child's peak RSS in bytes)."""
    # ru_maxrss of children is the largest of any child so far: run in a fresh
    # intermediate process so earlier children do not mask this one.
    code = ("import resource,subprocess,sys\n"
            + AS_LIMIT +
            "r=subprocess.run(sys.argv[1:],capture_output=True,text=True)\n"
            "sys.stderr.write(r.stderr)\n"
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    p = subprocess.run(["/usr/bin/python3", "-c", code, BIN] + list(args), capture_output=True, text=True,
                       env=clean_env(), timeout=300)
    rc, kb = p.stdout.split()
    return int(rc), p.stderr, int(kb) * 1024


def write_stream(z, name, head, chunks, tail):
    with z.open(name, "w", force_zip64=True) as f:
        f.write(head)
        for c in chunks:
            f.write(c)
        f.write(tail)


def small_values(total, seed=1):
    """About `total` bytes of "[n]," entries: 4-5 bytes per JSON value, and
    variable enough to stay under the zip-bomb ratio check."""
    rng = random.Random(seed)
    voc = [("[%d]" % i).encode() for i in range(64)]
    base = [rng.choice(voc) for _ in range(1024)]
    n = 0
    while n < total:
        for _ in range(40):
            base[rng.randrange(1024)] = rng.choice(voc)
        c = b",".join(base) + b","
        n += len(c)
        yield c


def long_strings(total, seed=2):
    rng = random.Random(seed)
    alphabet = "abcdefgh"
    n = 0
    while n < total:
        s = ('"%s",' % "".join(rng.choice(alphabet) for _ in range(4096))).encode()
        n += len(s)
        yield s


class PackCaps(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_millions_of_tiny_values_are_refused_before_parsing(self):
        # ~16 MB of "[n]," (3.5 M values) in a ~0.5 MB pack: under the byte cap,
        # over three times the value cap (64 MiB / 64 = 1 Mi values).
        p = os.path.join(self.d, "tiny.zip")
        with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
            z.writestr("manifest.json", json.dumps(MANIFEST))
            write_stream(z, "dataset.json", b'{"tensors":[', small_values(16 * MIB), b"[0]]}")
        self.assertLess(os.path.getsize(p), 4 * MIB)
        rc, err, rss = run_measured("config_check", "-c", p, p, "-o", os.path.join(self.d, "o"))
        self.assertEqual(rc, 2, err)
        self.assertIn("member dataset.json: over 1048576 JSON values", err)
        # The text read (16 MB) and no parsed tree: far below the ~400 MB a tree costs.
        self.assertLess(rss, 100 * MIB * RSS_SCALE)

    def test_members_together_are_capped(self):
        # Two members of 5 MiB of long strings: each under an 8 MiB cap, not both.
        p = os.path.join(self.d, "two.zip")
        with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
            z.writestr("manifest.json", json.dumps(MANIFEST))
            write_stream(z, "dataset.json", b'{"tensors":[', long_strings(5 * MIB), b'""]}')
            write_stream(z, "weights.json", b'{"tensors":[', long_strings(5 * MIB, 3), b'""]}')
        rc, err, rss = run_measured("config_check", "-c", p, p, "-o", os.path.join(self.d, "o"),
                                    "--max-member-mib", "8")
        self.assertEqual(rc, 2, err)
        self.assertIn("the members together exceed the 8388608-byte limit", err)
        self.assertLess(rss, 60 * MIB * RSS_SCALE)


if __name__ == "__main__":
    unittest.main()
