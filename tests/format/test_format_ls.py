"""msprobe ls: the listing of our sample dump (values against numpy), a file
written by h5py alone, dump roots in numeric step/rank order, and bad input
(exit 2, "msprobe: " message naming the path on stderr)."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fmt_expect as X  # noqa: E402
import fmt_handmade as H  # noqa: E402

MSPROBE = os.environ.get("MSPROBE_BIN")
WRITE_SAMPLE = None


def ls(*args):
    return subprocess.run([MSPROBE, "ls", *args], capture_output=True, text=True, timeout=120)


def shape_text(shape):
    return "[" + ", ".join(str(d) for d in shape) + "]"


def tensor_lines(out):
    """{record: {role: line fields}} from an ls listing."""
    recs, cur = {}, None
    for line in out.splitlines():
        if line.startswith("    ") and cur is not None:
            f = line.split()
            if len(f) >= 2 and f[1] == "=":
                continue  # non-tensor argument
            recs[cur][f[0]] = line
        elif line.startswith("  "):
            cur = line.split()[0]
            recs[cur] = {}
    return recs


class LsCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.sample = os.path.join(cls.tmp.name, "dump.h5")
        subprocess.run([WRITE_SAMPLE, cls.sample], check=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_help_goes_to_stdout_with_exit_0(self):
        p = ls("--help")
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertTrue(p.stdout.startswith("Usage: msprobe ls"))

    def test_sample_header_records_in_order_and_tensor_statistics(self):
        self.check_sample(self.sample, "tensor")

    def test_statistics_sample_with_tensors_in_its_index(self):
        # the same records in a statistics dump: the tensors with data in
        # /index, the rest in /records and /stats, merged into one catalogue
        # (/index's records in the writer's order, not by name: 7eaa3b8 read
        # them so and refused the file, "record ... is listed twice")
        path = os.path.join(self.tmp.name, "stats.h5")
        subprocess.run([WRITE_SAMPLE, "--statistics", path], check=True)
        with h5py.File(path, "r") as f:
            self.assertIn("index", f)
            self.assertIn("records", f)
            names = [r["record"].decode() for r in f["index"][()]]
        self.assertNotEqual(names, sorted(names))
        self.check_sample(path, "statistics")

    def check_sample(self, path, task):
        """path, fmt_write_sample's records as task: header, records in
        execution order, every tensor's dtype, shape and statistics as numpy
        has them"""
        p = ls(path)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        lines = p.stdout.splitlines()
        n_tensors = sum(len(t) for _, _, t in X.RECORDS) + 1
        self.assertEqual(lines[0], f"step 7 rank 3: {path}  task={task} mode=mix "
                         f"framework=pytorch 1.13.1  records={len(X.RECORDS) + 1} "
                         f"tensors={n_tensors}")
        rec_lines = [l.strip() for l in lines if l.startswith("  ") and not
                     l.startswith("    ")]
        want = sorted([(r, o) for r, o, _ in X.RECORDS] + [X.EMPTY_RECORD], key=lambda x: x[1])
        self.assertEqual(rec_lines, [f"{r}  order={o}" for r, o in want])
        got = tensor_lines(p.stdout)
        for rec, _, role, dtype, shape, _, arr in X.all_tensors():
            with self.subTest(rec=rec, role=role):
                f = got[rec][role].split()
                self.assertEqual(f[1], dtype)
                self.assertIn(" " + shape_text(shape) + " ", got[rec][role])
                st = X.stats(dtype, arr)
                for k in ("max", "min", "mean", "norm"):
                    self.assertIn(f"{k}={st[k]:.6g}", f)
                self.assertIn(f"nan={st['nan_count']}", f)
                self.assertIn(f"inf={st['inf_count']}", f)
                self.assertNotIn("no data", got[rec][role])
        line = got[X.STATS_ONLY[0]][X.STATS_ONLY[1]]
        self.assertTrue(line.endswith("no data"), line)
        self.assertIn("max=2.5", line)
        self.assertIn("kwarg.alpha      = 2", p.stdout)

    def test_hand_written_h5py_file(self):
        path = os.path.join(self.tmp.name, "hand.h5")
        H.write(path)
        p = ls(path)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertIn("(no /index)", p.stdout.splitlines()[0])
        self.assertTrue(p.stdout.startswith("step 4 rank -1: "))
        got = tensor_lines(p.stdout)
        self.assertEqual(list(got), [r for r, _, _ in H.EXPECT])
        for rec, order, specs in H.EXPECT:
            self.assertIn(f"  {rec}  order={order}\n", p.stdout)
            self.assertEqual(list(got[rec]), [s[0] for s in specs])
            for role, dtype, shape, has_data, _ in specs:
                line = got[rec][role]
                self.assertEqual(line.split()[1], dtype)
                self.assertIn(" " + shape_text(shape) + " ", line)
                self.assertEqual(line.endswith("no data"), not has_data)
        self.assertIn("no statistics", got["Functional.linear.0.forward"]["input.0"])

    def test_attrs_table_lists_as_the_groups_did(self):
        # the same attributes in a version 1 file (on the record groups, which
        # HDF5 lists by name) and in a version 2 file (rows of /attrs, written
        # in another order): the same listing, in key order
        v1, v2 = os.path.join(self.tmp.name, "v1.h5"), os.path.join(self.tmp.name, "v2.h5")
        H.write(v1)
        rows = []
        with h5py.File(v1, "a") as f:
            g = f["Functional.linear.0.forward"]
            for k in ("zeta", "mid", "alpha"):
                g.attrs[k] = "value of " + k
            for name, g in f.items():
                for k, v in g.attrs.items():
                    if k != "order":
                        rows.append((name, k, str(v)))
        shutil.copy(v1, v2)
        with h5py.File(v2, "a") as f:
            f.attrs["format_version"] = np.int64(2)
            for name, k, _ in rows:
                del f[name].attrs[k]
            vstr = h5py.string_dtype("utf-8")
            f.create_dataset("attrs", data=np.array(rows[::-1], dtype=[
                ("record", vstr), ("key", vstr), ("value", vstr)]))
        self.assertIn(("Functional.linear.0.forward", "zeta", "value of zeta"), rows)
        a, b = ls(v1), ls(v2)
        self.assertEqual((a.returncode, b.returncode), (0, 0), a.stderr + b.stderr)
        self.assertEqual(a.stdout.replace(v1, "FILE"), b.stdout.replace(v2, "FILE"))
        lines = [l.split()[0] for l in a.stdout.splitlines() if l.startswith("    ") and " = " in l]
        self.assertEqual(lines[lines.index("alpha"):lines.index("alpha") + 4],
                         ["alpha", "kwarg.bias", "mid", "zeta"])  # the hand file's, and ours

    def make_root(self):
        root = tempfile.mkdtemp(dir=self.tmp.name)
        for step, rank in [(10, 0), (2, 1), (2, 0), (0, 0)]:
            d = os.path.join(root, f"step{step}", f"rank{rank}")
            os.makedirs(d)
            shutil.copy(self.sample, os.path.join(d, "dump.h5"))
            with h5py.File(os.path.join(d, "dump.h5"), "a") as f:
                f.attrs["step"], f.attrs["rank"] = np.int64(step), np.int64(rank)
        os.makedirs(os.path.join(root, "notes"))
        return root

    def headers(self, out):
        return [tuple(int(v) for v in l.split(":")[0].split()[1::2])
                for l in out.splitlines() if l.startswith("step ")]

    def test_dump_root_in_numeric_step_then_rank_order(self):
        root = self.make_root()
        p = ls(root)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertEqual(self.headers(p.stdout), [(0, 0), (2, 0), (2, 1), (10, 0)])
        self.assertIn(os.path.join(root, "step10", "rank0", "dump.h5"), p.stdout)

    def test_rank_and_step_directories(self):
        root = self.make_root()
        p = ls(os.path.join(root, "step2", "rank1"))
        self.assertEqual((p.returncode, self.headers(p.stdout)), (0, [(2, 1)]))
        p = ls(os.path.join(root, "step2"))
        self.assertEqual((p.returncode, self.headers(p.stdout)), (0, [(2, 0), (2, 1)]))

    def expect_bad(self, path, words=()):
        p = ls(path)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertTrue(p.stderr.startswith("msprobe: "), p.stderr)
        self.assertIn(path, p.stderr)
        for w in words:
            self.assertIn(w, p.stderr)

    def test_missing_path(self):
        self.expect_bad(os.path.join(self.tmp.name, "nope", "dump.h5"), ["No such file"])

    def test_text_file(self):
        path = os.path.join(self.tmp.name, "notes.txt")
        with open(path, "w") as fh:
            fh.write("not a dump\n")
        self.expect_bad(path, ["not an HDF5 file"])

    def test_truncated_dump(self):
        path = os.path.join(self.tmp.name, "truncated.h5")
        with open(self.sample, "rb") as src, open(path, "wb") as dst:
            dst.write(src.read()[: os.path.getsize(self.sample) // 2])
        self.expect_bad(path, ["truncated"])

    def test_directory_without_dumps(self):
        path = tempfile.mkdtemp(dir=self.tmp.name)
        self.expect_bad(path, ["no dump here"])

    def test_bad_file_in_a_root_is_reported_and_the_rest_listed(self):
        root = self.make_root()
        bad = os.path.join(root, "step2", "rank0", "dump.h5")
        with open(bad, "wb") as fh:
            fh.write(b"garbage")
        p = ls(root)
        self.assertEqual(p.returncode, 2)
        self.assertIn(bad, p.stderr)
        self.assertEqual(self.headers(p.stdout), [(0, 0), (2, 1), (10, 0)])

    def test_usage_errors(self):
        for args in ([], [self.sample, self.sample], ["--bogus", self.sample]):
            with self.subTest(args=args):
                p = ls(*args)
                self.assertEqual(p.returncode, 2)
                self.assertEqual(p.stdout, "")
                self.assertIn("msprobe", p.stderr)


if __name__ == "__main__":
    WRITE_SAMPLE = sys.argv.pop(1)
    unittest.main()
