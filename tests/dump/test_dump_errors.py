"""Every config error stops the process with status 2 before the user's script
runs, with one "msprobe: <file>: <what>" line naming the key; a tensor the
shim cannot read costs one warning and changes nothing; no config, no shim."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

MARK = "open('script_ran', 'w').write('yes'); print('script output')"


class ConfigErrors(dt.ShimCase):
    def expect_exit2(self, cfg_path, *needles):
        p = self.run_cmd([dt.PYTHON, "-c", MARK], cfg_path)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertFalse(os.path.exists(self.path("script_ran")), "the script ran")
        self.assertEqual(p.stdout, "")
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertTrue(lines[0].startswith("msprobe: "), lines[0])
        self.assertNotIn("Traceback", p.stderr)
        for n in needles:
            self.assertIn(n, lines[0])
        return lines[0]

    def test_missing_config_named_by_msprobe_path(self):
        self.expect_exit2(self.path("nope.json"), "nope.json")

    def test_malformed_json(self):
        cfg = self.write_config('{"dump": {"common_dump_settings": {"dump_mode": "api",}}', "bad.json")
        self.expect_exit2(cfg, "bad.json")

    def test_unknown_key_named(self):
        cfg = self.write_config({"dump": {"common_dump_settings": {"dump_itr": "1"}}}, "k.json")
        self.expect_exit2(cfg, "k.json", "dump_itr")

    def test_wrong_type_named(self):
        cfg = self.write_config({"dump": {"common_dump_settings": {"task": True}}}, "t.json")
        self.expect_exit2(cfg, "t.json", "task")

    def test_unknown_api_warned_at_start_naming_its_key_with_near_match(self):
        # Which APIs exist is this torch's business: the run goes on, and each
        # name this torch lacks is one warning when torch is imported, before
        # the script trains, naming the key it was written under.
        cfg = self.write_config(dt.config("./d", trigger="manual", api_list=[
            ("torch.nn.functional.conv2", "forward"), ("torch.nn.functional.linear", "forward"),
            ("torch.nn.functional.matmul", "forward")]), "u.json")
        script = "import sys, torch\nprint('TRAINING STARTS', file=sys.stderr)\n" + MARK
        p = self.run_cmd([dt.PYTHON, "-c", script], cfg)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.exists(self.path("script_ran")))
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 3, p.stderr)
        self.assertEqual(lines[2], "TRAINING STARTS")  # both warnings came before it
        self.assertEqual(lines[0], 'msprobe: warning: %s: dump.api_list[0].name '
                         '"torch.nn.functional.conv2": not an API of this torch (did you mean '
                         '"torch.nn.functional.conv2d"?); nothing is dumped for it' % cfg)
        self.assertEqual(lines[1], 'msprobe: warning: %s: dump.api_list[2].name '
                         '"torch.nn.functional.matmul": not an API of this torch (did you mean '
                         '"torch.matmul"?); nothing is dumped for it' % cfg)

    def test_misspelt_api_in_msprobe_config_json_is_warned_at_start_under_list(self):
        cfg = self.write_config({"task": "statistics", "dump_path": "./d", "rank": [], "step": [0],
                                 "level": "L1", "statistics": {
                                     "list": ["Functional.relu.0.forward",
                                              "Functional.conv2e.0.forward"]}}, "config.json")
        script = "import sys, torch\nprint('TRAINING STARTS', file=sys.stderr)\n" + MARK
        p = self.run_cmd([dt.PYTHON, "-c", script], cfg)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stderr.strip().splitlines()
        self.assertEqual(len(lines), 2, p.stderr)
        self.assertEqual(lines[1], "TRAINING STARTS")
        self.assertIn('config.json: statistics.list[1] "Functional.conv2e.0.forward": not an API '
                      'of this torch (did you mean "torch.nn.functional.conv2d"?)', lines[0])
        self.assertNotIn("api_list", p.stderr)  # a key config.json does not have

    def test_empty_module_name_in_list_is_refused(self):
        for bad in ("Module.", "Functional.", "Module..forward"):
            with self.subTest(bad=bad):
                cfg = self.write_config({"task": "statistics", "dump_path": "./d", "rank": [],
                                         "step": [0], "level": "L0",
                                         "statistics": {"list": [bad]}}, "config.json")
                self.expect_exit2(cfg, "config.json", "statistics.list[0]", '"%s"' % bad,
                                  "empty name")

    def test_step_past_two_to_the_53_is_refused_not_rounded(self):
        cfg = self.write_config('{"task": "statistics", "dump_path": "./d", "rank": [], '
                                '"step": [9007199254740993], "level": "L1"}', "config.json")
        self.expect_exit2(cfg, "config.json", "step[0]", "9007199254740991", "as a string")
        cfg = self.write_config({"dump": {"common_dump_settings": {
            "dump_iter": 9007199254740993}}}, "s.json")
        self.expect_exit2(cfg, "s.json", "dump_iter", "exact only up to 9007199254740991")

    def test_malformed_api_name_stops_the_run(self):
        for bad in ("torch.nn..conv2d", "torch.nn.functional.conv2d.", "torch.nn.functional.gelu()",
                    "mypkg..fn", ".layer1"):
            cfg = self.write_config(dt.config("./d", api_list=[
                ("torch.nn.functional.linear", "forward"), (bad, "forward")]), "m.json")
            self.expect_exit2(cfg, "m.json", "dump.api_list[1].name", '"%s"' % bad)

    def test_unwritable_dump_path(self):
        with open(self.path("a_file"), "w") as f:
            f.write("x")
        cfg = self.write_config(dt.config(self.path("a_file", "sub")), "w.json")
        self.expect_exit2(cfg, "w.json", "dump_path", "a_file")

    def test_unchanged_script_under_error_free_shim_and_no_config(self):
        p = self.run_cmd([dt.PYTHON, "-c", MARK])
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "script output\n", ""))
        self.assertFalse(os.path.exists(self.path("msprobe_dump_data")))

    def test_msprobe_json_in_cwd_is_used(self):
        self.write_config({"dump": {"common_dump_settings": {"dump_mode": "bogus"}}})
        p = self.run_cmd([dt.PYTHON, "-c", MARK])
        self.assertEqual(p.returncode, 2)
        self.assertIn("msprobe.json", p.stderr)
        self.assertIn("dump_mode", p.stderr)


ODD = r"""
import torch
a = torch.ones(2, 2, dtype=torch.complex64)
b = torch.arange(4.0).reshape(2, 2)
outs = []
for i in range(3):
    c = torch.matmul(a, a)              # complex: no msprobe dtype
    s = torch.matmul(b.to_sparse(), b)  # sparse input: no DLPack
    d = torch.matmul(b, b)              # fine
    outs.append((c.real.sum().item(), s.sum().item(), d.sum().item()))
