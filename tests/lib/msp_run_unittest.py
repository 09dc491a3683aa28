"""Run one unittest script for ctest so that skips show as skips.

    python3 msp_run_unittest.py SCRIPT [ARGS...]

The script runs as __main__ with its own arguments. Its unittest.main() call
reports as usual; then the exit status is 1 if a test failed, 77 if any test
was skipped (ctest's SKIP_RETURN_CODE for these tests: "Not Run (Skipped)",
with the reasons printed above), 0 otherwise. A plain unittest exit status
makes a skipped test look exactly like a passed one."""
import os
import runpy
import sys
import unittest

SKIPPED = 77


class _Program(unittest.TestProgram):
    def runTests(self):
        self.exit = False
        super().runTests()
        r = self.result
        if not r.wasSuccessful():
            sys.exit(1)
        if r.skipped:
            print(f"{len(r.skipped)} of {r.testsRun} tests skipped:")
            for test, why in r.skipped:
                print(f"  {test.id()}: {why}")
            sys.exit(SKIPPED)
        sys.exit(0)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: msp_run_unittest.py SCRIPT [ARGS...]")
    script = os.path.abspath(sys.argv[1])
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(script)  # as when python runs the script itself
    unittest.main = _Program
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
