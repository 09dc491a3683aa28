"""A script written against Huawei msprobe's API (from msprobe.pytorch import
PrecisionDebugger, seed_all) runs under the shim without that package, and
its calls drive the dump: debugger.step() alone counts steps (the script
makes two optimizer steps per debugger step), nothing is recorded outside
start() .. stop(), start(model) names the root, config_path and step= are
honoured, a bad config_path stops it before training, its losses are those
of the same script run with msprobe's seeds and no shim, and a real msprobe
on sys.path is imported instead of the shim's; when that msprobe hooks torch
as Huawei's does, its own calls are no records and its own dump directories
are left out of compare."""
import glob
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "precision_debugger_train.py")
FAKE = os.path.join(HERE, "fake_msprobe")
HOOKING = os.path.join(HERE, "hooking_msprobe")  # wraps torch and hooks as msprobe does
MSPROBE = os.environ.get("MSPROBE_BIN", "")


def ms_config(dump_path, step):
    """msprobe's own config.json layout, a statistics dump at level mix."""
    return {"task": "statistics", "dump_path": dump_path, "rank": [], "step": step,
            "level": "mix", "statistics": {"scope": [], "list": [], "data_mode": ["all"],
                                           "summary_mode": "statistics"}}


def losses(stdout):
    return [line for line in stdout.splitlines() if line.startswith("step ")]


