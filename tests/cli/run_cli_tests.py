"""CLI tests in the style of zstd's tests/cli-tests (tests/lib/cli_cases.py):
every directory under cases/ is one test, holding

    cmd                   a bash script; $MSPROBE is the binary, $DATA the dumps
                          made below, $FIXTURES the committed fixtures/, the
                          working directory a fresh empty one
    exit                  the expected exit status
    stdout.exact|.glob    expected stdout; absent means "must be empty"
    stderr.exact|.glob    expected stderr; absent means "must be empty"

Before comparing, the data, fixtures and working directory paths are replaced
by $DATA, $FIXTURES and $TMP. In a .glob file "..." stands for any text (line breaks included),
for what changes from run to run (timings, throughput).

The dumps in $DATA are written with h5py (msp_dumpmaker), not by msprobe:
  pass/{bench,cmp}/dump.h5     the same chain on both sides
  planted/{bench,cmp}/dump.h5  the compare side has an error planted in
                               Functional.relu.0.forward (see msp_dumpmaker.chain)
  renamed/dump.h5              planted/cmp with the relu record renamed
                               Functional.relu_renamed.0.forward
  not_hdf5.h5                  a text file
Run one case: MSPROBE_CLI_CASE=name python3 run_cli_tests.py
"""
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# tests/lib is on PYTHONPATH under ctest; this keeps a run by hand working too
sys.path.append(os.path.join(HERE, os.pardir, "lib"))
import cli_cases  # noqa: E402
import msp_dumpmaker  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
CASES = os.path.join(HERE, "cases")
SRC = os.environ.get("MSPROBE_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
FIXTURES = os.path.join(SRC, "fixtures")


class CliCases(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="msp_cli_")
        cls.data = os.path.join(cls.tmp, "data")
        msp_dumpmaker.make_pair(os.path.join(cls.data, "pass"), planted=False)
        msp_dumpmaker.make_pair(os.path.join(cls.data, "planted"), planted=True)
        renamed = [(msp_dumpmaker.RELU_RENAMED if n == msp_dumpmaker.RELU_ROOT else n, o, t)
                   for n, o, t in msp_dumpmaker.chain(True)]
        msp_dumpmaker.write_dump(os.path.join(cls.data, "renamed", "dump.h5"), renamed)
        with open(os.path.join(cls.data, "not_hdf5.h5"), "w") as f:
            f.write("this is not an HDF5 file\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_case(self, name):
        case = os.path.join(CASES, name)
        work = os.path.join(self.tmp, "work", name)
        os.makedirs(work)
        # the caller's MSPROBE_PATH (the dump config) must not leak into a case
        env = dict(os.environ, MSPROBE=BIN, DATA=self.data, FIXTURES=FIXTURES, LC_ALL="C")
        env.pop("MSPROBE_PATH", None)
        cli_cases.check_case(self, case, work, env,
                             [(self.data, "$DATA"), (work, "$TMP"), (FIXTURES, "$FIXTURES")],
                             timeout=300)


def _add_cases():
    only = os.environ.get("MSPROBE_CLI_CASE")
    for name in sorted(os.listdir(CASES)):
        if not os.path.exists(os.path.join(CASES, name, "cmd")) or (only and name != only):
            continue

        def test(self, name=name):
            self.run_case(name)

        setattr(CliCases, "test_" + name, test)


_add_cases()

if __name__ == "__main__":
    unittest.main(verbosity=2)