print(outs)
"""


class OddTensors(dt.ShimCase):
    def check_lines(self, lines):
        """Each kind of warning once as it happens, then at exit how often each
        fired. 3 calls: matmul(a, a) has 3 complex
        tensors each (2 inputs, the output), matmul(sparse, b) 1 sparse input."""
        first = [l for l in lines if l.startswith("msprobe: warning:") and "times in all" not in l
                 and "no step ended" not in l]
        self.assertEqual(len(first), 2, lines)
        self.assertTrue(any("complex64" in w for w in first), first)
        self.assertTrue(any("sparse" in w for w in first), first)
        counts = [l for l in lines if "times in all" in l]
        self.assertEqual(len(counts), 2, lines)
        for w in first:
            text = w[len("msprobe: warning: "):]
            n = 3 * 3 if "complex64" in w else 3 * 1
            self.assertIn("msprobe: warning: fired %d times in all: %s" % (n, text), counts)
        # no backward pass ran: no training to which a step_trigger would apply
        self.assertEqual([l for l in lines if "no step ended" in l], [], lines)
        self.assertEqual(len(lines), 4, lines)

    def test_one_warning_per_kind_and_results_unchanged(self):
        cfg = self.write_config(dt.config("./d", api_list=[("torch.matmul", "forward")]))
        plain = self.run_cmd([dt.PYTHON, "-c", ODD], preload=False)
        shim = self.run_cmd([dt.PYTHON, "-c", ODD], cfg)
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertEqual(shim.returncode, 0, shim.stderr)
        self.assertEqual(shim.stdout, plain.stdout)
        self.check_lines(shim.stderr.splitlines())
        recs, _ = dt.read_dump(dt.dump_files(self.path("d"))[(0, 0)])
        # the readable tensors of those calls are still there
        self.assertIn("input.1", recs["Torch.matmul.1.forward"])
        self.assertIsNotNone(recs["Torch.matmul.2.forward"]["output.0"])

    def test_log_file_takes_the_messages(self):
        cfg = self.write_config(dt.config("./d", api_list=[("torch.matmul", "forward")]))
        log = self.path("shim.log")
        p = self.run_cmd([dt.PYTHON, "-c", ODD], cfg, env_extra={"MSPROBE_LOG_FILE": log})
        self.assertEqual(p.returncode, 0)
        self.assertEqual(p.stderr, "")
        with open(log) as f:
            self.check_lines(f.read().splitlines())

    def test_a_run_with_steps_gets_no_step_hint(self):
        cfg = self.write_config(dt.config("./d", steps="0"))
        p = self.train(["--steps", "2"], cfg)
        self.assertEqual(p.stderr, "")


class EnvSizes(dt.ShimCase):
    """A size the environment gives the shim (MSPROBE_QUEUE_MB) that is not a
    whole number of MiB costs one warning naming it, and the run goes on with
    the default: the same losses, the same dump."""

    def run_with(self, value):
        cfg = self.write_config(dt.config("./d_%s" % value, steps="0"))
        return self.train(["--steps", "2", "--print-losses"], cfg,
                          env_extra={"MSPROBE_QUEUE_MB": value})

    def test_bad_value_warned_once_and_the_default_used(self):
        plain = self.train(["--steps", "2", "--print-losses"], preload=False)
        self.assertEqual(len(dt.losses(plain.stdout)), 2, plain.stdout)
        for value in ("lots", "0", "-5", "12MB", "2000000"):
            p = self.run_with(value)
            self.assertEqual(dt.losses(p.stdout), dt.losses(plain.stdout), value)
            self.assertEqual(p.stderr.splitlines(),
                             ["msprobe: warning: MSPROBE_QUEUE_MB=%s is not a number of MiB "
                              "from 1 to 1048576; using 256" % value], value)
            self.assertIn((0, 0), dt.dump_files(self.path("d_%s" % value)), value)

    def test_good_value_says_nothing(self):
        p = self.run_with("64")
        self.assertEqual(p.stderr, "")
        self.assertIn((0, 0), dt.dump_files(self.path("d_64")))


class DiskFull(dt.ShimCase):
    def test_full_disk_leaves_no_broken_or_empty_file_and_changes_nothing(self):
        small = self.path("small")
        os.makedirs(small)
        mount = dt.subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", small],
                                  capture_output=True)
        if mount.returncode != 0:
            self.skipTest("cannot mount a small tmpfs here (needs root): " +
                          mount.stderr.decode(errors="replace").strip())
        try:
            cfg = self.write_config(dt.config(os.path.join(small, "d"), steps="all"))
            shim = self.train(["--steps", "4", "--print-losses"], cfg)
            plain = self.train(["--steps", "4", "--print-losses"], preload=False)
            self.assertEqual(dt.losses(shim.stdout), dt.losses(plain.stdout))
            lines = shim.stderr.splitlines()
            self.assertTrue(lines[0].startswith("msprobe: warning: "), lines[0])
            self.assertIn("No space left on device", lines[0])
            # no dump.h5 that a reader would trip on: none empty, each opens with h5py
            import h5py
            found = []
            for dirpath, _, names in os.walk(os.path.join(small, "d")):
                for n in names:
                    p = os.path.join(dirpath, n)
                    self.assertFalse(n.endswith(".part"), "part file left: " + p)
                    if n == "dump.h5":
                        found.append(p)
                        self.assertGreater(os.path.getsize(p), 0, p)
                        with h5py.File(p, "r") as f:
                            self.assertEqual(f.attrs["format"], b"msprobe-dump"
                                             if isinstance(f.attrs["format"], bytes) else "msprobe-dump")
            # and no step directory without its file
            for step in os.listdir(os.path.join(small, "d")):
                if step.startswith("step"):
                    self.assertTrue(os.path.exists(os.path.join(small, "d", step, "rank0", "dump.h5")),
                                    step)
            # later failures are counted, not repeated
            self.assertTrue(all(l.startswith("msprobe: warning: ") for l in lines), lines)
            self.assertTrue(any("times in all" in l for l in lines), lines)
        finally:
            dt.subprocess.run(["umount", small])


if __name__ == "__main__":
    unittest.main()
