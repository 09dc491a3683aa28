"""Shared helpers for the config_check tests (stdlib + openpyxl only)."""
import hashlib
import hmac
import json
import os
import subprocess
import zipfile

BIN = os.environ.get("MSPROBE_BIN", "")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
SRC = os.environ.get("MSPROBE_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "cc_train.py")

# What a pack keeps of a secret when MSPROBE_SECRET_SALT is unset: nothing.
UNSTORED = "<secret: not stored>"


def clean_env(**extra):
    """The test's environment without anything that would steer msprobe."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MSPROBE_") and not k.startswith("CCT_") and k != "LD_PRELOAD"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def msprobe(*args, env=None, cwd=None):
    return subprocess.run([BIN] + [str(a) for a in args], capture_output=True, text=True,
                          env=env if env is not None else clean_env(), cwd=cwd, timeout=300)


def run_under_shim(script_args, zip_path, cwd, **extra):
    """Run a training script under the preload shim with config_check on."""
    env = clean_env(LD_PRELOAD=PRELOAD, MSPROBE_CONFIG_CHECK=zip_path, **extra)
    return subprocess.run([PYTHON] + list(script_args), capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)


def read_text(path):
    with open(path) as f:
        return f.read()


def read_member(zip_path, name):
    with zipfile.ZipFile(zip_path) as z:
        return json.loads(z.read(name))


def sheet_rows(xlsx, sheet):
    """Rows of a sheet as dicts keyed by the header row, read with openpyxl."""
    import openpyxl
    wb = openpyxl.load_workbook(xlsx, read_only=True)
    rows = list(wb[sheet].iter_rows(values_only=True))
    wb.close()
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[1:]]


def sheet_header(xlsx, sheet):
    import openpyxl
    wb = openpyxl.load_workbook(xlsx, read_only=True)
    head = next(wb[sheet].iter_rows(values_only=True))
    wb.close()
    return list(head)


def summary(xlsx):
    return {r["filename"]: r["pass_check"] for r in sheet_rows(xlsx, "summary")}


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def secret_hash(key, value, salt=None):
    """The stored form of a secret: nothing without a salt, else HMAC-SHA256
    keyed by the salt (Python's hmac module, independent of msprobe's)."""
    if salt is None:
        return UNSTORED
    return "hmac-sha256:" + hmac.new(salt, value.encode(), hashlib.sha256).hexdigest()
