"""Packs written by Huawei's Python msprobe config_check itself (fixtures/
msprobe/config_check: 26's and 8.3.3's static packs, env and pip) are
recognised as msprobe's and refused with a message saying so and what to do,
on either side; a zip that is neither pack keeps the plain message."""
import os
import subprocess
import tempfile
import unittest
import zipfile

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
SOURCE = os.environ.get("MSPROBE_SOURCE_DIR",
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PACKS = os.path.join(SOURCE, "fixtures", "msprobe", "config_check")
SAYS = ("a pack of Huawei's Python msprobe config_check (members env, pip, ...; no "
        "manifest.json), not one of msprobe-c's: compare two such packs with Python msprobe's "
        "own config_check -c, or make both packs here (msprobe config_check -d, or "
        "msprobe.json's config_check section)")


class PythonMsprobePacks(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def cc(self, a, b):
        return subprocess.run([BIN, "config_check", "-c", a, b, "-o", os.path.join(self.d, "o")],
                              capture_output=True, text=True)

    def test_msprobe_packs_are_named_as_msprobe_s(self):
        v26, v833 = (os.path.join(PACKS, n) for n in ("v26_pack.zip", "v833_pack.zip"))
        with zipfile.ZipFile(v26) as z:  # what msprobe wrote: its item members, no manifest
            self.assertEqual(sorted(z.namelist()), ["env", "pip"])
        ours = os.path.join(self.d, "ours.zip")
        p = subprocess.run([BIN, "config_check", "-d", "-o", ours], capture_output=True, text=True,
                           cwd=self.d)
        self.assertEqual(p.returncode, 0, p.stderr)
        for a, b, bad in ((v26, v833, v26), (ours, v833, v833), (v833, ours, v833)):
            with self.subTest(a=a, b=b):
                p = self.cc(a, b)
                self.assertEqual(p.returncode, 2)
                self.assertEqual(p.stderr, "msprobe: pack %s: %s\n" % (bad, SAYS))
                self.assertFalse(os.path.exists(os.path.join(self.d, "o", "result.xlsx")))

    def test_other_zips_keep_the_plain_message(self):
        other = os.path.join(self.d, "other.zip")
        with zipfile.ZipFile(other, "w") as z:
            z.writestr("env", "{}")
            z.writestr("notes.txt", "hello")
        p = self.cc(other, other)
        self.assertEqual(p.returncode, 2)
        self.assertIn("member manifest.json: missing; not a config_check pack", p.stderr)


if __name__ == "__main__":
    unittest.main()
