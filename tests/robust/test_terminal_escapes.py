"""Names and values from a file never reach the terminal raw (issue 26, item
6): a record name holding ESC ] 0 ; ... BEL (retitles a terminal), an
attribute value holding ESC [ 2 J (clears it) and a C1 CSI, in an HDF5 dump
(written with h5py) and in a msprobe dump.json (written with json), go
through `msprobe ls`, `msprobe compare` and an error message: no ESC, BEL or
C1 byte comes out on stdout or stderr, and each is spelled out as \\xNN."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
import msp_h5dump  # noqa: E402
import msprobe_layout as ML  # noqa: E402

BIN = os.environ["MSPROBE_BIN"]
TITLE = "Functional.relu\x1b]0;pwned\x07.0.forward"
CLEAR = "mean\x1b[2J\u009b31m"
FORBIDDEN = (b"\x1b", b"\x07", "\u009b".encode())


def run(*args):
    p = subprocess.run([BIN, *args], capture_output=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


class Escapes(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def assert_clean(self, out, err):
        for b in FORBIDDEN:
            self.assertNotIn(b, out)
            self.assertNotIn(b, err)

    def h5(self, name, seed):
        """The same input on every side, an output of the seed's: on two
        seeds the record introduces the error, and compare names it."""
        path = os.path.join(self.d, name, "step0", "rank0", "dump.h5")
        x = np.linspace(-1, 1, 8).astype(np.float32)
        y = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
        msp_h5dump.write_dump(path, [(TITLE, 0, {"input.0": x, "output.0": y})], index=True)
        with h5py.File(path, "r+") as f:
            f[TITLE].attrs["reduction"] = CLEAR
        return path

    def test_ls_of_an_hdf5_dump_spells_escapes_out(self):
        path = self.h5("a", 1)
        rc, out, err = run("ls", path)
        self.assertEqual(rc, 0, err)
        self.assert_clean(out, err)
        self.assertIn(b"Functional.relu\\x1b]0;pwned\\x07.0.forward", out)
        self.assertIn(b"mean\\x1b[2J\\xc2\\x9b31m", out)

    def test_compare_stdout_and_warnings_spell_escapes_out(self):
        a, b = self.h5("a", 1), self.h5("b", 2)
        rc, out, err = run("compare", "-b", os.path.dirname(os.path.dirname(os.path.dirname(a))),
                           "-c", os.path.dirname(os.path.dirname(os.path.dirname(b))),
                           "-o", os.path.join(self.d, "out"))
        self.assertEqual(rc, 1, err)  # random data: the record fails, and is named
        self.assert_clean(out, err)
        self.assertIn(b"Functional.relu\\x1b]0;pwned\\x07.0.forward", out)

    def ms(self):
        import torch
        x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        rdir = ML.write(os.path.join(self.d, "ms"), [(TITLE, {"input_args": [x], "output": [x]})])
        path = os.path.join(rdir, "dump.json")
        with open(path) as f:
            doc = json.load(f)
        doc["framework"] = "pytorch\x1b[2J"
        doc["data"][TITLE]["input_kwargs"] = {"reduction": {"type": "str", "value": CLEAR}}
        with open(path, "w") as f:
            json.dump(doc, f)
        return rdir

    def test_ls_of_a_msprobe_dump_json_spells_escapes_out(self):
        rdir = self.ms()
        rc, out, err = run("ls", rdir)
        self.assertEqual(rc, 0, err)
        self.assert_clean(out, err)
        self.assertIn(b"Functional.relu\\x1b]0;pwned\\x07.0.forward", out)
        self.assertIn(b"framework=pytorch\\x1b[2J", out)
        self.assertIn(b"mean\\x1b[2J\\xc2\\x9b31m", out)

    def test_error_naming_a_record_spells_escapes_out(self):
        rdir = self.ms()
        tdir = os.path.join(rdir, "dump_tensor_data")
        for n in os.listdir(tdir):
            os.unlink(os.path.join(tdir, n))
            os.mkfifo(os.path.join(tdir, n))  # each read is refused, naming the record
        rc, out, err = run("compare", "-b", rdir, "-c", rdir, "-o", os.path.join(self.d, "o"))
        self.assertNotEqual(rc, 0)
        self.assert_clean(out, err)
        self.assertIn(b"pwned", out + err)


class OneWritePerLine(unittest.TestCase):
    """Each "msprobe: " line reaches stderr in one write. mpirun forwards a
    process's stderr as it comes, and its own banner of MPI_Abort cut
    "msprobe: " from the rest of a line that came in three writes. stderr is
    here a SOCK_SEQPACKET socket: each write arrives as one packet."""

    def packets(self, *args):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with mine, theirs:
            p = subprocess.run([BIN, *args], stdout=subprocess.DEVNULL, stderr=theirs.fileno(),
                               timeout=60)
            theirs.close()
            got = []
            while True:
                b = mine.recv(1 << 16)
                if not b:
                    return p.returncode, got
                got.append(b)

    def test_an_error_naming_a_hostile_path_is_one_packet(self):
        bench = os.path.join(tempfile.gettempdir(), "no-such-dump-" + TITLE)
        rc, got = self.packets("compare", "-b", bench, "-c", bench, "-o", "/nonexistent/o")
        self.assertEqual(rc, 2, got)
        self.assertEqual(len(got), 1, got)
        self.assertTrue(got[0].startswith(b"msprobe: compare: cannot open bench dump '"), got)
        self.assertIn(b"Functional.relu\\x1b]0;pwned\\x07.0.forward", got[0])
        self.assertTrue(got[0].endswith(b"': No such file or directory\n"), got)

    def test_a_usage_error_is_one_packet(self):
        rc, got = self.packets("compare", "--no-such-option")
        self.assertEqual(rc, 2, got)
        self.assertEqual(got, [b"msprobe: compare: unknown option '--no-such-option' "
                               b"(try 'msprobe compare --help')\n"])
        # an option from a pasted command line: its escapes spelled out too
        rc, got = self.packets("compare", "--x\x1b]0;pwned\x07")
        self.assertEqual(rc, 2, got)
        self.assertEqual(got, [b"msprobe: compare: unknown option '--x\\x1b]0;pwned\\x07' "
                               b"(try 'msprobe compare --help')\n"])


if __name__ == "__main__":
    unittest.main()
