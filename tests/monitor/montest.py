"""What the monitor tests share: the CLI, the shim, the tiny training and a
reader of a monitor output directory that knows only msprobe's layout."""
import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
SOURCE = os.environ.get("MSPROBE_SOURCE_DIR",
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PYTHON = os.environ.get("MSPROBE_PYTHON", sys.executable)
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
TINY = os.path.join(SOURCE, "tests", "monitor", "tiny_train.py")
FIX = os.path.join(SOURCE, "fixtures", "monitor")
DIR_RE = re.compile(r"^[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}-rank(\d+)-[0-9a-f]{8}$")


def run_dir(root):
    """The one <time>-rank<R>-<id> directory under root."""
    dirs = [d for d in os.listdir(root) if DIR_RE.match(d)]
    if len(dirs) != 1:
        raise AssertionError(f"{root}: {dirs}")
    return os.path.join(root, dirs[0])


def read_csv(path):
    """(header, rows) of a CSV file, rows as lists of strings."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def say_hooks(step):
    """For a training script: the number of torch's global forward and
    backward module hooks as step starts, on stderr (read by hooks_said)."""
    import torch
    m = torch.nn.modules.module
    print(f"step {step} hooks {len(m._global_forward_hooks)} {len(m._global_backward_hooks)}",
          file=sys.stderr)


def hooks_said(text):
    """{step: (forward hooks, backward hooks)} from say_hooks' lines."""
    return {int(m[0]): (int(m[1]), int(m[2]))
            for m in re.findall(r"^step (\d+) hooks (\d+) (\d+)$", text, re.M)}


class MonitorCase(unittest.TestCase):
    def setUp(self):
        if not os.path.exists(BIN):
            self.skipTest("no msprobe binary")
        self.work = tempfile.mkdtemp(prefix="msp-monitor-")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def path(self, *p):
        return os.path.join(self.work, *p)

    def write_config(self, conf, name="monitor.json"):
        p = self.path(name)
        with open(p, "w") as f:
            f.write(conf if isinstance(conf, str) else json.dumps(conf))
        return p

    def monitor(self, cfg, out, args=(TINY,), env=None, preload_only=False):
        """The tiny training (or args) under `msprobe monitor -c cfg`, or
        under the preload alone; the finished process."""
        e = dict(os.environ, MONITOR_OUTPUT_DIR=out, **(env or {}))
        e.pop("MSPROBE_LOG_FILE", None)
        if preload_only:
            e.update(LD_PRELOAD=PRELOAD, MSPROBE_MONITOR_CONFIG=cfg)
            cmd = [PYTHON, *args]
        else:
            cmd = [BIN, "monitor", "-c", cfg, "--", PYTHON, *args]
        return subprocess.run(cmd, env=e, capture_output=True, text=True, cwd=self.work)
