"""The reader helper runs with glibc's malloc asked for transparent huge
pages (issue 42): GLIBC_TUNABLES in its environment gains
glibc.malloc.hugetlb=1 after any tunables the user set, and a hugetlb the
user set is kept as it is. A wrapper named by MSPROBE_CATALOGUE_HELPER logs
the GLIBC_TUNABLES it was started with, then runs the real helper, for a
helper per file (MSPROBE_READER_SERVER=0) and for the reader server; `msprobe
ls` must still list the records written here with h5py."""
import os
import shutil
import stat
import subprocess
import tempfile
import unittest

import numpy as np

from msp_h5dump import write_dump

BIN = os.environ["MSPROBE_BIN"]
REAL = os.path.join(os.path.dirname(BIN), "msprobe-catalogue")
NAMES = ["Functional.relu.0.forward", "Tensor.add.0.forward"]


class HelperEnvironment(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-helper-env-")
        self.dump = os.path.join(self.work, "dump.h5")
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        write_dump(self.dump, [(n, i, {"input.0": x, "output.0": x}) for i, n in enumerate(NAMES)])
        self.log = os.path.join(self.work, "tunables.log")
        self.wrapper = os.path.join(self.work, "helper.sh")
        with open(self.wrapper, "w") as f:
            f.write('#!/bin/sh\nprintf "%%s\\n" "${GLIBC_TUNABLES-(unset)}" >> "%s"\nexec "%s" "$@"\n'
                    % (self.log, REAL))
        os.chmod(self.wrapper, stat.S_IRWXU)

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def tunables_seen(self, server, user):
        env = dict(os.environ, MSPROBE_CATALOGUE_HELPER=self.wrapper,
                   MSPROBE_READER_SERVER="1" if server else "0")
        env.pop("MSPROBE_READER_INPROC", None)
        env.pop("GLIBC_TUNABLES", None)
        if user is not None:
            env["GLIBC_TUNABLES"] = user
        if os.path.exists(self.log):
            os.unlink(self.log)
        p = subprocess.run([BIN, "ls", self.dump], capture_output=True, text=True, timeout=120,
                           env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for n in NAMES:
            self.assertIn(n, p.stdout)
        with open(self.log) as f:
            return set(f.read().split())

    def test_hugetlb_is_added_to_the_users_tunables(self):
        for server in (False, True):
            with self.subTest(server=server):
                self.assertEqual(self.tunables_seen(server, None), {"glibc.malloc.hugetlb=1"})
                self.assertEqual(self.tunables_seen(server, "glibc.malloc.tcache_count=0"),
                                 {"glibc.malloc.tcache_count=0:glibc.malloc.hugetlb=1"})

    def test_a_hugetlb_the_user_set_is_kept(self):
        for server in (False, True):
            with self.subTest(server=server):
                self.assertEqual(self.tunables_seen(server, "glibc.malloc.hugetlb=0"),
                                 {"glibc.malloc.hugetlb=0"})


class ServerCannotStartChildren(unittest.TestCase):
    """A reader server that cannot start the child for a file (here: no
    descriptors left for the child's answer and the pipe that says it ended,
    as where memfd_create is refused) says nothing of the file: it is read by
    a helper of its own. Before, the file was not read ("cannot start the
    reader helper")."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-helper-nofd-")
        self.dump = os.path.join(self.work, "dump.h5")
        x = np.arange(6, dtype=np.float32)
        write_dump(self.dump, [(n, i, {"input.0": x, "output.0": x}) for i, n in enumerate(NAMES)])
        self.wrapper = os.path.join(self.work, "helper.sh")
        with open(self.wrapper, "w") as f:
            f.write('#!/bin/sh\nif [ "$1" = --serve ]; then ulimit -n 4; fi\nexec "%s" "$@"\n' % REAL)
        os.chmod(self.wrapper, stat.S_IRWXU)

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_the_file_is_read_by_a_helper_of_its_own(self):
        env = dict(os.environ, MSPROBE_CATALOGUE_HELPER=self.wrapper, MSPROBE_READER_SERVER="1")
        env.pop("MSPROBE_READER_INPROC", None)
        p = subprocess.run([BIN, "ls", self.dump], capture_output=True, text=True, timeout=120,
                           env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for n in NAMES:
            self.assertIn(n, p.stdout)


if __name__ == "__main__":
    unittest.main()
