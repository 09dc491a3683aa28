"""The preload stub is harmless outside torch: it exports only msprobe_step and
references no Python or HDF5 symbol, bash and gcc run normally under it, Pythons
without audit hooks (< 3.8) ignore it, and every CPython >= 3.8 (dynamically
linked pyenv builds included) boots the one limited-API Python side: proven
by the config check it runs, while a valid config with torch API names does
no harm where torch is absent."""
import glob
import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402


def dyn_symbols(lib, defined):
    out = subprocess.run(["nm", "-D", "--defined-only" if defined else "--undefined-only", lib],
                         capture_output=True, text=True, check=True).stdout
    return {l.split()[-1].split("@")[0] for l in out.splitlines() if l.strip()}


def other_pythons():
    """Interpreters other than MSPROBE_PYTHON: pyenv versions and python3 on PATH."""
    found = set(glob.glob(os.path.expanduser("~/.pyenv/versions/*/bin/python3")))
    found |= set(glob.glob(os.path.expanduser("~/.pyenv/versions/2*/bin/python")))
    w = shutil.which("python3")
    if w and "shims" not in w:
        found.add(w)
    me = os.path.realpath(dt.PYTHON)
    return sorted(p for p in found if os.path.realpath(p) != me and os.access(p, os.X_OK))


def version_of(py):
    out = subprocess.run([py, "-c", "import sys; print('%d %d' % sys.version_info[:2])"],
                         capture_output=True, text=True, env={"PATH": os.environ.get("PATH", "")})
    return tuple(int(x) for x in out.stdout.split()) if out.returncode == 0 else None


BAD_API = {"dump": {"common_dump_settings": {"dump_path": "./d"},
                    "api_list": [{"name": "torch.nn..conv2d", "api_type": "forward"}]}}
TORCH_API = {"dump": {"common_dump_settings": {"dump_path": "./d", "dump_iter": "all"},
                      "api_list": [{"name": "torch.matmul", "api_type": "all"},
                                   {"name": "torch.nn.functional.relu", "api_type": "forward"}]}}
SCRIPT = ("try:\n    import torch\nexcept ImportError:\n    pass\n"
          "import json, os\nprint(json.dumps({'ok': os.getpid() > 0}))\n")


class Preload(dt.ShimCase):
    def test_exports_and_references(self):
        self.assertEqual(dyn_symbols(dt.PRELOAD, True), {"msprobe_step"})
        undefined = dyn_symbols(dt.PRELOAD, False)
        bad = [s for s in undefined if s.startswith(("Py", "_Py", "H5", "hdf5"))]
        self.assertEqual(bad, [], "the stub references Python/HDF5 symbols")
        needed = subprocess.run(["readelf", "-d", dt.PRELOAD], capture_output=True, text=True).stdout
        self.assertNotRegex(needed, r"NEEDED.*(python|hdf5)")
        pyside = os.path.join(os.path.dirname(dt.PRELOAD), "libmsprobe_py.so")
        self.assertEqual(dyn_symbols(pyside, True), {"msp_py_boot", "msp_py_boot_script",
                                                  "msp_py_step"})
        needed = subprocess.run(["readelf", "-d", pyside], capture_output=True, text=True).stdout
        self.assertNotRegex(needed, r"NEEDED.*libpython", "the Python side must not link libpython")

    def test_bash_and_gcc_run_normally(self):
        cfg = self.write_config(BAD_API)  # would stop a Python process: proves nothing leaks
        p = self.run_cmd(["bash", "-c", "echo $((6 * 7))"], cfg)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "42\n", ""))
        with open(self.path("hello.c"), "w") as f:
            f.write('#include <stdio.h>\nint main(void){puts("hello");return 3;}\n')
        p = self.run_cmd(["gcc", "-o", "hello", "hello.c"], cfg)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        p = self.run_cmd([self.path("hello")], cfg)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (3, "hello\n", ""))

    def test_every_way_python_runs_code_boots_the_shim(self):
        cfg = self.write_config(BAD_API)
        with open(self.path("mod_x.py"), "w") as f:
            f.write("open('ran', 'w')\n")
        for argv, stdin in (([dt.PYTHON, "mod_x.py"], None), ([dt.PYTHON, "-m", "mod_x"], None),
                            ([dt.PYTHON, "-c", "open('ran','w')"], None),
                            ([dt.PYTHON, "-"], "open('ran','w')\n")):
            env = dict(os.environ, LD_PRELOAD=dt.PRELOAD, MSPROBE_PATH=cfg)
            p = subprocess.run(argv, cwd=self.dir, env=env, input=stdin, capture_output=True,
                               text=True)
            self.assertEqual(p.returncode, 2, (argv, p.stderr))
            self.assertIn("api_list[0].name", p.stderr)
            self.assertFalse(os.path.exists(self.path("ran")), argv)

    def test_other_pythons(self):
        pys = other_pythons()
        if not pys:
            self.skipTest("no other Python installed")
        bad = self.write_config(BAD_API, "bad.json")
        good = self.write_config(TORCH_API, "good.json")
        booted = 0
        for py in pys:
            v = version_of(py)
            if v is None:
                continue
            with self.subTest(python=py, version=v):
                script = SCRIPT if v >= (3, 0) else "print('{\"ok\": true}')"
                plain = self.run_cmd([py, "-c", script], preload=False)
                p = self.run_cmd([py, "-c", script], bad)
                if v >= (3, 8):
                    booted += 1
                    self.assertEqual(p.returncode, 2, p.stderr)
                    self.assertIn("torch.nn..conv2d", p.stderr)
                else:  # no audit hooks: the stub stays out of the way
                    self.assertEqual((p.returncode, p.stdout, p.stderr),
                                     (plain.returncode, plain.stdout, plain.stderr))
                p = self.run_cmd([py, "-c", script], good)
                self.assertEqual((p.returncode, p.stdout, p.stderr),
                                 (plain.returncode, plain.stdout, plain.stderr))
                self.assertEqual(dt.dump_files(self.path("d")), {})
        if booted == 0:
            self.skipTest("no other Python >= 3.8 installed")

    def test_launcher_runs_training_with_the_shim(self):
        msprobe = os.environ.get("MSPROBE_BIN")
        if not msprobe or not os.path.exists(msprobe):
            self.skipTest("MSPROBE_BIN not built")
        cfg = self.write_config(dt.config("./ld", steps="1",
                                          api_list=[("torch.nn.functional.linear", "forward")]))
        env = dict(os.environ, MSPROBE_PRELOAD_LIB=dt.PRELOAD)
        env.pop("LD_PRELOAD", None)
        p = subprocess.run([msprobe, "dump", "-c", cfg, "--", dt.PYTHON, dt.TRAIN, "--steps", "2"],
                           cwd=self.dir, env=env, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        recs, _ = dt.read_dump(dt.dump_files(self.path("ld"))[(1, 0)])
        self.assertEqual(set(recs), {"Functional.linear.0.forward", "Functional.linear.1.forward"})


if __name__ == "__main__":
    unittest.main()
