"""`msprobe dump -- cmd`: config checked before the command runs, MSPROBE_PATH
and LD_PRELOAD set for it, the command exec'd in place (same pid, its exit
status), shell-like 126/127 when it cannot run, and the shim found beside the
executable. Runs without the real shim: a system library stands in for it.
"""
import os
import platform
import shutil
import subprocess
import tempfile
import unittest
from msp_build import sanitized_build

BIN = os.environ["MSPROBE_BIN"]


def mapped_libraries():
    """Shared libraries this Python has loaded: real ELF files that are
    harmless when preloaded into sh (they are loaded anyway)."""
    libs = []
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if ".so" in path and path.startswith("/") and "ld-linux" not in path \
                    and path not in libs:
                libs.append(path)
    libs.sort(key=lambda p: "/libc." in p)  # libc last: prefer libm, libz
    return libs


LIBS = mapped_libraries()
SHIM = LIBS[0]          # stands in for libmsprobe_preload.so
OTHER = LIBS[1]         # a library the user already preloads

GOOD = '{"dump": {"common_dump_settings": {"dump_path": "./out/dump", "task": "statistics"}}}'
SHOW = 'printf "%s|%s" "$LD_PRELOAD" "$MSPROBE_PATH"'


class LauncherCase(unittest.TestCase):
    def setUp(self):
        self.assertGreaterEqual(len(LIBS), 2, "need two shared libraries to preload")
        self.assertNotEqual(SHIM, OTHER)
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.dir = os.path.realpath(self.tmp.name)
        self.write("good.json", GOOD)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items()
               if k not in ("LD_PRELOAD", "MSPROBE_PATH", "MSPROBE_PRELOAD_LIB")}
        # An ASan-built msprobe started with LD_PRELOAD set must not abort.
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
        env["MSPROBE_PRELOAD_LIB"] = SHIM
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def run_dump(self, args, env=None, exe=BIN, pre=()):
        return subprocess.run([exe, *pre, "dump", *args], cwd=self.dir, capture_output=True,
                              text=True, env=env or self.env())

    def assertNotRun(self, r, stderr):
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertEqual(r.stderr, stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "marker")))


