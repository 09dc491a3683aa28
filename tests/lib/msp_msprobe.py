"""What the tests of msprobe's own dumps share: where the dumps msprobe wrote
are (fixtures/msprobe), the seeded script they were made from, our CLI, a
dump directory's dump.json, and our dump of that script under the real
preload shim, driven by msprobe's own config.json layout (as msprobe ran it:
the environment as given, not one thread)."""
import glob
import json
import os
import subprocess
import sys

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
SOURCE = os.environ.get("MSPROBE_SOURCE_DIR",
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PYTHON = os.environ.get("MSPROBE_PYTHON", sys.executable)
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
FIX = os.path.join(SOURCE, "fixtures", "msprobe")
MODEL = os.path.join(SOURCE, "tests", "compare", "msprobe_seeded_model.py")


def msprobe(*args, cwd=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, cwd=cwd)


def dump_json(root):
    """(path, parsed) of the one step0/*/dump.json under root."""
    (path,) = glob.glob(os.path.join(root, "step0", "*", "dump.json"))
    with open(path) as f:
        return path, json.load(f)


def dump_seeded(work, name, conf):
    """MODEL run under the shim with msprobe's config.json conf (its
    dump_path set to work/name); (that directory, the finished process)."""
    out = os.path.join(work, name)
    cfg = os.path.join(work, name + ".json")
    with open(cfg, "w") as f:
        json.dump(dict(conf, dump_path=out), f)
    env = dict(os.environ, LD_PRELOAD=PRELOAD, MSPROBE_PATH=cfg)
    env.pop("MSPROBE_LOG_FILE", None)
    p = subprocess.run([PYTHON, MODEL], env=env, capture_output=True, text=True, cwd=work)
    if p.returncode:
        raise AssertionError(p.stderr)
    return out, p
