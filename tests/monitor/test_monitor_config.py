"""A bad monitor config stops `msprobe monitor` (and the preload alone)
with status 2 before the training script runs, in one line naming the file
and the key; keys msprobe knows but msprobe-c does not act on are named
once, as a warning, and the run goes on."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import montest as mt  # noqa: E402

MARK = ["-c", "open('script_ran', 'w').write('yes')"]


class ConfigErrors(mt.MonitorCase):
    def expect_exit2(self, conf, *needles):
        cfg = self.write_config(conf, "bad.json")
        for preload_only in (False, True):
            with self.subTest(preload_only=preload_only):
                p = self.monitor(cfg, self.path("out"), args=MARK, preload_only=preload_only)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertFalse(os.path.exists(self.path("script_ran")), "the script ran")
                lines = p.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, p.stderr)
                self.assertTrue(lines[0].startswith("msprobe: "), lines[0])
                for n in ("bad.json",) + needles:
                    self.assertIn(n, lines[0])

    def test_wrong_type(self):
        self.expect_exit2({"wg_distribution": "yes"}, "wg_distribution", "true or false")

    def test_unknown_op(self):
        self.expect_exit2({"wg_distribution": True, "ops": ["min", "norms"]}, "ops[1]", "norms")

    def test_unknown_key(self):
        self.expect_exit2({"wg_distributon": True}, "wg_distributon", "unknown key")

    def test_bad_rule_and_threshold(self):
        self.expect_exit2({"alert": {"rules": [{"rule_name": "AnomalyBig"}]}}, "alert.rules[0]",
                          "AnomalyBig")
        self.expect_exit2({"alert": {"rules": [{"rule_name": "AnomalyTurbulence"}]}},
                          "alert.rules[0]", "threshold")

    def test_bad_numbers(self):
        self.expect_exit2({"ndigits": 0}, "ndigits")
        self.expect_exit2({"step_count_per_record": 1.5}, "step_count_per_record")
        self.expect_exit2({"module_ranks": ["0"]}, "module_ranks[0]")

    def test_malformed_json(self):
        self.expect_exit2('{"wg_distribution": true,}')

    def test_unsupported_keys_named_once_and_run_goes_on(self):
        cfg = self.write_config({"wg_distribution": True, "print_struct": True,
                                 "squash_name": False, "format": "tensorboard"})
        p = self.monitor(cfg, self.path("out"), args=MARK)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.exists(self.path("script_ran")))
        self.assertEqual(p.stderr.count("print_struct"), 1, p.stderr)
        self.assertIn("format \"tensorboard\"", p.stderr)
        self.assertNotIn("squash_name", p.stderr)  # false asks for nothing

    def test_no_config_and_no_command(self):
        p = mt.subprocess.run([mt.BIN, "monitor", "--", "true"], capture_output=True, text=True,
                              env={k: v for k, v in os.environ.items()
                                   if k != "MSPROBE_MONITOR_CONFIG"})
        self.assertEqual(p.returncode, 2)
        self.assertIn("-c FILE", p.stderr)
        cfg = self.write_config({"wg_distribution": True})
        p = mt.subprocess.run([mt.BIN, "monitor", "-c", cfg], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no command", p.stderr)


if __name__ == "__main__":
    unittest.main()
