"""MSPROBE_SYNC=1: every step's dump file is put on disk (fdatasync) once,
after it is complete (under its part name, .dump.h5.<pid>.part, before it is
linked to dump.h5), then the directories holding its new name (fsync), and its tensor data was handed to the disk as it was
written (sync_file_range over each dataset's bytes). Seen from outside the
shim by a spy library preloaded beside it; offsets come from h5py. The values
are the same as without the variable, and without it nothing is synced."""
import os
import re
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

SPY = sys.argv.pop(1) if len(sys.argv) > 1 else ""


def read_spy(path):
    calls = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                what, p, size, off, n = line.rstrip("\n").split("\t")
                calls.append((what, p, int(size), int(off), int(n)))
    return calls


def data_ranges(path):
    """[(offset, nbytes)] of every dataset holding data, read with h5py."""
    import h5py
    out = []
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and name not in ("index", "attrs", "defaults") \
                    and obj.shape is not None \
                    and obj.size > 0:
                off = obj.id.get_offset()
                out.append((off, obj.id.get_storage_size()))
        f.visititems(visit)
    return out


class Durable(dt.ShimCase):
    def run_dump(self, sync, tag):
        cfg = self.write_config(dt.config("./" + tag, steps="0|2"), tag + ".json")
        log = self.path(tag + ".spy")
        env = {"LD_PRELOAD": SPY + ":" + dt.PRELOAD, "SYNC_SPY_LOG": log}
        if sync is not None:
            env["MSPROBE_SYNC"] = sync
        p = self.train(["--steps", "3", "--print-losses"], cfg, env_extra=env)
        self.assertNotIn("msprobe:", p.stderr)
        files = dt.dump_files(self.path(tag))
        self.assertEqual(sorted(files), [(0, 0), (2, 0)])
        return p, files, read_spy(log)

    def test_each_step_file_synced_once_when_complete(self):
        if not os.path.exists(SPY):
            self.skipTest("no spy library given")
        p, files, calls = self.run_dump("1", "durable")
        finals = [os.path.realpath(f) for f in files.values()]
        # the file is written and synced under its part name, in its rank dir
        part_re = re.compile(r"^\.dump\.h5\.\d+\.part$")
        syncs = [c for c in calls if c[0] == "fdatasync" and part_re.match(os.path.basename(c[1]))]
        real = {}
        for c in syncs:
            final = os.path.join(os.path.dirname(c[1]), "dump.h5")
            self.assertIn(final, finals, c[1])
            self.assertFalse(os.path.exists(c[1]), "part file left behind: " + c[1])
            real[c[1]] = final
        self.assertEqual(sorted(real.values()), sorted(finals))
        for _, path, size, _, _ in syncs:
            # synced after HDF5 closed it: the file had its final size then
            self.assertEqual(size, os.path.getsize(real[path]), path)
        # the new names too: rank dir (the file's entry), step dir, dump root,
        # each after the file's own fdatasync
        root = os.path.realpath(self.path("durable"))
        synced_dirs = [c[1] for c in calls if c[0] == "fsync" and c[1].startswith(root)]
        for path in real:
            rank_dir = os.path.dirname(path)
            step_dir = os.path.dirname(rank_dir)
            after = [c[1] for c in calls[[c[:2] for c in calls].index(("fdatasync", path)):]
                     if c[0] == "fsync"]
            for d in (rank_dir, step_dir, root):
                self.assertIn(d, after, "%s not synced after %s" % (d, path))
        self.assertTrue(set(synced_dirs) <= {root} | {os.path.dirname(p) for p in real} |
                        {os.path.dirname(os.path.dirname(p)) for p in real}, synced_dirs)
        for path in real:
            ranges = [(c[3], c[4]) for c in calls if c[0] == "sync_file_range" and c[1] == path]
            tensors = data_ranges(real[path])
            self.assertGreater(len(tensors), 20)
            for off, n in tensors:
                self.assertTrue(any(o <= off and off + n <= o + m for o, m in ranges),
                                "%s: data at %d (+%d) was never handed to the disk" % (path, off, n))

        # Same training, same values as a run without the variable, which
        # syncs nothing.
        q, plain_files, plain_calls = self.run_dump(None, "plain")
        self.assertEqual(dt.losses(p.stdout), dt.losses(q.stdout))
        plain_real = {os.path.realpath(f) for f in plain_files.values()}
        self.assertEqual([c for c in plain_calls if c[1] in plain_real], [])
        for key in files:
            a, _ = dt.read_dump(files[key])
            b, _ = dt.read_dump(plain_files[key])
            self.assertEqual(sorted(a), sorted(b))
            for rec in a:
                for role, v in a[rec].items():
                    if role in ("attrs", "tattrs") or v is None:
                        continue
                    self.assertTrue(np.array_equal(np.asarray(v), np.asarray(b[rec][role])),
                                    "%s %s differs" % (rec, role))

    def test_zero_means_off(self):
        if not os.path.exists(SPY):
            self.skipTest("no spy library given")
        _, files, calls = self.run_dump("0", "zero")
        real = {os.path.realpath(f) for f in files.values()}
        self.assertEqual([c for c in calls if c[1] in real], [])


if __name__ == "__main__":
    unittest.main()
