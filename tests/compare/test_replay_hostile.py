"""A dump from someone else must not run code through replay.

Each crafted dump below is what an attacker would send (msprobe-compare(1),
SECURITY): records that name torch's loaders and savers with paths and a
pickle in the file's own HDF5 user block, a json.py beside the dump, records
that ask the worker for gigabytes or for a loop that never ends, records that
would change the worker's global state before the real culprit is replayed.
Every dump is written here with h5py (never by msprobe), and each assertion
checks the world outside: files that must not appear, processes that must not
be left, the peak memory of compare's children as the kernel counted it,
wall time, and the verdict of a planted op (F.gelu with approximate="tanh" on
the compare side only) computed here with torch."""
import json
import os
import pickle
import resource
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import h5py
import numpy as np
import openpyxl

from msp_h5dump import write_dump
from msp_proc import cmdline, descendants
from msp_ref import gelu

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
# an ASan build's worker runs under libasan, whose shadow memory is mapped
# before any limit is set: its address-space limit then bounds nothing
SANITIZED = b"libasan" in subprocess.run(["ldd", BIN], capture_output=True).stdout


class Payload:
    """Unpickling this creates the file marker: what a pickle in a dump does
    when torch.load reads it."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def summary(out):
    wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
    rows = list(wb["summary"].iter_rows(values_only=True))
    return {r[rows[0].index("Name")]: dict(zip(rows[0], r)) for r in rows[1:]}


def with_userblock(path, data):
    """Rewrite the HDF5 file at path with a 512-byte user block holding data
    (h5py and HDF5 read such a file as usual)."""
    tmp = path + ".plain"
    os.rename(path, tmp)
    with h5py.File(tmp, "r") as src, h5py.File(path, "w", userblock_size=512) as dst:
        for k, v in src.attrs.items():
            dst.attrs[k] = v
        for name in src:
            src.copy(src[name], dst, name=name)
    os.unlink(tmp)
    assert len(data) <= 512
    with open(path, "r+b") as f:
        f.write(data)


class HostileDumps(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="msp-hostile-")
        self.home = os.path.join(self.work, "home")
        os.makedirs(os.path.join(self.home, ".ssh"))
        self.tmp = os.path.join(self.work, "tmp")
        os.makedirs(self.tmp)
        # a worker kept 3 s after its last session (the default path, gone
        # well before another test's)
        self.env = dict(os.environ, HOME=self.home, TMPDIR=self.tmp, MSPROBE_REPLAY_KEEP="3")
        rng = np.random.default_rng(7)
        self.x = rng.standard_normal((4, 16)).astype(np.float32)

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    # -- dumps ---------------------------------------------------------------------

    def pair(self, hostile):
        """gpu/ and npu/ dumps: the hostile records first (their output
        differs, so compare replays them), then the planted gelu."""
        x = self.x
        for side in ("gpu", "npu"):
            recs, attrs = [], {}
            for i, (name, tensors, args) in enumerate(hostile):
                t = dict(tensors)
                if side == "npu":
                    t = {k: (v + np.float32(0.5) if k.startswith("output") else v)
                         for k, v in t.items()}
                recs.append((name, i, t))
                attrs[name] = args
            out = gelu(x, tanh=(side == "npu")).astype(np.float32)
            recs.append(("Functional.gelu.0.forward", len(recs), {"input.0": x, "output.0": out}))
            path = os.path.join(self.work, side, "step0", "rank0", "dump.h5")
            write_dump(path, recs)
            with h5py.File(path, "a") as f:
                for name, a in attrs.items():
                    for k, v in a.items():
                        f[name].attrs[k] = v
        return os.path.join(self.work, "gpu"), os.path.join(self.work, "npu")

    @staticmethod
    def endless():
        """torch.lobpcg with niter=-1 and tol=0: it never returns."""
        a = np.eye(8, dtype=np.float32) * 2 + 0.1
        return ("Torch.lobpcg.0.forward", {"input.0": a, "output.0": np.ones(1, np.float32),
                                           "output.1": np.ones((8, 1), np.float32)},
                {"kwarg.k": "1", "kwarg.niter": "-1", "kwarg.tol": "0"})

    def compare(self, *extra, cwd=None, timeout=300, check=True):
        out = os.path.join(self.work, "out")
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.monotonic()
        p = subprocess.run([BIN, "compare", "-b", "gpu", "-c", "npu", "-o", out, *extra],
                           capture_output=True, text=True, timeout=timeout, env=self.env,
                           cwd=cwd or self.work)
        took = time.monotonic() - t0
        if check:
            self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        return p, summary(out), took

    def assert_gelu_introduced(self, rows):
        # the planted op: the tanh approximation against erf, computed here
        e = np.linalg.norm(gelu(self.x, True) - gelu(self.x)) / np.linalg.norm(gelu(self.x))
        self.assertGreater(e, 1e-4)  # far above float32 rounding: replay must see it
        row = rows["Functional.gelu.0.forward"]
        self.assertTrue((row["Replay"] or "").startswith("introduced"), row)

    def assert_refused(self, row):
        self.assertNotIn(row["Replay"], ("introduced", "inherited"), row)
        self.assertIn("SECURITY", row["Reason"] or "", row)

    # -- the cases -------------------------------------------------------------------

    def test_torch_load_of_a_pickle_in_the_dumps_user_block_runs_nothing(self):
        marker = os.path.join(self.work, "PWNED-load")
        blob = pickle.dumps(Payload(marker), protocol=2)
        load = ("Torch.load.0.forward", {"output.0": self.x},
                {"input.0": repr("npu/step0/rank0/dump.h5"), "kwarg.weights_only": "False"})
        b, c = self.pair([load])
        with_userblock(os.path.join(c, "step0", "rank0", "dump.h5"), blob)
        # the payload is live: unpickling it here creates the marker
        probe = os.path.join(self.work, "probe")
        pickle.loads(pickle.dumps(Payload(probe), protocol=2)).close()
        self.assertTrue(os.path.exists(probe))
        with h5py.File(os.path.join(c, "step0", "rank0", "dump.h5"), "r") as f:
            self.assertEqual(f.userblock_size, 512)
        p, rows, _ = self.compare(check=False)
        self.assertFalse(os.path.exists(marker), p.stdout)
        self.assertIn(p.returncode, (0, 1), p.stdout + p.stderr)
        self.assert_refused(rows["Torch.load.0.forward"])
        # known from the worker's list before anything of the record was sent
        self.assertIn("its tensors were not sent", rows["Torch.load.0.forward"]["Reason"])
        self.assert_gelu_introduced(rows)
        # acc_check on the same hostile dump
        q = subprocess.run([BIN, "acc_check", "-d", os.path.join(c, "step0", "rank0"), "-o",
                            os.path.join(self.work, "acc")], capture_output=True, text=True,
                           timeout=300, env=self.env, cwd=self.work)
        self.assertIn(q.returncode, (0, 1), q.stderr)
        self.assertFalse(os.path.exists(marker), q.stdout)

    def test_msprobes_dump_json_with_quoted_path_arguments_runs_nothing(self):
        import torch
        import msprobe_layout
        marker = os.path.join(self.work, "PWNED-json")
        evil = os.path.join(self.work, "evil.pt")
        with open(evil, "wb") as f:
            f.write(pickle.dumps(Payload(marker), protocol=2))
        keys = os.path.join(self.home, ".ssh", "authorized_keys")
        x = torch.from_numpy(self.x)
        for side in ("gpu", "npu"):
            shift = 0.5 if side == "npu" else 0.0
            msprobe_layout.write(os.path.join(self.work, side), [
                # a str argument whose value is quoted reads back as a str literal
                ("Torch.load.0.forward", {"input_args": ["'%s'" % evil],
                                          "output": [x + shift]}),
                ("Torch.save.0.forward", {"input_args": [x, "'%s'" % keys],
                                          "output": [x + shift]}),
                ("Functional.gelu.0.forward", {
                    "input_args": [x], "output": [torch.from_numpy(
                        gelu(self.x, tanh=side == "npu").astype(np.float32))]})])
        p, rows, _ = self.compare("--replay", "all")
        self.assertFalse(os.path.exists(marker), p.stdout)
        self.assertFalse(os.path.exists(keys), p.stdout)
        self.assertEqual(os.listdir(os.path.join(self.home, ".ssh")), [])
        for name in ("Torch.load.0.forward", "Torch.save.0.forward"):
            self.assert_refused(rows[name])
        self.assert_gelu_introduced(rows)

    def test_savers_and_file_apis_write_nothing_outside_out(self):
        keys = os.path.join(self.home, ".ssh", "authorized_keys")
        big = os.path.join(self.work, "big.bin")
        save = ("Torch.save.0.forward", {"input.0": self.x, "output.0": self.x},
                {"input.1": repr(keys)})
        rc = ("Tensor.save.0.forward", {"input.0": self.x, "output.0": self.x},
              {"input.1": repr(os.path.join(self.home, ".bashrc"))})
        ff = ("Torch.from_file.0.forward", {"output.0": self.x},
              {"input.0": repr(big), "input.1": "True", "input.2": str(1 << 28)})
        b, c = self.pair([save, rc, ff])
        before = set(os.listdir(self.work)) | {"out"}
        p, rows, _ = self.compare("--replay", "all")
        self.assertFalse(os.path.exists(keys))
        self.assertFalse(os.path.exists(os.path.join(self.home, ".bashrc")))
        self.assertFalse(os.path.exists(big))
        self.assertEqual(set(os.listdir(self.work)) - before, set())
        self.assertEqual(os.listdir(os.path.join(self.home, ".ssh")), [])
        # the session's private directory went too: what stays is the kept
        # worker's socket and its (empty) directory, in a directory of ours
        kept = os.path.join(self.tmp, "msprobe-%d" % os.geteuid())
        self.assertEqual(os.listdir(self.tmp), ["msprobe-%d" % os.geteuid()])
        self.assertEqual(os.stat(kept).st_mode & 0o777, 0o700)
        left = [(d, sorted(fs)) for d, _, fs in os.walk(kept) if d != kept]
        self.assertEqual([(os.path.basename(d), fs) for d, fs in left],
                         [(os.path.basename(d), []) for d, _ in left])
        self.assertTrue(left and all(d.endswith(".d") for d, _ in left), left)
        for name in ("Torch.save.0.forward", "Tensor.save.0.forward", "Torch.from_file.0.forward"):
            self.assert_refused(rows[name])
        self.assert_gelu_introduced(rows)

    def test_a_json_py_beside_the_dump_is_not_imported(self):
        marker = os.path.join(self.work, "PWNED-import")
        for mod in ("json", "struct", "ast", "math"):
            with open(os.path.join(self.work, mod + ".py"), "w") as f:
                f.write("open(%r, 'w').write(__name__)\n" % marker)
        self.pair([])
        p, rows, _ = self.compare(cwd=self.work)
        self.assertFalse(os.path.exists(marker), p.stdout)
        self.assert_gelu_introduced(rows)

    def test_arguments_that_ask_for_gigabytes_stay_within_the_workers_limit(self):
        # 4 GiB of zeros, written: what a machine without the limit gives
        pad = ("Functional.pad.0.forward", {"input.0": self.x, "output.0": self.x},
               {"input.1": repr((0, 1 << 28))})
        # a bench dump edited the same way (the bench side's arguments are replayed)
        w = np.ones((2, 4, 3, 3), np.float32)
        img = np.ones((1, 4, 8, 8), np.float32)
        conv = ("Functional.conv2d.0.forward", {"input.0": img, "input.1": w,
                                                "output.0": np.ones((1, 2, 6, 6), np.float32)},
                {"kwarg.padding": repr((1 << 16, 1 << 16))})
        self.pair([pad, conv])
        # a worker of this compare's own: the kernel counts its peak in ours
        self.env["MSPROBE_REPLAY_KEEP"] = "0"
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        p, rows, _ = self.compare("--replay", "all")
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        # 4 GiB and 64 GiB were asked for; the worker's limit is its own
        # mapping plus 1 GiB plus 16 bytes a byte of the job: far below
        if not SANITIZED:
            self.assertLess(max(peak_kib, before), 2 * 1024 * 1024, p.stdout)
        for name in ("Functional.pad.0.forward", "Functional.conv2d.0.forward"):
            self.assertNotIn(rows[name]["Replay"], ("introduced", "inherited"), rows[name])
        self.assert_gelu_introduced(rows)

    def test_a_record_that_never_ends_costs_its_limit_not_the_run(self):
        lob = self.endless()
        # the budget counts the worker's start (msprobe-compare(1)): on a
        # loaded machine importing torch can take most of 20 s, and then the
        # budget, not the record's limit, ends the record; a worker kept from
        # a compare before leaves the budget to the records
        self.env["MSPROBE_REPLAY_KEEP"] = "20"
        self.pair([])
        self.compare()
        self.pair([lob])
        p, rows, took = self.compare("--replay-budget", "20")
        # a quarter of the budget, and no less than 10 s, for the endless
        # record; the ceiling is generous (a busy machine slows the rest of
        # the compare) and still far below the 300 s an endless run would take
        self.assertLess(took, 90, p.stdout)
        self.assertIn("limit", rows["Torch.lobpcg.0.forward"]["Reason"])
        self.assert_gelu_introduced(rows)
        # acc_check: three such records, a total budget; nothing checked is a failure
        path = os.path.join(self.work, "acc3", "step0", "rank0", "dump.h5")
        write_dump(path, [(lob[0].replace(".0.", ".%d." % i), i, lob[1]) for i in range(3)])
        with h5py.File(path, "a") as f:
            for i in range(3):
                for k, v in lob[2].items():
                    f["Torch.lobpcg.%d.forward" % i].attrs[k] = v
        t0 = time.monotonic()
        q = subprocess.run([BIN, "acc_check", "-d", os.path.dirname(path), "-o",
                            os.path.join(self.work, "acc"), "--budget", "15", "-n", "1"],
                           capture_output=True, text=True, timeout=300, env=self.env,
                           cwd=self.work)
        self.assertLess(time.monotonic() - t0, 90, q.stdout)  # 15 s budget; endless: 300
        self.assertEqual(q.returncode, 1, q.stdout + q.stderr)
        self.assertIn("nothing was checked", q.stderr)

    def test_records_that_would_change_the_workers_state_change_nothing(self):
        # torch.nn = None would leave the later gelu record no torch.nn.functional
        spoil = [("Torch.__setattr__.0.forward", {"output.0": self.x},
                  {"input.0": repr("nn"), "input.1": "None"}),
                 ("Torch.set_autocast_enabled.0.forward", {"output.0": self.x},
                  {"input.0": "True"}),
                 ("Torch.set_default_dtype.0.forward", {"output.0": self.x},
                  {"input.0": "torch.float64"}),
                 ("Tensor.__setattr__.0.forward", {"input.0": self.x, "output.0": self.x},
                  {"input.1": repr("__add__"), "input.2": "None"})]
        self.pair(spoil)
        p, rows, _ = self.compare("--replay", "all")
        self.assert_gelu_introduced(rows)
        for name, _, _ in spoil:
            self.assert_refused(rows[name])

    def test_killing_compare_leaves_no_worker_behind(self):
        lob = self.endless()
        self.pair([lob])
        proc = subprocess.Popen([BIN, "compare", "-b", "gpu", "-c", "npu", "-o", "out"],
                                cwd=self.work, env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

        t0 = time.monotonic()
        while not descendants(proc.pid) and time.monotonic() - t0 < 60:
            time.sleep(0.2)
        time.sleep(5)  # the worker is into the endless record now
        seen = {pid: cmdline(pid) for pid in descendants(proc.pid)}
        self.assertTrue(seen)
        proc.send_signal(signal.SIGKILL)  # compare's pid alone, as a timeout would
        proc.wait()

        def alive():
            return [pid for pid, cl in seen.items() if cl is not None and cmdline(pid) == cl]

        t0 = time.monotonic()
        while alive() and time.monotonic() - t0 < 20:  # the kept worker leaves 3 s after
            time.sleep(0.2)
        left = alive()
        for pid in left:  # leave no orphan behind a failing test
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.assertEqual(left, [])

    def test_the_workers_sandbox_confines_writes_exec_and_imports(self):
        """The worker's own sandbox_enter/setup/sandbox_no_exec (the source
        compare embeds, from the repository), then attempts of our own."""
        src_dir = os.environ.get("MSPROBE_SOURCE_DIR",
                                 os.path.join(os.path.dirname(__file__), "..", ".."))
        parts = []
        for p in ("dump/api_discover.py", "compare/replay_acc.py", "compare/replay.py",
                  "compare/replay_args.py", "compare/replay_bound.py", "compare/replay_backward.py",
                  "compare/replay_worker.py"):
            with open(os.path.join(src_dir, "src", p)) as f:
                parts.append(f.read())
        src = "\n".join(parts)
        tail = 'if __name__ == "__main__":\n    sys.exit(main())'
        self.assertIn(tail, src)
        probe = '''
import os
cfg = json.loads(sys.argv[1])
sandbox_enter(cfg)
assert setup() is None
sandbox_no_exec()
res = {"landlock": SANDBOX["landlock"], "why": SANDBOX["why"], "path": sys.path}
def attempt(k, f):
    try:
        f()
        res[k] = "done"
    except Exception as e:
        res[k] = type(e).__name__
attempt("write_outside", lambda: open(cfg["outside"], "w").write("x"))
attempt("write_inside", lambda: open("inside.txt", "w").write("x"))
attempt("mkdir_outside", lambda: os.mkdir(cfg["outside"] + ".d"))
attempt("unlink_outside", lambda: os.unlink(cfg["victim"]))
import subprocess
attempt("exec", lambda: subprocess.run(["/bin/true"]))
import socket
def tcp():
    s = socket.socket()
    s.settimeout(2)
    s.connect(("127.0.0.1", cfg["port"]))
attempt("tcp", tcp)
import resource
res["fsize"] = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
res["nofile"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
print(json.dumps(res))
'''
        import socket
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        priv = tempfile.mkdtemp(dir=self.tmp)
        victim = os.path.join(self.work, "victim")
        open(victim, "w").close()
        for mod in ("json", "struct"):
            with open(os.path.join(self.work, mod + ".py"), "w") as f:
                f.write("raise SystemExit('imported from the working directory')\n")
        cfg = {"dir": priv, "parent": os.getpid(), "fsize": 1 << 20, "nofile": 64,
               "outside": os.path.join(self.work, "outside.txt"), "victim": victim,
               "port": srv.getsockname()[1]}
        p = subprocess.run([PYTHON, "-I", "-B", "-c", src.replace(tail, probe),
                            json.dumps(cfg)], capture_output=True, text=True, cwd=self.work,
                           timeout=300, env=self.env)
        srv.close()
        self.assertEqual(p.returncode, 0, p.stderr)
        res = json.loads(p.stdout)
        self.assertNotIn("", res["path"])
        self.assertNotIn(self.work, res["path"])
        self.assertEqual(res["write_inside"], "done")
        self.assertTrue(os.path.exists(os.path.join(priv, "inside.txt")))
        self.assertEqual((res["fsize"], res["nofile"]), (1 << 20, 64))
        if res["landlock"] is None:
            self.skipTest("this kernel has no Landlock: " + res["why"])
        for k in ("write_outside", "mkdir_outside", "unlink_outside", "exec", "tcp"):
            self.assertEqual(res[k], "PermissionError", (k, res))
        self.assertFalse(os.path.exists(cfg["outside"]))
        self.assertTrue(os.path.exists(victim))


if __name__ == "__main__":
    unittest.main()
