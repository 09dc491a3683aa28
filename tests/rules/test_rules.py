"""The rule checkers (scripts/callgraph.py, scripts/checksrc.py) on trees made
here, each holding one known offence: a checker must name it and exit 1, and
pass the same tree without it. The checkers' runs on the real tree are the
tests rules_module_order, rules_file_and_function_sizes,
rules_comment_references and rules_clang_format."""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

SRC = os.environ.get("MSPROBE_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CALLGRAPH = os.path.join(SRC, "scripts", "callgraph.py")
CHECKSRC = os.path.join(SRC, "scripts", "checksrc.py")
LAYERS = os.path.join(SRC, "scripts", "layers.txt")


def run(*args):
    p = subprocess.run([sys.executable] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class FakeBuild:
    """A build folder with objects compiled here: {"src/common/a.c": C text}
    becomes build/src/common/a.c and its object where CMake puts it
    (src/common/CMakeFiles/t.dir/a.c.o); headers are written beside."""

    def __init__(self, test, files):
        self.test = test
        self.dir = tempfile.mkdtemp(prefix="msp_rules_")
        test.addCleanup(shutil.rmtree, self.dir)
        for path, text in files.items():
            write(os.path.join(self.dir, path), textwrap.dedent(text))
        for path in files:
            if not path.endswith(".c"):
                continue
            folder, name = os.path.split(path)
            obj = os.path.join(self.dir, folder, "CMakeFiles", "t.dir", name + ".o")
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            subprocess.run(["gcc", "-c", "-o", obj, os.path.join(self.dir, path)], check=True)

    def check(self, layers=None):
        return run(CALLGRAPH, self.dir, "--layers", layers or layers_file(self.test, ""))


def layers_file(test, extra):
    """The real declaration of modules, with the given layer and allow lines
    instead of the real shim layers."""
    with open(LAYERS) as f:
        modules = [l for l in f if l.startswith("module ")]
    d = tempfile.mkdtemp(prefix="msp_layers_")
    test.addCleanup(shutil.rmtree, d)
    path = os.path.join(d, "layers.txt")
    write(path, "".join(modules) + textwrap.dedent(extra))
    return path


class ModuleOrder(unittest.TestCase):
    def test_a_call_down_the_order_passes(self):
        b = FakeBuild(self, {
            "src/common/a.c": "int low(void) { return 1; }\n",
            "src/format/b.c": "int low(void);\nint mid(void) { return low(); }\n",
            "src/compare/c.c": "int mid(void);\nint top(void) { return mid(); }\n",
        })
        rc, out = b.check()
        self.assertEqual(rc, 0, out)
        self.assertIn("3 files, 2 edges, 0 loop(s), 0 header circle(s)", out)

    def test_a_call_up_names_file_symbol_and_modules(self):
        b = FakeBuild(self, {
            "src/common/a.c": "int up(void);\nint low(void) { return up(); }\n",
            "src/format/b.c": "int up(void) { return 2; }\n",
        })
        rc, out = b.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("upward call: src/common/a.c (module common) -> src/format/b.c "
                      "(module format), which common does not use: up", out)

    def test_peers_do_not_call_each_other(self):
        b = FakeBuild(self, {
            "src/configcheck/a.c": "int cmp_fn(void);\nint cc(void) { return cmp_fn(); }\n",
            "src/compare/b.c": "int cmp_fn(void) { return 2; }\n",
        })
        rc, out = b.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("src/configcheck/a.c (module configcheck) -> src/compare/b.c "
                      "(module compare)", out)

    def test_folders_still_to_come_are_in_the_order(self):
        # merge may use report, and both compare; report may not use merge
        ok = FakeBuild(self, {
            "src/compare/e.c": "int engine(void) { return 1; }\n",
            "src/report/r.c": "int engine(void);\nint book(void) { return engine(); }\n",
            "src/merge/m.c": "int book(void);\nint merge(void) { return book(); }\n",
            "src/precheck/p.c": "int engine(void);\nint pre(void) { return engine(); }\n",
            "src/cli/c.c": "int merge(void), pre(void);\nint cli(void) { return merge() + pre(); }\n",
        })
        rc, out = ok.check()
        self.assertEqual(rc, 0, out)
        bad = FakeBuild(self, {
            "src/merge/m.c": "int merge(void) { return 1; }\n",
            "src/report/r.c": "int merge(void);\nint book(void) { return merge(); }\n",
            "src/precheck/p.c": "int book(void);\nint pre(void) { return book(); }\n",
        })
        rc, out = bad.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("src/report/r.c (module report) -> src/merge/m.c (module merge)", out)
        self.assertIn("src/precheck/p.c (module precheck) -> src/report/r.c (module report)", out)

    def test_a_loop_of_files(self):
        b = FakeBuild(self, {
            "src/common/a.c": "int b_fn(void);\nint a_fn(void) { return b_fn(); }\n",
            "src/common/b.c": "int a_fn(void);\nint b_fn(void) { return a_fn(); }\n",
        })
        rc, out = b.check()
        self.assertEqual(rc, 1, out)
        self.assertIn("loop: src/common/a.c src/common/b.c", out)
        self.assertIn("src/common/a.c -> src/common/b.c: b_fn", out)
        rc, out = b.check(layers_file(self, "allow loop: b.c a.c\n"))
        self.assertEqual(rc, 0, out)
        self.assertIn("allowed", out)
        rc, out = b.check(layers_file(self, "allow loop: a.c c.c\n"))
        self.assertEqual(rc, 1, out)
        self.assertIn("allows a loop of a.c c.c, which there is not", out)

    def test_a_header_circle(self):
        # a.c calls b.c; b.c includes a.h (a.c's header) for a type only
        files = {
            "src/common/a.h": "struct a_state { int n; };\n",
            "src/common/a.c": '#include "a.h"\nint b_fn(void);\nint a_fn(void) { return b_fn(); }\n',
            "src/common/b.c": '#include "a.h"\nint b_fn(void) { struct a_state s = {2}; return s.n; }\n',
        }
        rc, out = FakeBuild(self, files).check()
        self.assertEqual(rc, 1, out)
        self.assertIn("header circle: src/common/a.c src/common/b.c", out)
        self.assertIn("src/common/b.c -> src/common/a.c: includes src/common/a.h", out)
        # the type in a header named after neither file: no circle
        files["src/common/state.h"] = files.pop("src/common/a.h")
        for f in ("src/common/a.c", "src/common/b.c"):
            files[f] = files[f].replace('"a.h"', '"state.h"')
        rc, out = FakeBuild(self, files).check()
        self.assertEqual(rc, 0, out)

    def test_allowed_circle_and_stale_allow(self):
        files = {
            "src/common/a.h": "struct a_state { int n; };\n",
            "src/common/a.c": '#include "a.h"\nint b_fn(void);\nint a_fn(void) { return b_fn(); }\n',
            "src/common/b.c": '#include "a.h"\nint b_fn(void) { struct a_state s = {2}; return s.n; }\n',
        }
        lay = layers_file(self, "allow circle: a.c b.c\n")
        rc, out = FakeBuild(self, files).check(lay)
        self.assertEqual(rc, 0, out)
        self.assertIn("allowed", out)
        lay = layers_file(self, "allow circle: x.c y.c\n")
        rc, out = FakeBuild(self, {"src/common/a.c": "int a(void) { return 0; }\n"}).check(lay)
        self.assertEqual(rc, 1, out)
        self.assertIn("allows a header circle of x.c y.c, which there is not", out)

    def test_shim_layers(self):
        lay = layers_file(self, """\
            layer low:  w.c
            layer high: x.c < y.c
            """)
        ok = FakeBuild(self, {
            "src/dump/w.c": "int w(void) { return 1; }\n",
            "src/dump/x.c": "int w(void);\nint x(void) { return w(); }\n",
            "src/dump/y.c": "int x(void);\nint y(void) { return x(); }\n",
        })
        rc, out = ok.check(lay)
        self.assertEqual(rc, 0, out)
        bad = FakeBuild(self, {
            "src/dump/w.c": "int y(void);\nint w(void) { return y(); }\n",
            "src/dump/x.c": "int y(void);\nint x(void) { return y(); }\n",
            "src/dump/y.c": "int y(void) { return 1; }\n",
            "src/dump/z.c": "int z(void) { return 1; }\n",
        })
        rc, out = bad.check(lay)
        self.assertEqual(rc, 1, out)
        self.assertIn("upward call: src/dump/w.c (layer low) -> src/dump/y.c (layer high", out)
        self.assertIn("upward call: src/dump/x.c (layer high) -> src/dump/y.c (layer high; "
                      "layer high, against its '<' order): y", out)
        self.assertIn("src/dump/z.c is in no layer", out)


class Sizes(unittest.TestCase):
    def tree(self, files):
        root = tempfile.mkdtemp(prefix="msp_sizes_")
        self.addCleanup(shutil.rmtree, root)
        for path, text in files.items():
            write(os.path.join(root, path), text)
        return root

    def check(self, root):
        return run(CHECKSRC, "sizes", "--root", root, "--no-allowlist")

    @staticmethod
    def c_function(name, lines):
        # signature, '{', body, '}': `lines` lines in all
        return f"int {name}(void)\n{{\n" + "    x++;\n" * (lines - 3) + "}\n"

    def test_limits_are_800_and_150_lines(self):
        root = self.tree({
            "src/common/ok.c": "int x;\n" + self.c_function("fits", 150) + "/**/\n" * 649,
            "src/common/long.c": "/**/\n" * 801,
            "src/common/fn.c": "int x;\n" + self.c_function("too_long", 151),
            "scripts/tool.py": "def long_one():\n" + "    pass\n" * 150,
        })
        with open(os.path.join(root, "src/common/ok.c")) as f:
            self.assertEqual(f.read().count("\n"), 800)
        rc, out = self.check(root)
        self.assertEqual(rc, 1, out)
        self.assertIn("src/common/long.c: 801 lines (over 800)", out)
        self.assertIn("src/common/fn.c:2: function too_long: 151 lines (over 150)", out)
        self.assertIn("scripts/tool.py:1: function long_one: 151 lines (over 150)", out)
        self.assertNotIn("ok.c", out)
        self.assertIn("sizes: 3 offender(s)", out)

    def test_generated_fixtures_and_third_party_are_exempt(self):
        root = self.tree({
            "src/dump/table.c": "/* Generated by gen.py from torch. */\n" + "/**/\n" * 900,
            "fixtures/big.c": "/**/\n" * 900,
            "src/dump/dlpack.h": "/**/\n" * 900,
            "man/msprobe-x.1": ".\\\"\n" * 900,
        })
        rc, out = self.check(root)
        self.assertEqual(rc, 0, out)

    def test_allowlist_entries_and_stale_ones(self):
        root = self.tree({"src/common/long.c": "/**/\n" * 801,
                          "src/common/fn.c": "int x;\n" + self.c_function("too_long", 151)})
        rc, out = run(CHECKSRC, "sizes", "--root", root, "--no-allowlist",
                      "--allow", "long.c", "--allow", "fn.c:too_long")
        self.assertEqual(rc, 0, out)
        self.assertIn("allowed: long.c", out)
        self.assertIn("allowed: fn.c: function too_long", out)
        rc, out = run(CHECKSRC, "sizes", "--root", root, "--no-allowlist",
                      "--allow", "long.c", "--allow", "fn.c:too_long", "--allow", "fn.c:gone")
        self.assertEqual(rc, 1, out)
        self.assertIn("stale allowlist entry in scripts/checksrc.py: fn.c: function gone is "
                      "no longer over the limit", out)


class References(unittest.TestCase):
    def test_missing_files_and_man_pages(self):
        root = tempfile.mkdtemp(prefix="msp_refs_")
        self.addCleanup(shutil.rmtree, root)
        write(os.path.join(root, "man/msprobe-real.1"), ".TH\n")
        write(os.path.join(root, "src/x/there.c"), "int y;\n")
        write(os.path.join(root, "src/x/a.c"), textwrap.dedent("""\
            /* there.c and src/x/there.c and x/there.c exist; <stdio.h> and
             * torch's torch/__init__.py are not ours; msprobe-real(1) is in man/.
             * gone.c does not exist, nor src/x/gone.h, DESIGN.md or
             * msprobe-unreal(5); see https://example.org/a/missing.c. */
            static const char *s = "string.c is in a string, not a comment";
            // scripts/tool.py is not there either
            """))
        write(os.path.join(root, "src/x/b.py"), '"""Names b_gone.py."""\n# and c_gone.sh\n')
        rc, out = run(CHECKSRC, "refs", "--root", root, "--no-allowlist")
        self.assertEqual(rc, 1, out)
        for ref in ("src/x/a.c:3: gone.c", "src/x/a.c:3: src/x/gone.h", "src/x/a.c:3: DESIGN.md",
                    "src/x/a.c:4: man page msprobe-unreal(5)", "src/x/a.c:6: scripts/tool.py",
                    "src/x/b.py:1: b_gone.py", "src/x/b.py:2: c_gone.sh"):
            self.assertIn(ref, out)
        for fine in ("there.c names", "stdio.h", "__init__.py", "msprobe-real", "missing.c",
                     "string.c"):
            self.assertNotIn(fine, out)
        self.assertIn("refs: 7 offender(s)", out)
        # an allowlist entry takes one out; one that matches nothing fails
        rc, out = run(CHECKSRC, "refs", "--root", root, "--no-allowlist",
                      "--allow-ref", "a.c:gone.c", "--allow-ref", "b.py:none.py")
        self.assertIn("allowed: a.c: gone.c", out)
        self.assertIn("stale allowlist entry in scripts/checksrc.py: b.py no longer names "
                      "none.py", out)
        self.assertIn("refs: 7 offender(s)", out)


class Format(unittest.TestCase):
    def test_fails_on_the_files_it_would_change(self):
        if not shutil.which("clang-format"):
            self.skipTest("clang-format is not installed")
        root = tempfile.mkdtemp(prefix="msp_format_")
        self.addCleanup(shutil.rmtree, root)
        shutil.copy(os.path.join(SRC, ".clang-format"), root)
        write(os.path.join(root, "src/x/kept.c"), "int f(int a)\n{\n    return a + 1;\n}\n")
        write(os.path.join(root, "src/x/changed.c"), "int g(int a) {return a+1;}\n")
        rc, out = run(CHECKSRC, "format", "--root", root)
        self.assertEqual(rc, 1, out)
        self.assertIn("src/x/changed.c: clang-format would change it", out)
        self.assertNotIn("kept.c", out)
        self.assertIn("format: 1 of 2 C files would change", out)


if __name__ == "__main__":
    unittest.main()
