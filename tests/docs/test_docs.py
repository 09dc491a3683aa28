"""Every command has --help on stdout with exit 0, and a man page that groff
renders without a warning; every page names only pages that exist."""
import glob
import os
import re
import shutil
import subprocess
import unittest

SRC = os.environ["MSPROBE_SOURCE_DIR"]
BIN = os.environ["MSPROBE_BIN"]
COMMANDS = ["compare", "config_check", "dump", "ls"]


class DocsTest(unittest.TestCase):
    def test_help_of_every_command_goes_to_stdout_with_exit_0(self):
        for cmd in COMMANDS:
            r = subprocess.run([BIN, cmd, "--help"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, cmd)
            self.assertIn("Usage: msprobe", r.stdout, cmd)
            self.assertIn(cmd, r.stdout, cmd)
            self.assertEqual(r.stderr, "", cmd)

    def test_every_command_has_a_man_page(self):
        for cmd in COMMANDS:
            page = "msprobe.1" if cmd == "ls" else f"msprobe-{cmd}.1"
            self.assertTrue(os.path.exists(os.path.join(SRC, "man", page)), page)
        for page in ["msprobe.1", "msprobe.json.5", "msprobe-dump.5"]:
            self.assertTrue(os.path.exists(os.path.join(SRC, "man", page)), page)

    @unittest.skipUnless(shutil.which("groff"), "groff not installed")
    def test_man_pages_render_without_warnings(self):
        pages = sorted(glob.glob(os.path.join(SRC, "man", "*.[15]")))
        self.assertGreaterEqual(len(pages), 6)
        for page in pages:
            r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", page],
                               capture_output=True, text=True)
            self.assertEqual(r.stderr.strip(), "", page)

    def test_see_also_names_only_existing_pages(self):
        names = {os.path.basename(p) for p in glob.glob(os.path.join(SRC, "man", "*.[15]"))}
        for page in glob.glob(os.path.join(SRC, "man", "*.[15]")):
            text = open(page, encoding="utf-8").read()
            text = re.sub(r"\\f[BIRP]", "", text.replace("\\-", "-"))
            for name, sec in re.findall(r"\b(msprobe[-.\w]*)\s?\((\d)\)", text):
                self.assertIn(f"{name}.{sec}", names, f"{page} refers to {name}({sec})")


if __name__ == "__main__":
    unittest.main()
