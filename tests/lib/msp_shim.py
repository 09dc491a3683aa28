"""One training script run under the real preload shim, for the tests:
its own msprobe config (a tensor dump at the given level and steps) and
environment, one thread, the script's stderr in the error when it fails."""
import json
import os
import subprocess

PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")


def dump(work, name, script, env=None, level="api", steps="0", args=(), timeout=600):
    """Run script (a path) under the shim with cwd work; the dump goes to
    work/name, which is returned."""
    root = os.path.join(work, name)
    cfg = root + ".json"
    with open(cfg, "w") as f:
        json.dump({"dump": {"common_dump_settings": {
            "dump_mode": level, "dump_path": root, "dump_iter": steps, "task": "tensor"}}}, f)
    full = dict(os.environ, LD_PRELOAD=PRELOAD, MSPROBE_PATH=cfg, OMP_NUM_THREADS="1",
                **(env or {}))
    p = subprocess.run([PYTHON, script] + list(args), cwd=work, env=full, capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError("%s under the shim failed:\n%s" % (script, p.stderr[-2000:]))
    return root
