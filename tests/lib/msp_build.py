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
