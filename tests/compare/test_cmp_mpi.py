"""Compare spread over processes with MPI (msprobe-compare(1), MPI), on one
machine: `mpirun --oversubscribe -np 3` with per-node directories (each
process is given the dump directories of its "node": process 0 node 0 with
ranks 0 and 1, processes 1 and 2 node 1 with ranks 2 and 3), and with shared
storage (every process sees the whole tree). Process 0 writes result.xlsx and
result.csv; both must equal, row for row, what one process writes for the
whole tree, and the exit status and root-cause line too.

The trees are two four-rank dumps of a real gloo job (ranks_dumps.py) and,
where the benchmarks are built, a generated 8-rank, 3-step tree."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import openpyxl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ranks_dumps as R  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
MPIRUN = os.environ.get("MSPROBE_MPIRUN", "")
GEN = os.environ.get("MSPROBE_GEN", "")


def setUpModule():
    global WORK, TREES
    if not MPIRUN:
        raise unittest.SkipTest("msprobe was built without MPI (CMake found no MPI: apt-get "
                                "install libopenmpi-dev openmpi-bin)")
    if not os.access(MPIRUN, os.X_OK):
        raise unittest.SkipTest("mpirun %s is not there" % MPIRUN)
    if not R.PRELOAD or not os.path.exists(R.PRELOAD):
        raise unittest.SkipTest("MSPROBE_PRELOAD_LIB not set (run through ctest)")
    WORK = tempfile.mkdtemp(prefix="msp-cmp-mpi-")
    TREES = {"real": (R.dump(os.path.join(WORK, "bench"), 0),
                      R.dump(os.path.join(WORK, "cmp"), 1e-3))}
    if GEN:
        root = os.path.join(WORK, "gen")
        subprocess.run([GEN, "--out", root, "--steps", "3", "--ranks", "8", "--layers", "6",
                        "--numel", "2000", "--plant", "2", "--plant-step", "1",
                        "--plant-rank", "5", "--dtype", "bf16", "--modules", "--seed", "3"],
                       check=True, timeout=300)
        TREES["gen"] = (os.path.join(root, "bench"), os.path.join(root, "npu"))


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


def split_by_node(tree, nodes):
    """Copy tree into one directory per node: node k gets the ranks in nodes[k]."""
    out = []
    for k, ranks in enumerate(nodes):
        dst = tree + ".node%d" % k
        if not os.path.isdir(dst):
            for step in os.listdir(tree):
                for rank in ranks:
                    src = os.path.join(tree, step, "rank%d" % rank)
                    if os.path.isdir(src):
                        shutil.copytree(src, os.path.join(dst, step, "rank%d" % rank))
        out.append(dst)
    return out


def mpirun(progs):
    """progs: one argv (after msprobe) per process, run as one MPMD launch."""
    cmd = [MPIRUN, "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    for i, argv in enumerate(progs):
        if i:
            cmd.append(":")
        cmd += ["-np", "1", BIN] + argv
    env = dict(os.environ, OMPI_MCA_btl="self,tcp", OMPI_MCA_btl_tcp_if_include="lo",
               OMPI_MCA_oob_tcp_if_include="lo", OMP_NUM_THREADS="1")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)


def single(b, c, out):
    return subprocess.run([BIN, "compare", "-b", b, "-c", c, "-o", out, "--csv",
                           "--replay-budget", "0"], capture_output=True, text=True, timeout=900)


def root_line(stdout):
    return [l for l in stdout.splitlines() if l.startswith(("first introduced", "no introduced"))]


class CompareOverMPI(unittest.TestCase):
    def assert_same_report(self, a, b):
        with open(os.path.join(a, "result.csv"), "rb") as f, \
                open(os.path.join(b, "result.csv"), "rb") as g:
            self.assertEqual(f.read(), g.read())
        wa = openpyxl.load_workbook(os.path.join(a, "result.xlsx"), read_only=True)
        wb = openpyxl.load_workbook(os.path.join(b, "result.xlsx"), read_only=True)
        self.assertEqual(wa.sheetnames, wb.sheetnames)
        for name in wa.sheetnames:
            if not hasattr(wa[name], "iter_rows"):  # the error-flow chart sheet
                continue
            ra = list(wa[name].iter_rows(values_only=True))
            rb = list(wb[name].iter_rows(values_only=True))
            self.assertEqual(len(ra), len(rb), name)
            for i, (x, y) in enumerate(zip(ra, rb)):
                self.assertEqual(x, y, "%s row %d" % (name, i + 1))

    def check(self, tag, nodes, views):
        b, c = TREES[tag]
        ref = os.path.join(WORK, "%s-single" % tag)
        one = single(b, c, ref)
        self.assertIn(one.returncode, (0, 1), one.stderr)
        out = os.path.join(WORK, "%s-mpi-%s" % (tag, "-".join(map(str, views))))
        if nodes:
            bn, cn = split_by_node(b, nodes), split_by_node(c, nodes)
            paths = [(bn[v], cn[v]) for v in views]
        else:
            paths = [(b, c)] * len(views)
        p = mpirun([["compare", "-b", pb, "-c", pc, "-o", out, "--csv", "--replay-budget", "0"]
                    for pb, pc in paths])
        self.assertEqual(p.returncode, one.returncode, p.stdout + p.stderr)
        self.assertEqual(root_line(p.stdout), root_line(one.stdout))
        self.assert_same_report(ref, out)
        # no process but 0 writes or prints (its page: result.html)
        self.assertEqual(sorted(os.listdir(out)), ["result.csv", "result.html", "result.xlsx"])
        m = re.search(r"^processes: 3, pairs each: (\d+), (\d+), (\d+)$", p.stdout, re.M)
        self.assertTrue(m, p.stdout)
        return [int(x) for x in m.groups()]

    def test_per_node_directories_give_each_process_its_node_pairs(self):
        # process 0 sees node 0 (ranks 0, 1), processes 1 and 2 node 1 (ranks 2, 3);
        # 2 steps: node 0's 4 pairs to process 0, node 1's ranks dealt to 1 and 2
        each = self.check("real", [[0, 1], [2, 3]], [0, 1, 1])
        self.assertEqual(each, [4, 2, 2])

    def test_shared_storage_deals_the_ranks_over_every_process(self):
        each = self.check("real", None, [0, 0, 0])
        self.assertEqual(each, [4, 2, 2])  # ranks 0 and 3, 1, 2: two steps each

    @unittest.skipUnless(GEN, "MSPROBE_GEN not set (benchmarks not built)")
    def test_generated_tree_over_three_nodes_views(self):
        each = self.check("gen", [[0, 1, 2], [3, 4, 5], [6, 7]], [0, 1, 2])
        self.assertEqual(each, [9, 9, 6])  # 3 steps x its node's ranks

    def test_open_mpis_default_binding_is_undone_and_an_asked_one_kept(self):
        # Open MPI binds each of two processes to one core unless told: the
        # compare takes back the launch's CPUs (what this test process has),
        # and keeps a binding asked for with --bind-to
        cpus = len(os.sched_getaffinity(0))
        if cpus < 2:
            self.skipTest("one CPU: nothing to bind or take back")
        b, c = TREES["real"]
        env = dict(os.environ, OMPI_MCA_btl="self,tcp", OMPI_MCA_btl_tcp_if_include="lo",
                   OMPI_MCA_oob_tcp_if_include="lo")
        env.pop("OMP_NUM_THREADS", None)
        line = re.compile(r"MPI: process (\d+) was bound to (\d+) CPUs? by Open MPI's default "
                          r"\(not --bind-to\): it runs on (\d+) CPUs, (\d+) threads")
        for bind in (None, "core"):
            out = os.path.join(WORK, "bind-%s" % bind)
            cmd = [MPIRUN, "--oversubscribe", "-np", "2"] + (["--bind-to", bind] if bind else [])
            if os.geteuid() == 0:
                cmd.append("--allow-run-as-root")
            p = subprocess.run(cmd + [BIN, "-v", "compare", "-b", b, "-c", c, "-o", out,
                                      "--replay", "off"],
                               capture_output=True, text=True, timeout=900, env=env)
            self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
            got = sorted((int(m[0]), int(m[1]), int(m[2]), int(m[3]))
                         for m in line.findall(p.stderr))
            if bind:
                self.assertEqual(got, [], p.stderr)
            else:
                self.assertEqual(got, [(0, 1, cpus, cpus), (1, 1, cpus, cpus)], p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
