"""Crash-safe steps: a run stopped by SIGKILL keeps every step but the one in
flight and the one before it (MSPROBE_SYNC=1: every step but the one in
flight); SIGTERM and Ctrl-C write what is pending (dump and config_check
pack) and keep their exit status; a handler the script installs itself is
respected. Every file checked is read back with h5py; losses are compared with
a run without the shim."""
import os
import signal
import subprocess
import sys
import time
import unittest
import zipfile
import json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

SLOW = sys.argv.pop(1) if len(sys.argv) > 1 and sys.argv[1].endswith(".so") else ""

# Steps big enough that the writer cannot keep up with training: without a
# bound on its lag, finished steps wait in memory when the process dies.
TRAIN = r"""
import os, signal, sys, time, torch, torch.nn as nn
torch.manual_seed(0)
steps = int(os.environ.get("T_STEPS", "40"))
width = int(os.environ.get("T_WIDTH", "256"))
m = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(),
                  nn.Linear(width, 1))
opt = torch.optim.SGD(m.parameters(), lr=1e-3)
x = torch.randn(256, width)
y = torch.randn(256, 1)
if os.environ.get("T_OWN_HANDLER"):
    def bye(signum, frame):
        print("own handler", signum, flush=True)
        sys.exit(7)
    signal.signal(signal.SIGTERM, bye)
big = torch.randn(int(os.environ.get("T_BIG", str(1 << 19))))
for step in range(steps):
    opt.zero_grad()
    z = big
    for k in range(4):  # cheap to compute, 2 MB tensors to write each
        z = torch.tanh(z * 1.0001)
    loss = ((m(x) - y) ** 2).mean() + 0 * z[0]
    loss.backward()
    opt.step()
    print("step %d loss %s" % (step, loss.item().hex()), flush=True)
    if os.environ.get("T_SLOW_AFTER") and step >= int(os.environ["T_SLOW_AFTER"]):
        time.sleep(0.5)
print("finished", flush=True)
"""


def h5_ok(path):
    import h5py
    try:
        with h5py.File(path, "r") as f:
            return f.attrs["format"] in (b"msprobe-dump", "msprobe-dump") and len(f.keys()) > 1
    except Exception:  # h5py raises OSError, KeyError, ... on a broken file
        return False