class PrecisionDebuggerScripts(dt.ShimCase):
    def run_script(self, args, cfg=None, preload=True, pythonpath=None, via_cli=False):
        env = {"OMP_NUM_THREADS": "1"}
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        argv = [dt.PYTHON, SCRIPT] + list(args)
        if via_cli:
            argv = [MSPROBE, "dump", "-c", cfg, "--"] + argv
            cfg = None
        return self.run_cmd(argv, cfg, preload and not via_cli, env)

    def plain_losses(self):
        """The script with msprobe's seeds and no shim: the fake package stands in."""
        p = self.run_script([self.path("none.json")], preload=False, pythonpath=FAKE)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual(len(losses(p.stdout)), 12)
        return losses(p.stdout)

    def check_window(self, files):
        """Each dumped step holds its two micro-batches, and nothing from
        outside start() .. stop()."""
        for key, f in sorted(files.items()):
            recs, root = dt.read_dump(f)
            self.assertEqual(int(root["step"]), key[0])
            names = set(recs)
            for n in ("Module.ResNet.forward.0", "Module.ResNet.forward.1",
                      "Module.layer1.0.conv1.Conv2d.forward.0",
                      "Functional.conv2d.0.forward", "Functional.cross_entropy.1.forward",
                      "Functional.cross_entropy.1.backward", "Module.fc.Linear.backward.1",
                      "Optimizer.SGD.0.step", "Optimizer.SGD.1.step"):
                self.assertIn(n, names, "step %d" % key[0])
            self.assertNotIn("Optimizer.SGD.2.step", names)
            self.assertNotIn("Module.ResNet.forward.2", names)
            # the tanh after stop(), the mul between step() and start(), seed_all's calls
            bad = [n for n in names if n.startswith(("Torch.tanh", "Tensor.tanh", "Torch.mul",
                                                     "Tensor.mul", "Torch.manual_seed"))
                   or "seed" in n or "determin" in n]
            self.assertEqual(bad, [], "step %d" % key[0])

    def test_config_steps_under_msprobe_dump(self):
        if not MSPROBE or not os.path.exists(MSPROBE):
            self.skipTest("MSPROBE_BIN not set (run through ctest)")
        cfg = self.write_config(ms_config(self.path("a"), [1, 2]), "config.json")
        p = self.run_script([cfg], cfg, via_cli=True)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        files = dt.dump_files(self.path("a"))
        self.assertEqual(sorted(files), [(1, 0), (2, 0)])
        self.check_window(files)
        self.assertEqual(losses(p.stdout), self.plain_losses())
        self.assertIn("msprobe from None", p.stdout)  # the shim's module: no file

    def test_step_argument_under_plain_ld_preload(self):
        # the config asks for steps 0 and 3; PrecisionDebugger(step=[1, 2]) decides
        cfg = self.write_config(ms_config(self.path("b"), [0, 3]), "config.json")
        p = self.run_script([cfg, "1,2"], cfg)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        files = dt.dump_files(self.path("b"))
        self.assertEqual(sorted(files), [(1, 0), (2, 0)])
        self.check_window(files)

    def test_config_path_other_than_msprobe_path_is_honoured(self):
        boot = self.write_config(ms_config(self.path("c"), [0]), "boot.json")
        other = self.write_config(ms_config(self.path("c"), [3]), "other.json")
        p = self.run_script([other], boot)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual(sorted(dt.dump_files(self.path("c"))), [(3, 0)])
        # what cannot change once the dump runs is named, not silently dropped
        moved = self.write_config(ms_config(self.path("elsewhere"), [3]), "moved.json")
        p = self.run_script([moved], boot)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertIn("moved.json: dump_path differs from %s" % boot, p.stderr)

    def test_bad_config_path_stops_before_training(self):
        cfg = self.write_config(ms_config(self.path("d"), [1]), "config.json")
        bad = self.write_config('{"task": "tensr"}', "bad.json")
        p = self.run_script([bad], cfg)
        self.assertEqual(p.returncode, 2)
        self.assertIn("msprobe: %s: task: expected" % bad, p.stderr)
        self.assertIn('got "tensr"', p.stderr)
        self.assertEqual(losses(p.stdout), [])
        p = self.run_script([self.path("missing.json")], cfg)
        self.assertEqual(p.returncode, 2)
        self.assertIn(self.path("missing.json"), p.stderr)
        self.assertEqual(losses(p.stdout), [])
        p = self.run_script([cfg, "-1"], cfg)
        self.assertEqual(p.returncode, 2)
        self.assertIn("msprobe: PrecisionDebugger(): step[0]: expected a number >= 0", p.stderr)
        self.assertFalse(os.path.exists(self.path("d")) and dt.dump_files(self.path("d")))

    def test_config_path_alone_when_the_shim_has_no_config(self):
        # no MSPROBE_PATH, no ./msprobe.json: the shim boots at `import msprobe`
        # and the script's config_path is the config
        cfg = self.write_config(ms_config(self.path("g"), [1, 2]), "config.json")
        p = self.run_script([cfg])
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        files = dt.dump_files(self.path("g"))
        self.assertEqual(sorted(files), [(1, 0), (2, 0)])
        self.check_window(files)
        self.assertEqual(losses(p.stdout), self.plain_losses())
        # nothing has started: every argument applies, dump_path and level too
        cfg = self.write_config(ms_config(self.path("h"), [0, 3]), "h.json")
        p = self.run_script([cfg, "1", "dump_path=" + self.path("h2"), "level=L1"])
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertNotIn("differ", p.stderr)
        self.assertFalse(os.path.exists(self.path("h")))
        files = dt.dump_files(self.path("h2"))
        self.assertEqual(sorted(files), [(1, 0)])
        names = set(dt.read_dump(files[(1, 0)])[0])
        self.assertIn("Functional.conv2d.0.forward", names)
        self.assertFalse([n for n in names if n.startswith("Module.")])  # L1: APIs only
        p = self.run_script(["-"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("msprobe: PrecisionDebugger(): no config_path", p.stderr)
        self.assertEqual(losses(p.stdout), [])

    def test_no_config_loads_nothing_until_msprobe_is_imported(self):
        probe = ("import sys\n"
                 "def loaded():\n"
                 "    return 'libmsprobe_py.so' in open('/proc/self/maps').read()\n"
                 "import json, torch\n"
                 "print(loaded())\n"
                 "try:\n"
                 "    import msprobe\n"
                 "except ImportError:\n"
                 "    pass\n"
                 "print(loaded(), type(sys.modules.get('msprobe')).__name__)\n")
        p = self.run_cmd([dt.PYTHON, "-c", probe])
        self.assertEqual((p.returncode, p.stdout), (0, "False\nTrue module\n"), p.stderr)
        p = self.run_cmd([dt.PYTHON, "-c", probe], preload=False)
        self.assertEqual((p.returncode, p.stdout), (0, "False\nFalse NoneType\n"), p.stderr)

    def test_without_the_shim_the_script_cannot_import_msprobe(self):
        cfg = self.write_config(ms_config(self.path("e"), [1]), "config.json")
        p = self.run_script([cfg], cfg, preload=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("ModuleNotFoundError: No module named 'msprobe'", p.stderr)

    def test_real_msprobe_on_the_path_is_not_shadowed(self):
        cfg = self.write_config(ms_config(self.path("f"), [1, 2]), "config.json")
        p = self.run_script([cfg], cfg, pythonpath=FAKE)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertIn("msprobe from " + os.path.join(FAKE, "msprobe", "__init__.py"), p.stdout)
        self.assertEqual(losses(p.stdout), self.plain_losses())
        # its no-op debugger drives nothing: steps end at each optimizer.step()
        files = dt.dump_files(self.path("f"))
        self.assertEqual(sorted(files), [(1, 0), (2, 0)])
        for f in files.values():
            names = set(dt.read_dump(f)[0])
            self.assertIn("Optimizer.SGD.0.step", names)
            self.assertNotIn("Optimizer.SGD.1.step", names)

    def test_hooking_msprobe_own_calls_are_not_recorded(self):
        """A package that wraps torch's APIs over the shim's and computes
        statistics of every output through torch.max/min/mean/norm and
        Tensor.clone, as Huawei's msprobe 26 does: the dump holds what the
        same script's dump holds with the no-op stand-in, record for record,
        statistic for statistic, call site for call site."""
        if not MSPROBE or not os.path.exists(MSPROBE):
            self.skipTest("MSPROBE_BIN not set (run through ctest)")
        dumps = {}
        for name, pkg in (("plain", FAKE), ("hooking", HOOKING)):
            cfg = self.write_config(ms_config(self.path(name), [1, 2]), name + ".json")
            argv = [MSPROBE, "dump", "-c", cfg, "--", dt.PYTHON, SCRIPT, cfg]
            p = self.run_cmd(argv, None, False, {"OMP_NUM_THREADS": "1", "PYTHONPATH": pkg})
            self.assertEqual(p.returncode, 0, p.stderr[-3000:])
            self.assertIn("msprobe from " + os.path.join(pkg, "msprobe", "__init__.py"), p.stdout)
            dumps[name] = (losses(p.stdout), dt.dump_files(self.path(name)))
        self.assertEqual(dumps["hooking"][0], dumps["plain"][0])  # training unchanged
        # the stand-in did its work: its statistics of the script's calls, per window
        procs = glob.glob(self.path("hooking", "step0", "proc*", "dump.json"))
        self.assertEqual(len(procs), 1)
        with open(procs[0]) as f:
            stats = json.load(f)["data"]
        self.assertIn("Functional.conv2d.0", stats)
        self.assertTrue(any(k.startswith("Module.") for k in stats))
        plain, hooking = dumps["plain"][1], dumps["hooking"][1]
        self.assertEqual(sorted(hooking), [(1, 0), (2, 0)])
        self.assertEqual(sorted(plain), sorted(hooking))
        for key in sorted(plain):
            a, b = dt.read_dump(plain[key])[0], dt.read_dump(hooking[key])[0]
            own = [n for n in b if n.startswith(("Torch.max", "Torch.min", "Torch.mean",
                                                 "Torch.norm", "Tensor.clone"))]
            self.assertEqual(own, [], "step %d" % key[0])
            self.assertEqual(sorted(b), sorted(a), "step %d" % key[0])
            for n in a:
                self.assertEqual(b[n]["attrs"].get("stack"), a[n]["attrs"].get("stack"), n)
                self.assertEqual(b[n]["attrs"].get("order"), a[n]["attrs"].get("order"), n)
                for role, ta in a[n]["tattrs"].items():
                    tb = b[n]["tattrs"][role]
                    for k in ("max", "min", "mean", "norm"):
                        self.assertEqual(str(tb.get(k)), str(ta.get(k)), (n, role, k))
            self.assertFalse([n for n, r in b.items() if "hooking_msprobe" in
                              str(r["attrs"].get("stack", ""))])
        # msprobe's own proc<PID>/ directories in our root are not a rank of ours
        root = self.path("hooking")
        p = self.run_cmd([MSPROBE, "compare", "-b", root, "-c", root, "-o", self.path("cmp")],
                         preload=False)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertIn("pairs 2,", p.stdout)
        n_procs = len(glob.glob(os.path.join(root, "step*", "proc*")))
        self.assertEqual(n_procs, 4)  # its four debugger steps
        self.assertIn("bench dump: %d msprobe dump directories beside this shim's rank "
                      "directories left out (%s" % (n_procs, root), p.stderr)


if __name__ == "__main__":
    unittest.main()
