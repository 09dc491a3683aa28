"""The library's own messages inside the training process reach the user.

config_check's collectors say where the pack was written through the
library's logger (msp_log, level information). The shim installs a sink for
it: MSPROBE_VERBOSE=2 (what `msprobe -v dump` sets) prints the line, the
default (warnings) does not, and -q prints nothing of it either."""
import json
import os
import tempfile
import unittest

from cc_testlib import PYTHON, msprobe, clean_env, run_under_shim, PRELOAD

SCRIPT = "import torch\ntorch.manual_seed(3)\nprint(torch.nn.Linear(2, 2)(torch.ones(1, 2)).shape)\n"


def wrote_lines(stderr, path):
    return [l for l in stderr.splitlines()
            if l.startswith("msprobe: config_check: wrote " + path + " (")]


class LibraryMessages(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.script = os.path.join(self.d, "s.py")
        with open(self.script, "w") as f:
            f.write(SCRIPT)

    def tearDown(self):
        self.tmp.cleanup()

    def run_env(self, verbose):
        z = os.path.join(self.d, "pack_%s.zip" % verbose)
        extra = {} if verbose is None else {"MSPROBE_VERBOSE": verbose}
        r = run_under_shim([self.script], z, self.d, **extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isfile(z), r.stderr)
        return z, r.stderr

    def test_information_said_at_verbose_2(self):
        z, err = self.run_env("2")
        self.assertEqual(len(wrote_lines(err, z)), 1, err)

    def test_default_and_quiet_say_nothing_of_it(self):
        for v in (None, "0", "1"):
            z, err = self.run_env(v)
            self.assertEqual(wrote_lines(err, z), [], (v, err))

    def test_msprobe_v_dump_passes_the_level_on(self):
        z = os.path.join(self.d, "cli_pack.zip")
        cfg = os.path.join(self.d, "msprobe.json")
        with open(cfg, "w") as f:
            json.dump({"config_check": {"output_zip_path": z}}, f)
        env = clean_env(MSPROBE_PRELOAD_LIB=PRELOAD)
        for flags, want in ((["-v"], 1), ([], 0), (["-q"], 0)):
            if os.path.exists(z):
                os.unlink(z)
            r = msprobe(*flags, "dump", "-c", cfg, "--", PYTHON, self.script, env=env, cwd=self.d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.isfile(z), r.stderr)
            self.assertEqual(len(wrote_lines(r.stderr, z)), want, (flags, r.stderr))


if __name__ == "__main__":
    unittest.main()