class CrashSafe(dt.ShimCase):
    def start(self, cfg, env_extra=None, preload=True, slow_disk=False):
        script = self.path("train_big.py")
        with open(script, "w") as f:
            f.write(TRAIN)
        env = dict(os.environ)
        env.pop("MSPROBE_PATH", None)
        env.pop("MSPROBE_LOG_FILE", None)
        if preload:
            env["LD_PRELOAD"] = dt.PRELOAD
            env["MSPROBE_PATH"] = cfg
            if slow_disk:
                if not os.path.exists(SLOW):
                    self.skipTest("no slow-disk library given")
                env["LD_PRELOAD"] = SLOW + ":" + dt.PRELOAD
        env.update(env_extra or {})
        return subprocess.Popen([dt.PYTHON, script], cwd=self.dir, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def run_until(self, proc, step, sig):
        """Send sig as soon as the script reports `step` done; (lines, stderr, rc)."""
        lines = []
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("step %d " % step):
                proc.send_signal(sig)
                break
        out, err = proc.communicate(timeout=300)
        lines += out.splitlines()
        return lines, err, proc.returncode

    def plain_losses(self, steps):
        p = self.start(None, {"T_STEPS": str(steps)}, preload=False)
        out, err = p.communicate(timeout=300)
        self.assertEqual(p.returncode, 0, err)
        return [l for l in out.splitlines() if l.startswith("step ")]

    def check_steps(self, root, complete_through, lines):
        files = dt.dump_files(root)
        for (step, rank), path in files.items():
            self.assertTrue(h5_ok(path), "step %d: %s does not open" % (step, path))
        for step in range(complete_through + 1):
            self.assertIn((step, 0), files, "finished step %d lost; have %s" % (step, sorted(files)))
        # what was printed before the kill is what a run without the shim computes
        done = [l for l in lines if l.startswith("step ")]
        self.assertEqual(done, self.plain_losses(len(done)))

    def test_sigkill_loses_at_most_the_step_in_flight_and_the_one_before(self):
        cfg = self.write_config(dt.config("./d", steps="all"))
        proc = self.start(cfg, slow_disk=True)
        lines, err, rc = self.run_until(proc, 6, signal.SIGKILL)
        self.assertEqual(rc, -signal.SIGKILL, err)
        # "step 6" is printed after step 6 ended: step 5's file is in place
        self.check_steps(self.path("d"), 5, lines)

    def test_sigkill_with_sync_loses_only_the_step_in_flight(self):
        cfg = self.write_config(dt.config("./d", steps="all"))
        proc = self.start(cfg, {"MSPROBE_SYNC": "1"}, slow_disk=True)
        lines, err, rc = self.run_until(proc, 4, signal.SIGKILL)
        self.assertEqual(rc, -signal.SIGKILL, err)
        self.check_steps(self.path("d"), 4, lines)

    def test_sigterm_writes_everything_and_dies_of_sigterm(self):
        cfg = self.write_config({"dump": dt.config("./d", steps="all")["dump"],
                                 "config_check": {"output_zip_path": "pack.zip"}})
        proc = self.start(cfg)
        lines, err, rc = self.run_until(proc, 3, signal.SIGTERM)
        self.assertEqual(rc, -signal.SIGTERM, err)
        # nothing but the one line about data preparation before the model ran
        self.assertEqual([l for l in err.splitlines() if "data preparation" not in l], [], err)
        self.assertNotIn("finished", lines)
        # every step that ended before the signal, and the pack
        self.check_steps(self.path("d"), 3, lines)
        with zipfile.ZipFile(self.path("pack.zip")) as z:
            weights = json.loads(z.read("weights.json"))["tensors"]
            hyper = json.loads(z.read("hyperparameters.json"))
        # 3 Linear layers: weight and bias each
        self.assertEqual(len(weights), 6)
        self.assertEqual([o["class"] for o in hyper["optimizers"]], ["torch.optim.sgd.SGD"])
        self.assertEqual(sorted(os.listdir(self.dir)),
                         sorted(["d", "msprobe.json", "pack.zip", "train_big.py"]))

    def test_a_sigterm_handler_of_the_script_is_respected(self):
        cfg = self.write_config(dt.config("./d", steps="all"))
        proc = self.start(cfg, {"T_OWN_HANDLER": "1", "T_SLOW_AFTER": "2"})
        lines, err, rc = self.run_until(proc, 2, signal.SIGTERM)
        self.assertIn("own handler 15", lines)
        self.assertEqual(rc, 7, err)
        self.check_steps(self.path("d"), 2, lines)


CTRL_C = r"""
import os, signal, torch
torch.manual_seed(1)
m = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for i in range(2):
    m(torch.ones(3, 4)).sum().backward()
    opt.step()
os.kill(os.getpid(), signal.SIGINT)
import time; time.sleep(5)
"""


class CtrlC(dt.ShimCase):
    def test_ctrl_c_keeps_status_130_with_config_check_collecting(self):
        cfg = self.write_config({"dump": dt.config("./d", steps="all")["dump"],
                                 "config_check": {"output_zip_path": "pack.zip"}})
        plain = self.run_cmd([dt.PYTHON, "-c", CTRL_C], preload=False)
        shim = self.run_cmd([dt.PYTHON, "-c", CTRL_C], cfg)
        # Python dies of SIGINT after an unhandled KeyboardInterrupt (the shell's
        # 130); started with SIGINT ignored (a background job of a script) it
        # exits 1 instead. The shim changes neither.
        self.assertIn(plain.returncode, (-signal.SIGINT, 1), plain.stderr)
        self.assertEqual(shim.returncode, plain.returncode, shim.stderr)
        self.assertIn("KeyboardInterrupt", shim.stderr)
        with zipfile.ZipFile(self.path("pack.zip")) as z:
            self.assertEqual(len(json.loads(z.read("weights.json"))["tensors"]), 2)
        files = dt.dump_files(self.path("d"))
        self.assertEqual(sorted(files), [(0, 0), (1, 0)])
        for p in files.values():
            self.assertTrue(h5_ok(p), p)


if __name__ == "__main__":
    unittest.main()