class DumpLauncher(LauncherCase):
    # ---- environment -------------------------------------------------------

    def test_sets_absolute_msprobe_path_and_preloads_the_shim(self):
        r = self.run_dump(["-c", "good.json", "--", "sh", "-c", SHOW])
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(r.stdout, f"{SHIM}|{self.dir}/good.json")

    def test_keeps_what_ld_preload_held_and_appends_the_shim(self):
        cases = [
            (OTHER, f"{OTHER}:{SHIM}"),
            (f"{OTHER} ", f"{OTHER} {SHIM}"),        # ld.so also splits on spaces
            (f"{OTHER}:", f"{OTHER}:{SHIM}"),
            (f"{OTHER}:{SHIM}", f"{OTHER}:{SHIM}"),  # already there: not twice
            (":", SHIM),
        ]
        for before, after in cases:
            with self.subTest(before=before):
                r = self.run_dump(["-c", "good.json", "--", "sh", "-c", SHOW],
                                  env=self.env(LD_PRELOAD=before))
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assertEqual(r.stdout.split("|")[0], after)

    def test_relative_preload_lib_is_made_absolute(self):
        shutil.copy(SHIM, os.path.join(self.dir, "shim.so"))
        r = self.run_dump(["-c", "good.json", "--", "sh", "-c", SHOW],
                          env=self.env(MSPROBE_PRELOAD_LIB="shim.so"))
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(r.stdout.split("|")[0], f"{self.dir}/shim.so")

    def test_config_from_msprobe_path_then_current_directory(self):
        os.mkdir(os.path.join(self.dir, "conf"))
        self.write("conf/a.json", GOOD)
        r = self.run_dump(["sh", "-c", SHOW], env=self.env(MSPROBE_PATH="conf/a.json"))
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(r.stdout, f"{SHIM}|{self.dir}/conf/a.json")
        self.write("msprobe.json", GOOD)
        r = self.run_dump(["sh", "-c", SHOW])
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(r.stdout, f"{SHIM}|{self.dir}/msprobe.json")
        # -c wins over MSPROBE_PATH
        r = self.run_dump(["-c", "good.json", "sh", "-c", SHOW],
                          env=self.env(MSPROBE_PATH="conf/a.json"))
        self.assertEqual(r.stdout, f"{SHIM}|{self.dir}/good.json")

    def test_command_keeps_its_own_options_and_arguments(self):
        r = self.run_dump(["-c", "good.json", "sh", "-c", 'printf "%s," "$@"', "x", "-c",
                           "a b", "--", "-h"])
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(r.stdout, "-c,a b,--,-h,")

    # ---- exec and exit status ----------------------------------------------

    def test_exit_status_is_the_commands(self):
        for code in (0, 1, 2, 7, 255):
            r = self.run_dump(["-c", "good.json", "--", "sh", "-c", f"exit {code}"])
            self.assertEqual(r.returncode, code)

    def test_command_replaces_msprobe(self):
        p = subprocess.Popen([BIN, "dump", "-c", "good.json", "--", "sh", "-c", "echo $$"],
                             cwd=self.dir, stdout=subprocess.PIPE, text=True, env=self.env())
        out, _ = p.communicate()
        self.assertEqual(int(out), p.pid)
        r = self.run_dump(["-c", "good.json", "--", "sh", "-c", "kill -TERM $$"])
        self.assertEqual(r.returncode, -15)

    def test_command_not_found_is_127(self):
        r = self.run_dump(["-c", "good.json", "--", "no-such-command-msprobe"])
        self.assertEqual(r.returncode, 127)
        self.assertEqual(r.stderr,
                         "msprobe: dump: no-such-command-msprobe: command not found (not in PATH)\n")
        r = self.run_dump(["-c", "good.json", "--", "./missing.sh"])
        self.assertEqual(r.returncode, 127)
        self.assertEqual(r.stderr,
                         "msprobe: dump: cannot run ./missing.sh: No such file or directory\n")

    def test_command_not_executable_is_126(self):
        self.write("script.sh", "#!/bin/sh\ntouch marker\n")
        os.chmod(os.path.join(self.dir, "script.sh"), 0o644)
        r = self.run_dump(["-c", "good.json", "--", "./script.sh"])
        self.assertEqual(r.returncode, 126)
        self.assertEqual(r.stderr, "msprobe: dump: cannot run ./script.sh: Permission denied\n")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "marker")))

    def test_python_script_without_interpreter_gets_a_hint(self):
        self.write("train.py", "print('never')\n")
        hint = "; run a Python script through its interpreter: msprobe dump -- python "
        r = self.run_dump(["-c", "good.json", "--", "./train.py"])
        self.assertEqual(r.returncode, 126)
        self.assertEqual(r.stderr, "msprobe: dump: cannot run ./train.py: Permission denied"
                         + hint + "./train.py\n")
        r = self.run_dump(["-c", "good.json", "--", "train.py"],
                          env=self.env(PATH=os.environ.get("PATH", "/usr/bin")))
        self.assertEqual(r.returncode, 127)
        self.assertEqual(r.stderr, "msprobe: dump: train.py: command not found (not in PATH)"
                         + hint + "train.py\n")

    # ---- checks before anything runs ---------------------------------------

    def test_bad_config_stops_before_the_command(self):
        self.write("bad.json", '{"dump": {"common_dump_settings": {"task": "tensors"}}}')
        r = self.run_dump(["-c", "bad.json", "--", "touch", "marker"])
        self.assertNotRun(r, 'msprobe: bad.json: dump.common_dump_settings.task: expected '
                             '"tensor", "statistics", "md5" or "overflow_check", got "tensors"\n')
        self.write("bad.json", '{"dump": {"common_dump_settings": {"task": "tensor",}}}')
        r = self.run_dump(["-c", "bad.json", "--", "touch", "marker"])
        self.assertNotRun(r, "msprobe: bad.json:1:53: invalid JSON: comma before '}' (JSON "
                             "allows no trailing comma), near '}}}'\n")

    def test_missing_config_names_where_it_looked(self):
        r = self.run_dump(["-c", "nope.json", "--", "touch", "marker"])
        self.assertNotRun(r, "msprobe: dump: config file nope.json (from -c) not found\n")
        r = self.run_dump(["touch", "marker"], env=self.env(MSPROBE_PATH="/nonexistent/m.json"))
        self.assertNotRun(r, "msprobe: dump: config file /nonexistent/m.json (from MSPROBE_PATH) "
                             "not found\n")
        r = self.run_dump(["touch", "marker"], env=self.env(MSPROBE_PATH=""))
        self.assertNotRun(r, "msprobe: dump: no config: MSPROBE_PATH is not set and "
                             "./msprobe.json does not exist; give one with -c FILE\n")

    def test_dump_path_and_pack_directory_are_created(self):
        self.write("cc.json", '{"dump": {"common_dump_settings": {"dump_path": "d1/d2/d3"}},'
                              ' "config_check": {"output_zip_path": "packs/run1/pack.zip"}}')
        r = self.run_dump(["-c", "cc.json", "--", "true"])
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "d1/d2/d3")))
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "packs/run1")))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "packs/run1/pack.zip")))
        r = self.run_dump(["-c", "good.json", "--", "true"])
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "out/dump")))

    def test_dump_path_that_cannot_be_created_stops_the_run(self):
        self.write("blocker", "a file, not a directory")
        self.write("b.json", '{"dump": {"common_dump_settings": {"dump_path": "blocker/sub"}}}')
        r = self.run_dump(["-c", "b.json", "--", "touch", "marker"])
        self.assertEqual((r.returncode, r.stdout), (2, ""))
        # the reason after the colon is msp_mkdirs' own wording
        self.assertTrue(r.stderr.startswith("msprobe: dump: b.json: dump_path blocker/sub cannot "
                                            "be created: "), r.stderr)
        self.assertIn("blocker", r.stderr.split("created: ", 1)[1])
        self.assertFalse(os.path.exists(os.path.join(self.dir, "marker")))

    def test_config_without_sections_warns_unless_quiet(self):
        self.write("empty.json", "{}")
        r = self.run_dump(["-c", "empty.json", "--", "sh", "-c", "echo ran"])
        self.assertEqual((r.returncode, r.stdout), (0, "ran\n"))
        self.assertEqual(r.stderr, 'msprobe: warning: dump: empty.json has neither "dump" nor '
                                   '"config_check": sh runs without recording anything\n')
        r = self.run_dump(["-c", "empty.json", "--", "sh", "-c", "echo ran"], pre=["-q"])
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "ran\n", ""))

    def test_usage_errors(self):
        r = self.run_dump(["-c", "good.json"])
        self.assertNotRun(r, "msprobe: dump: no command to run (e.g. msprobe dump -- python "
                             "train.py)\n")
        r = self.run_dump(["-c", "good.json", "--"])
        self.assertEqual(r.returncode, 2)
        r = self.run_dump(["--frobnicate", "--", "true"])
        self.assertNotRun(r, "msprobe: dump: unknown option '--frobnicate' (try 'msprobe dump "
                             "--help')\n")
        r = self.run_dump(["-c"])
        self.assertNotRun(r, "msprobe: dump: option -c needs a value (try 'msprobe dump --help')\n")

    def test_help_on_stdout(self):
        r = self.run_dump(["--help"])
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertTrue(r.stdout.startswith("Usage: msprobe dump [-c msprobe.json] [--] COMMAND"))

    # ---- finding the shim --------------------------------------------------

    def layout(self, bindir, libdir):
        """A copy of msprobe in bindir and a stand-in shim in libdir."""
        root = os.path.join(self.dir, "inst")
        os.makedirs(os.path.join(root, bindir), exist_ok=True)
        exe = os.path.join(root, bindir, "msprobe")
        shutil.copy(BIN, exe)
        lib = None
        if libdir:
            os.makedirs(os.path.join(root, libdir), exist_ok=True)
            lib = os.path.join(root, libdir, "libmsprobe_preload.so")
            shutil.copy(SHIM, lib)
        return exe, lib

    def test_shim_found_beside_the_executable(self):
        layouts = [("bin", "lib"), ("bin", "lib64"), ("src/cli", "src/dump")]
        if platform.machine() == "x86_64":
            layouts.append(("bin", "lib/x86_64-linux-gnu"))
        for bindir, libdir in layouts:
            with self.subTest(libdir=libdir):
                exe, lib = self.layout(bindir, libdir)
                r = self.run_dump(["-c", "good.json", "--", "sh", "-c", SHOW], exe=exe,
                                  env=self.env(MSPROBE_PRELOAD_LIB=None))
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assertEqual(r.stdout.split("|")[0], lib)
                shutil.rmtree(os.path.join(self.dir, "inst"))

    def test_shim_not_found_is_an_error_naming_the_variable(self):
        exe, _ = self.layout("bin", None)
        r = self.run_dump(["-c", "good.json", "--", "touch", "marker"], exe=exe,
                          env=self.env(MSPROBE_PRELOAD_LIB=None))
        self.assertNotRun(r, f"msprobe: dump: libmsprobe_preload.so not found beside "
                             f"{self.dir}/inst/bin (looked in ../lib, ../lib64, "
                             "../lib/<multiarch> and ../dump); set MSPROBE_PRELOAD_LIB to its "
                             "path\n")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out")))  # dump_path not made
        r = self.run_dump(["-c", "good.json", "--", "touch", "marker"],
                          env=self.env(MSPROBE_PRELOAD_LIB="/nonexistent/libx.so"))
        self.assertNotRun(r, "msprobe: dump: MSPROBE_PRELOAD_LIB=/nonexistent/libx.so: No such "
                             "file or directory\n")

    def test_shim_path_with_a_colon_is_refused(self):
        shutil.copy(SHIM, os.path.join(self.dir, "a:b.so"))
        r = self.run_dump(["-c", "good.json", "--", "touch", "marker"],
                          env=self.env(MSPROBE_PRELOAD_LIB=os.path.join(self.dir, "a:b.so")))
        self.assertNotRun(r, f"msprobe: dump: MSPROBE_PRELOAD_LIB={self.dir}/a:b.so: cannot be "
                             "preloaded (the path may not contain spaces or colons)\n")


REAL_SHIM = os.environ.get("MSPROBE_PRELOAD_LIB", "")


@unittest.skipUnless(REAL_SHIM and os.path.exists(REAL_SHIM), "the shim is not built")
@unittest.skipIf(sanitized_build(), "an ASan-built shim cannot be preloaded into sh or python")
class WithTheRealShim(LauncherCase):
    def test_build_tree_shim_is_found_beside_msprobe(self):
        r = self.run_dump(["-c", "good.json", "--", "sh", "-c", SHOW],
                          env=self.env(MSPROBE_PRELOAD_LIB=None))
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(r.stdout, f"{os.path.realpath(REAL_SHIM)}|{self.dir}/good.json")

    def test_python_runs_and_keeps_its_exit_status(self):
        r = self.run_dump(["-c", "good.json", "--", "/usr/bin/python3", "-c",
                           "import sys; print('ran'); sys.exit(3)"],
                          env=self.env(MSPROBE_PRELOAD_LIB=REAL_SHIM))
        self.assertEqual((r.returncode, r.stdout), (3, "ran\n"), r.stderr)


if __name__ == "__main__":
    unittest.main()
