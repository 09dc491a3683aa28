"""Every option that names a file to read refuses anything but a regular file
(issue 37, item 3): a FIFO given as compare's --mapping blocked it forever, a
device (/dev/zero) was read up to a size cap. Each option, in our spelling and
msprobe's, gets a FIFO and /dev/zero under a timeout: exit 2 at once, an error
naming the option and the path. The files read from inside a directory
(merge_result's result.csv) are refused the same way by the reader itself,
and the dump paths of every command stay refused. The controls run each
command line with regular files and see it get past that check."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
import msp_h5dump as D  # noqa: E402
from msp_build import sanitized_build

BIN = os.environ["MSPROBE_BIN"]
TIMEOUT = 30  # a hang check: each refusal comes before anything is read


class OptionFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="msp-optfile-")
        t = cls.path
        x = np.linspace(-1.0, 1.0, 8).astype(np.float32)
        cls.dump = t("dump.h5")
        D.write_dump(cls.dump, [("Torch.add.0.forward", 0, {"input.0": x, "output.0": x})])
        cls.fifo = t("fifo")
        os.mkfifo(cls.fifo)
        with open(t("map.txt"), "w") as f:
            f.write("Torch.add.0.forward Torch.add.0.forward\n")
        with open(t("cell.yaml"), "w") as f:
            f.write("Cell.net.Dense: Module.net.Linear\n")
        with open(t("compare.json"), "w") as f:
            f.write('{"npu_path": "%s", "bench_path": "%s"}' % (cls.dump, cls.dump))
        with open(t("details.csv"), "w") as f:
            f.write("API Name\n")
        with open(t("merge.yaml"), "w") as f:
            f.write("api:\n  - add\ncompare_index:\n  - Cosine\n")
        with open(t("aliases.json"), "w") as f:
            f.write("{}\n")
        with open(t("keys.txt"), "w") as f:
            f.write("PATH\n")
        with open(t("msprobe.json"), "w") as f:
            f.write('{"dump": {"common_dump_settings": {"dump_path": "%s"}}}' % t("dumped"))
        p = subprocess.run([BIN, "config_check", "-d", "-o", t("pack.zip")], capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        p = subprocess.run([BIN, "compare", "-b", cls.dump, "-c", cls.dump, "-o", t("results"),
                            "--csv", "--no-html", "--replay", "off"], capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def path(cls, *p):
        return os.path.join(cls.tmp, *p)

    def run_cli(self, args, env=None):
        e = dict(os.environ)
        e.pop("MSPROBE_PATH", None)
        e.update(env or {})
        return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=TIMEOUT,
                              env=e, cwd=self.tmp)

    def cases(self):
        """(command line with X for the file, option named in the error, env)."""
        t, d, out = self.path, self.dump, self.path("out")
        cmp = ["compare", "-b", d, "-c", d, "-o", out, "--no-html", "--replay", "off"]
        apc = ["api_precision_compare", "-o", out]
        cc = ["config_check", "-o", out, "--no-html"]
        return [
            (cmp + ["--mapping", "X"], "--mapping", None),
            (cmp + ["-dm", "X"], "--mapping", None),  # msprobe 26's spelling
            (cmp + ["--cell-mapping", "X"], "--cell-mapping", None),
            (cmp + ["-cm", "X"], "--cell-mapping", None),
            (["compare", "-o", out, "--input-json", "X"], "--input-json", None),
            (["compare", "-o", out, "-i", "X"], "--input-json", None),  # msprobe 8.x's
            (apc + ["--npu_csv_path", "X", "--gpu_csv_path", t("details.csv")], "--npu_csv_path",
             None),
            (apc + ["-npu", t("details.csv"), "-gpu", "X"], "--gpu_csv_path", None),
            (cc + ["-c", "X", t("pack.zip")], "-c BENCH", None),
            (cc + ["-c", t("pack.zip"), "X"], "-c CMP", None),
            (cc + ["-c", t("pack.zip"), t("pack.zip"), "--aliases", "X"], "--aliases", None),
            (cc + ["-c", t("pack.zip"), t("pack.zip"), "--env-keys", "X"], "--env-keys", None),
            (["merge_result", "-i", t("results"), "-o", out, "--config-path", "X"],
             "--config-path", None),
            (["merge_result", "-i", t("results"), "-o", out, "-config", "X"], "--config-path",
             None),
            (["dump", "-c", "X", "--", "true"], "-c", None),
            (["dump", "--", "true"], "MSPROBE_PATH", {"MSPROBE_PATH": "X"}),
        ]

    def controls(self):
        """The file each case's option takes when it is a regular one."""
        t = self.path
        return {"--mapping": t("map.txt"), "--cell-mapping": t("cell.yaml"),
                "--input-json": t("compare.json"), "--npu_csv_path": t("details.csv"),
                "--gpu_csv_path": t("details.csv"), "-c BENCH": t("pack.zip"),
                "-c CMP": t("pack.zip"), "--aliases": t("aliases.json"),
                "--env-keys": t("keys.txt"), "--config-path": t("merge.yaml"),
                "-c": t("msprobe.json"), "MSPROBE_PATH": t("msprobe.json")}

    @staticmethod
    def fill(args, env, path):
        return ([path if a == "X" else a for a in args],
                {k: path if v == "X" else v for k, v in (env or {}).items()})

    def test_each_option_refuses_a_fifo_and_a_device_at_once(self):
        for special in (self.fifo, "/dev/zero"):
            for args, opt, env in self.cases():
                a, e = self.fill(args, env, special)
                with self.subTest(args=a[:2] + [opt], file=special):
                    p = self.run_cli(a, e)
                    self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                    first = p.stderr.splitlines()[0]
                    self.assertIn(": %s: %s: not a regular file" % (opt, special), first)
                    self.assertIn("a FIFO" if special == self.fifo else "a device", first)

    def test_controls_get_past_the_check_with_regular_files(self):
        regular = self.controls()
        for args, opt, env in self.cases():
            a, e = self.fill(args, env, regular[opt])
            with self.subTest(args=a[:2] + [opt]):
                p = self.run_cli(a, e)
                self.assertNotIn("not a regular file", p.stderr)
                if "csv_path" in opt:  # read, and judged by its content
                    self.assertIn("not an acc_check details CSV", p.stderr)
                elif a[0] == "dump" and sanitized_build():
                    # past the check msprobe runs `true` with the shim preloaded, which
                    # an ASan-built shim cannot join: that exit says nothing here
                    self.assertNotIn("msprobe: dump:", p.stderr)
                else:
                    self.assertIn(p.returncode, (0, 1), p.stderr)

    def test_result_csv_inside_merge_results_is_refused_by_the_reader(self):
        res = self.path("results_special")
        os.mkdir(res)
        self.addCleanup(shutil.rmtree, res, True)
        csv = os.path.join(res, "result.csv")
        for make, kind in ((os.mkfifo, "a FIFO"), (lambda p: os.symlink("/dev/zero", p),
                                                     "a device")):
            with self.subTest(kind=kind):
                make(csv)
                p = self.run_cli(["merge_result", "-i", res, "-o", self.path("out"),
                                  "-config", self.path("merge.yaml")])
                os.unlink(csv)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("%s: not a regular file (%s" % (csv, kind), p.stderr)

    def test_dump_paths_stay_refused_without_blocking(self):
        for special in (self.fifo, "/dev/zero"):
            for args in (["ls", "X"], ["compare", "-b", "X", "-c", self.dump, "-o", "o"],
                         ["compare", "-b", self.dump, "-c", "X", "-o", "o"],
                         ["overflow_check", "-i", "X"], ["export", "X", "-o", "o"],
                         ["acc_check", "-d", "X"]):
                a, _ = self.fill(args, None, special)
                with self.subTest(args=a):
                    p = self.run_cli(a)
                    self.assertEqual(p.returncode, 2, p.stderr)
                    self.assertIn(special, p.stderr)


if __name__ == "__main__":
    unittest.main()
