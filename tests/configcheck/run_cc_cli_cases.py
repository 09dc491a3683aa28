"""config_check CLI cases in the style of zstd's tests/cli-tests
(tests/lib/cli_cases.py, as tests/cli does for compare): every directory
under cli_cases/ is one test, holding

    cmd                   a bash script; $MSPROBE is the binary, $DATA the packs
                          made below, the working directory a fresh empty one
    exit                  the expected exit status
    stdout.exact|.glob    expected stdout; absent means "must be empty"
    stderr.exact|.glob    expected stderr; absent means "must be empty"

Before comparing, the data and working directory paths are replaced by $DATA
and $TMP. In a .glob file "..." stands for any text.

The packs in $DATA are written with Python's zipfile, not by msprobe:
  base.zip       env (OMP_NUM_THREADS=4, NCCL_ALGO=Ring), pip (numpy 1.24.2,
                 requests 2.28.1), random (torch.manual_seed 0 at t.py:3)
  env_pip.zip    base with OMP_NUM_THREADS=8 and requests 2.31.0
  seed.zip       base with torch.manual_seed 1
  dotdot.zip     base plus a member ../evil.json
  v2.zip         base with format_version 2
Run one case: MSPROBE_CLI_CASE=name python3 run_cc_cli_cases.py
"""
import json
import os
import shutil
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
# tests/lib is on PYTHONPATH under ctest; this keeps a run by hand working too
sys.path.append(os.path.join(HERE, os.pardir, "lib"))
import cli_cases  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
CASES = os.path.join(HERE, "cli_cases")

MANIFEST = {"format": "msprobe-config-check", "format_version": 1, "tool": "msprobe", "tool_version": "x",
            "kind": "run", "host": "h", "time": "2026-01-01T00:00:00Z", "rank": 0, "world_size": 1}


def pack(path, env=None, pip=None, seed="0", manifest=None, extra=None):
    env = env or {"OMP_NUM_THREADS": "4", "NCCL_ALGO": "Ring"}
    pip = pip or {"numpy": "1.24.2", "requests": "2.28.1"}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("manifest.json", json.dumps(manifest or MANIFEST))
        z.writestr("env.json", json.dumps({"salt": "default", "hashed_keys": [], "vars": env}))
        z.writestr("pip.json", json.dumps({"python": "3.11.2", "packages": [
            {"name": n, "version": v} for n, v in pip.items()]}))
        z.writestr("random.json", json.dumps({"calls": [
            {"api": "torch.manual_seed", "value": seed, "file": "/src/t.py", "line": 3}]}))
        for name, data in (extra or {}).items():
            z.writestr(name, data)


class ConfigCheckCliCases(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="msp_cc_cli_")
        cls.data = os.path.join(cls.tmp, "data")
        os.mkdir(cls.data)
        d = cls.data
        pack(os.path.join(d, "base.zip"))
        pack(os.path.join(d, "env_pip.zip"), env={"OMP_NUM_THREADS": "8", "NCCL_ALGO": "Ring"},
             pip={"numpy": "1.24.2", "requests": "2.31.0"})
        pack(os.path.join(d, "seed.zip"), seed="1")
        pack(os.path.join(d, "dotdot.zip"), extra={"../evil.json": "{}"})
        pack(os.path.join(d, "v2.zip"), manifest=dict(MANIFEST, format_version=2))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_case(self, name):
        case = os.path.join(CASES, name)
        work = tempfile.mkdtemp(prefix="case_", dir=self.tmp)
        # config_check reads MSPROBE_* (salt, log file, ...): none of ctest's may leak in
        env = {k: v for k, v in os.environ.items() if not k.startswith("MSPROBE_")}
        env.update(MSPROBE=BIN, DATA=self.data)
        cli_cases.check_case(self, case, work, env, [(self.data, "$DATA"), (work, "$TMP")],
                             timeout=120)

    def test_cases(self):
        only = os.environ.get("MSPROBE_CLI_CASE")
        names = sorted(os.listdir(CASES))
        self.assertGreater(len(names), 0)
        for name in names:
            if only and name != only:
                continue
            with self.subTest(case=name):
                self.run_case(name)


if __name__ == "__main__":
    unittest.main()
