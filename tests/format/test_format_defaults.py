"""msp_dump_api_defaults (through the fmt_read_dump helper): the table
/defaults of msprobe-dump(5), THE DEFAULTS TABLE, read in this process
(MSPROBE_READER_INPROC=1) and through the contained reader helper (whose
answer carries the table over the pipe); a file written before the table
has no defaults and reads as before; a malformed table refuses the file
with an error that names the file and /defaults; byte-level mutants of a
file with the table (a fixed seed, mostly in its last pages, where h5py put
the table and its strings) never crash or hang the contained reader, the
one msprobe's commands use (libhdf5 itself can loop on a damaged global
heap, as it can for /attrs: msprobe-dump(5), READING UNTRUSTED FILES)."""
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

WRITE_SAMPLE = READ_DUMP = None
MODES = {"in process": {"MSPROBE_READER_INPROC": "1"}, "contained": {"MSPROBE_READER_INPROC": "0"}}


def read_dump(path, apis, env):
    return subprocess.run([READ_DUMP, path] + apis, capture_output=True, text=True,
                          errors="replace", env=dict(os.environ, **env), timeout=120)


def defaults_of(out):
    rows = []
    for line in out.splitlines():
        f = line.split("\t")
        if f[0] == "D":
            rows.append(tuple(f[1:]))
    return rows


def other_lines(out):
    return [l for l in out.splitlines() if not l.startswith("D\t")]


class DefaultsTable(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.old = os.path.join(cls.tmp.name, "old.h5")
        subprocess.run([WRITE_SAMPLE, cls.old], check=True)
        with h5py.File(cls.old, "r") as f:
            assert "defaults" not in f  # the writer adds the table only for the shim's APIs

    def copy_with(self, name, make):
        path = os.path.join(self.tmp.name, name)
        shutil.copy(self.old, path)
        with h5py.File(path, "a") as f:
            make(f)
        return path

    def test_a_file_without_the_table_has_no_defaults_and_reads_as_before(self):
        for mode, env in MODES.items():
            with self.subTest(mode=mode):
                p = read_dump(self.old, ["Functional.linear", "Functional.gelu"], env)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(defaults_of(p.stdout), [])

    def good(self):
        vstr = h5py.string_dtype("utf-8")
        rows = [("Functional.gelu", "approximate", "'none'"),
                ("Functional.gelu", "#1", "approximate"),
                ("Functional.layer_norm", "eps", "1e-05"), ("Functional.gelu", "#0", "input"),
                ("Functional.layer_norm", "#0", "input"), ("Functional.layer_norm", "#4", "eps"),
                ("Functional.layer_normX", "eps", "9")]

        def make(f):
            f.create_dataset("defaults", data=np.array(rows, dtype=[
                ("record", vstr), ("key", vstr), ("value", vstr)]))
        return rows, make

    def test_rows_of_the_api_asked_for_in_key_order_whatever_order_written(self):
        rows, make = self.good()
        path = self.copy_with("good.h5", make)
        before = read_dump(self.old, [], MODES["in process"]).stdout
        for mode, env in MODES.items():
            with self.subTest(mode=mode):
                p = read_dump(path, ["Functional.gelu", "Functional.layer_norm", "Torch.add"], env)
                self.assertEqual(p.returncode, 0, p.stderr)
                want = sorted((r for r in rows if r[0] in ("Functional.gelu",
                                                          "Functional.layer_norm")),
                              key=lambda r: (r[0] != "Functional.gelu", r[1].encode()))
                self.assertEqual(defaults_of(p.stdout), want)
                # the records, tensors and attributes are those of the file without it
                self.assertEqual(other_lines(p.stdout),
                                 other_lines(before.replace(self.old, path)))

    def malformed(self):
        vstr = h5py.string_dtype("utf-8")
        yield "ints", lambda f: f.create_dataset("defaults", data=np.arange(6))
        yield "no value column", lambda f: f.create_dataset("defaults", data=np.array(
            [("Functional.gelu", "#0")], dtype=[("record", vstr), ("key", vstr)]))
        yield "fixed-length strings", lambda f: f.create_dataset("defaults", data=np.array(
            [(b"Functional.gelu", b"#0", b"input")],
            dtype=[("record", "S20"), ("key", "S4"), ("value", "S8")]))
        yield "two-dimensional", lambda f: f.create_dataset("defaults", data=np.array(
            [[("a", "b", "c")] * 2] * 2, dtype=[("record", vstr), ("key", vstr),
                                                ("value", vstr)]))
        yield "a group", lambda f: f.create_group("defaults")

    def test_a_malformed_table_refuses_the_file_naming_file_and_table(self):
        for what, make in self.malformed():
            path = self.copy_with(what.replace(" ", "_") + ".h5", make)
            for mode, env in MODES.items():
                with self.subTest(what=what, mode=mode):
                    p = read_dump(path, ["Functional.gelu"], env)
                    self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                    self.assertIn(path, p.stderr)
                    self.assertIn("/defaults", p.stderr)
                    self.assertNotIn("Traceback", p.stderr)

    def test_mutants_of_a_file_with_the_table_never_crash_or_hang(self):
        _, make = self.good()
        with open(self.copy_with("seed.h5", make), "rb") as f:
            data = f.read()
        rng = random.Random(20261202)
        outcomes = {}
        env = dict(MODES["contained"], MSPROBE_READER_TIMEOUT="2")
        for i in range(80):
            b = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                p = (len(b) - 1 - rng.randrange(min(len(b), 4096)) if rng.random() < 0.7
                     else rng.randrange(len(b)))
                b[p] = rng.randrange(256) if rng.random() < 0.5 else b[p] ^ (1 << rng.randrange(8))
            path = os.path.join(self.tmp.name, "mutant%03d.h5" % i)
            with open(path, "wb") as f:
                f.write(bytes(b))
            p = read_dump(path, ["Functional.gelu", "Functional.layer_norm"], env)
            self.assertIn(p.returncode, (0, 1, 2), "%s: %s" % (path, p.stderr))
            if p.returncode == 2:
                self.assertIn(path, p.stderr)
            outcomes[p.returncode] = outcomes.get(p.returncode, 0) + 1
        self.assertGreater(outcomes[2], 0)  # the mutants reached the tables
        print("defaults mutants: %s" % outcomes)


if __name__ == "__main__":
    READ_DUMP = sys.argv.pop(2)
    WRITE_SAMPLE = sys.argv.pop(1)
    unittest.main()
