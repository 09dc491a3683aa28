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
COMMANDS = ["compare", "config_check", "dump", "ls", "export", "overflow_check", "acc_check",
            "api_precision_compare", "merge_result", "locate"]


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

    def test_version_is_the_one_in_cmakelists_everywhere(self):
        cm = open(os.path.join(SRC, "CMakeLists.txt"), encoding="utf-8").read()
        version = re.search(r"project\(msprobe VERSION ([0-9.]+)", cm).group(1)
        r = subprocess.run([BIN, "--version"], capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stdout), (0, f"msprobe {version}\n"))
        for page in sorted(glob.glob(os.path.join(SRC, "man", "*.[15]"))):
            # the .TH line (a page using tbl starts with its '\\" t preprocessor line)
            th = next(l for l in open(page, encoding="utf-8") if l.startswith(".TH"))
            self.assertIn(f'"msprobe {version}"', th, page)
        # no second spelling of the version in the sources
        hits = subprocess.run(["grep", "-rlF", f'"{version}"', os.path.join(SRC, "src"),
                               os.path.join(SRC, "include")], capture_output=True, text=True)
        self.assertEqual(hits.stdout, "")

    # Where each option table is documented: (command, page, section).
    OPTION_PAGES = [(None, "msprobe.1", "GLOBAL OPTIONS"),
                    ("compare", "msprobe-compare.1", "OPTIONS"),
                    ("config_check", "msprobe-config_check.1", "OPTIONS"),
                    ("dump", "msprobe-dump.1", "OPTIONS"),
                    ("monitor", "msprobe-monitor.1", "OPTIONS"),
                    ("locate", "msprobe-locate.1", "OPTIONS"),
                    ("export", "msprobe-export.1", "OPTIONS"),
                    ("overflow_check", "msprobe-overflow_check.1", "OPTIONS"),
                    ("acc_check", "msprobe-acc_check.1", "OPTIONS"),
                    ("api_precision_compare", "msprobe-api_precision_compare.1", "OPTIONS"),
                    ("merge_result", "msprobe-merge_result.1", "OPTIONS")]

    @staticmethod
    def help_options(cmd):
        """(short, long) of each option line of --help, which the CLI prints
        from the same table getopt_long parses with."""
        args = [BIN, cmd, "--help"] if cmd else [BIN, "--help"]
        out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
        body = re.split(r"^(?:Global )?[Oo]ptions:\n", out, flags=re.M)[1].split("\n\n")[0]
        return {(m.group(1), m.group(2)) for m in
                re.finditer(r"^  (?:-(\w), )?\s*--([\w-]+)", body, flags=re.M)}

    @staticmethod
    def man_options(page, section):
        """(short, long) of each .TP tag in a section of a man page."""
        text = open(os.path.join(SRC, "man", page), encoding="utf-8").read()
        body = re.split(r'^\.SH "?' + re.escape(section) + r'"?\n', text, flags=re.M)[1]
        body = re.split(r"^\.SH", body, flags=re.M)[0]
        lines = body.split("\n")
        found = set()
        for prev, tag in zip(lines, lines[1:]):
            if prev != ".TP":
                continue
            tag = re.sub(r"\\f[BIRP]", "", tag.replace("\\-", "-"))
            m = re.search(r"--([\w-]+)", tag)
            if not m:
                continue  # "--" alone: the end of msprobe's options, not an option
            short = re.search(r"(?<![\w-])-(\w)\b", tag[:m.start()])
            found.add((short.group(1) if short else None, m.group(1)))
        return found

    def test_man_pages_list_exactly_the_options_each_command_parses(self):
        for cmd, page, section in self.OPTION_PAGES:
            with self.subTest(cmd=cmd or "msprobe"):
                self.assertEqual(self.man_options(page, section), self.help_options(cmd))
        # ls has only --help; msprobe(1) documents ls in a paragraph.
        self.assertEqual(self.help_options("ls"), {("h", "help")})

    def test_every_usage_error_starts_with_msprobe(self):
        for args in (["--bogus"], ["-f"], [], ["compare", "--bogus"], ["compare", "-b"],
                     ["config_check", "--bogus"], ["config_check", "-o"], ["dump", "--bogus"],
                     ["monitor", "--bogus"], ["monitor", "-c"],
                     ["locate", "--bogus"], ["locate", "--bench"],
                     ["ls", "--bogus"], ["ls", "-x"], ["ls"], ["overflow_check"],
                     ["overflow_check", "--bogus"], ["acc_check"], ["acc_check", "-n", "x"],
                     ["api_precision_compare", "-npu"]):
            with self.subTest(args=args):
                r = subprocess.run([BIN, *args], capture_output=True, text=True)
                self.assertEqual(r.returncode, 2)
                self.assertEqual(r.stdout, "")
                lines = r.stderr.splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertTrue(lines[0].startswith("msprobe: "), r.stderr)
                self.assertNotIn(BIN, r.stderr)  # not getopt's "/path/to/msprobe: ..."
                self.assertIn("--help", r.stderr)

    def test_see_also_names_only_existing_pages(self):
        names = {os.path.basename(p) for p in glob.glob(os.path.join(SRC, "man", "*.[15]"))}
        for page in glob.glob(os.path.join(SRC, "man", "*.[15]")):
            text = open(page, encoding="utf-8").read()
            text = re.sub(r"\\f[BIRP]", "", text.replace("\\-", "-"))
            for name, sec in re.findall(r"\b(msprobe[-.\w]*)\s?\((\d)\)", text):
                self.assertIn(f"{name}.{sec}", names, f"{page} refers to {name}({sec})")


if __name__ == "__main__":
    unittest.main()
