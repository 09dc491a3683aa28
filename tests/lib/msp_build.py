"""What the build under test is, from its CMakeCache.txt (MSPROBE_BUILD_DIR,
set by ctest): a test that cannot hold under a sanitizer asks here; and the
bench's dump generator, msprobe-gen, where the build has it."""
import os
import subprocess
import tempfile

GEN = os.environ.get("MSPROBE_GEN") or os.path.join(
    os.environ.get("MSPROBE_BUILD_DIR", "build"), "bench", "compare", "msprobe-gen")


def sanitized_build():
    cache = os.path.join(os.environ.get("MSPROBE_BUILD_DIR", ""), "CMakeCache.txt")
    try:
        with open(cache) as f:
            return any(line.startswith("MSPROBE_SANITIZE:BOOL=ON") for line in f)
    except OSError:
        return False


def gen_dump(test, prefix, layers, args):
    """(work directory, its one bench-side dump.h5): msprobe-gen's one rank
    and step of layers forward and layers backward records, with msprobe-gen's
    further arguments args; test skipped where the build has no msprobe-gen
    (MSPROBE_BENCH=OFF)"""
    if not os.access(GEN, os.X_OK):
        test.skipTest("no msprobe-gen (MSPROBE_BENCH=OFF)")
    work = tempfile.mkdtemp(prefix=prefix)
    subprocess.run([GEN, "--out", work, "--steps", "1", "--ranks", "1", "--layers", str(layers)]
                   + list(args), check=True, stdout=subprocess.DEVNULL)
    return work, os.path.join(work, "bench", "step0", "rank0", "dump.h5")


def statistics_dump(test, prefix, layers=2500):
    """gen_dump's statistics dump of records of 256 elements"""
    return gen_dump(test, prefix, layers, ["--numel", "256", "--task", "statistics"])


class GenTree:
    """A unittest.TestCase mixin over one msprobe-gen tree made once for the
    class in cls.work (GEN_PREFIX its folder's prefix, GEN_ARGS msprobe-gen's
    arguments after --out); each test skipped where the build has no
    msprobe-gen"""
    GEN_PREFIX = "msp-gen-"
    GEN_ARGS = ()

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix=cls.GEN_PREFIX)
        if os.access(GEN, os.X_OK):
            subprocess.run([GEN, "--out", cls.work] + list(cls.GEN_ARGS), check=True,
                           stdout=subprocess.DEVNULL)

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["rm", "-rf", cls.work])

    def setUp(self):
        if not os.access(GEN, os.X_OK):
            self.skipTest("no msprobe-gen (MSPROBE_BENCH=OFF)")

    def compare_counted(self, counter, what, out, *extra, env=None):
        """msprobe compare of the tree into out with fmt_call_count.c
        (counter) preloaded: (the finished process, msprobe's calls of what,
        None in a sanitized build, where no library may come first)"""
        log = os.path.join(self.work, "calls.log")
        if os.path.exists(log):
            os.unlink(log)
        full = dict(os.environ, MSP_CALL_COUNT_LOG=log, MSP_CALL_COUNT_AT_EXIT="1", **(env or {}))
        counted = not sanitized_build()
        if counted:
            full["LD_PRELOAD"] = counter
        p = subprocess.run([os.environ["MSPROBE_BIN"], "compare", "-b",
                            os.path.join(self.work, "bench"), "-c", os.path.join(self.work, "npu"),
                            "-o", out, "--replay", "off"] + list(extra),
                           capture_output=True, text=True, timeout=600, env=full)
        if not counted:
            return p, None
        with open(log) as f:
            calls = [int(w[2]) for w in (line.split() for line in f)
                     if w[0] == what and w[3] == "msprobe"]
        self.assertEqual(len(calls), 1, calls)
        return p, calls[0]
