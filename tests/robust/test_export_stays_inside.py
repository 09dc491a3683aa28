"""msprobe export writes nothing outside -o, whatever -o already holds (issue
37, item 3): a stepN, rankR or dump_tensor_data that is a symbolic link (to a
directory outside) or not a directory is refused with an error naming it, and
nothing lands outside; a link or a hard link already at a file's name
(dump.json, stack.json, construct.json, a .pt or .npy) is replaced by the new
file, its target left as it was. The exported tensors are checked against the
dump read with h5py; -o itself may be a link (the user's choice)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
import msp_h5dump as D  # noqa: E402

BIN = os.environ["MSPROBE_BIN"]
REC = "Torch.mul.0.forward"
SECRET = b"the user's own file\n"


def export(*args):
    return subprocess.run([BIN, "export", *args], capture_output=True, text=True, timeout=120)


class ExportStaysInside(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="msp-export-")
        rng = np.random.default_rng(37)
        self.dump = os.path.join(self.tmp, "dump.h5")
        D.write_dump(self.dump, [(REC, 0, {"input.0": rng.standard_normal(6).astype(np.float32),
                                           "output.0": rng.standard_normal(6).astype(np.float32)})])
        with h5py.File(self.dump, "r") as f:
            self.want = {role: ds[()] for role, ds in f[REC].items()}
        self.out = os.path.join(self.tmp, "out")
        self.rank = os.path.join(self.out, "step0", "rank0")
        self.outside = os.path.join(self.tmp, "outside")
        os.makedirs(self.outside)
        self.victim = os.path.join(self.outside, "victim")
        with open(self.victim, "wb") as f:
            f.write(SECRET)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def assert_outside_untouched(self):
        self.assertEqual(os.listdir(self.outside), ["victim"])
        with open(self.victim, "rb") as f:
            self.assertEqual(f.read(), SECRET)

    def assert_exported(self, rank, ext):
        """rank's files are regular files holding the dump: dump.json names
        each tensor file, and each holds the values h5py reads."""
        for name in ("dump.json", "stack.json", "construct.json"):
            self.assertFalse(os.path.islink(os.path.join(rank, name)), name)
        with open(os.path.join(rank, "dump.json")) as f:
            rec = json.load(f)["data"][REC]
        for role, key in (("input.0", "input_args"), ("output.0", "output")):
            path = os.path.join(rank, "dump_tensor_data", rec[key][0]["data_name"])
            self.assertTrue(path.endswith(ext) and not os.path.islink(path), path)
            if ext == ".npy":
                got = np.load(path)
            else:
                import torch
                got = torch.load(path).numpy()
            np.testing.assert_array_equal(got, self.want[role])

    def test_a_linked_directory_under_o_is_refused_and_nothing_lands_outside(self):
        for level in ("step0", "step0/rank0", "step0/rank0/dump_tensor_data"):
            for npy in (False, True):
                with self.subTest(level=level, npy=npy):
                    shutil.rmtree(self.out, ignore_errors=True)
                    link = os.path.join(self.out, level)
                    os.makedirs(os.path.dirname(link), exist_ok=True)
                    os.symlink(self.outside, link)
                    p = export("-o", self.out, *(["--npy"] if npy else []), self.dump)
                    self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                    self.assertIn("export: %s is a symbolic link: refused" % link, p.stderr)
                    self.assert_outside_untouched()

    def test_a_file_where_a_directory_goes_is_refused(self):
        os.makedirs(self.rank)
        with open(os.path.join(self.rank, "dump_tensor_data"), "w") as f:
            f.write("not a directory\n")
        p = export("-o", self.out, self.dump)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("%s/dump_tensor_data exists and is not a directory" % self.rank, p.stderr)

    def test_links_and_hard_links_at_file_names_are_replaced_not_written_through(self):
        for ext, flag in ((".pt", []), (".npy", ["--npy"])):
            for how in ("symlink", "hardlink"):
                with self.subTest(ext=ext, link=how):
                    shutil.rmtree(self.out, ignore_errors=True)
                    data = os.path.join(self.rank, "dump_tensor_data")
                    os.makedirs(data)
                    names = [os.path.join(self.rank, n)
                             for n in ("dump.json", "stack.json", "construct.json")]
                    names += [os.path.join(data, "%s.%s.0%s" % (REC, io, ext))
                              for io in ("input", "output")]
                    for n in names:
                        (os.symlink if how == "symlink" else os.link)(self.victim, n)
                    p = export("-o", self.out, *flag, self.dump)
                    self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                    self.assert_outside_untouched()
                    for n in names:
                        self.assertFalse(os.path.islink(n), n)
                        self.assertNotEqual(os.stat(n).st_ino, os.stat(self.victim).st_ino, n)
                    self.assert_exported(self.rank, ext)

    def test_o_itself_may_be_a_link(self):
        real = os.path.join(self.tmp, "real_out")
        os.makedirs(real)
        os.symlink(real, self.out)
        p = export("-o", self.out, "--npy", self.dump)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assert_exported(os.path.join(real, "step0", "rank0"), ".npy")


if __name__ == "__main__":
    unittest.main()
