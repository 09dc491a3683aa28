"""OpenMP's idle threads sleep in msprobe and cmp_bench unless the user chose
how they wait (issue 42, item 2: libgomp's default spin took the core the
reader helper needed; msprobe(1), ENVIRONMENT).

What libgomp itself uses is read from its own report (OMP_DISPLAY_ENV=verbose,
printed at its start): the program that runs main() must wait passively
(GOMP_SPINCOUNT 0), keep a user's OMP_WAIT_POLICY or GOMP_SPINCOUNT as given,
and every child msprobe starts (here the command of `msprobe dump`) must see
the environment exactly as the user gave it: no OMP_WAIT_POLICY added, none
taken away, no marker of msprobe's own."""
import os
import shutil
import subprocess
import tempfile
import unittest

from msp_build import sanitized_build

BIN = os.environ["MSPROBE_BIN"]
BENCH = os.path.join(os.environ["MSPROBE_BUILD_DIR"], "bench", "compare", "cmp_bench")
OMP_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "MSPROBE_OMP_PASSIVE")


def base_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in OMP_VARS}
    env.update(extra)
    return env


def libgomp_settings(cmd, env):
    """The last report libgomp printed (one per program image that started):
    {name: value} of its verbose OMP_DISPLAY_ENV block."""
    env = dict(env, OMP_DISPLAY_ENV="verbose")
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60)
    blocks = p.stderr.split("OPENMP DISPLAY ENVIRONMENT BEGIN")
    assert len(blocks) >= 2, "libgomp printed no report: %r" % p.stderr[:500]
    out = {}
    for line in blocks[-1].splitlines():
        if "=" in line and line.strip().startswith(("OMP_", "GOMP_")):
            k, v = line.split("=", 1)
            out[k.strip()] = v.strip().strip("'")
    return p.returncode, out


class OmpWaitPolicy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="msp-omp-")
        cls.cfg = os.path.join(cls.tmp, "c.json")
        with open(cls.cfg, "w") as f:
            f.write('{"task": "statistics", "dump_path": "%s", "level": "L1"}'
                    % os.path.join(cls.tmp, "dump"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def programs(self):
        out = [[BIN, "--version"], [BIN, "compare", "--help"]]
        if os.path.exists(BENCH):
            out.append([BENCH])
        return out

    def test_idle_threads_sleep_by_default(self):
        for cmd in self.programs():
            with self.subTest(cmd=cmd):
                _, s = libgomp_settings(cmd, base_env())
                self.assertEqual(s.get("OMP_WAIT_POLICY"), "PASSIVE")
                self.assertEqual(s.get("GOMP_SPINCOUNT"), "0")

    def test_users_choice_is_kept(self):
        # libgomp's own values for these settings (its documentation): active
        # waiting spins 30e9 times, a spin count is used as given
        cases = [({"OMP_WAIT_POLICY": "active"}, "ACTIVE", "30000000000"),
                 ({"GOMP_SPINCOUNT": "1234"}, None, "1234"),
                 ({"OMP_WAIT_POLICY": "passive"}, "PASSIVE", "0")]
        for extra, policy, spin in cases:
            for cmd in self.programs():
                with self.subTest(env=extra, cmd=cmd):
                    _, s = libgomp_settings(cmd, base_env(**extra))
                    if policy:
                        self.assertEqual(s.get("OMP_WAIT_POLICY"), policy)
                    self.assertEqual(s.get("GOMP_SPINCOUNT"), spin)

    def child_env(self, env):
        p = subprocess.run([BIN, "dump", "-c", self.cfg, "--", "/usr/bin/env", "-0"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        return dict(kv.split("=", 1) for kv in p.stdout.decode().split("\0") if "=" in kv)

    def test_children_see_the_environment_as_given(self):
        if sanitized_build():  # msprobe dump preloads the sanitized shim into the child
            self.skipTest("a preloaded library cannot come before AddressSanitizer's runtime")
        seen = self.child_env(base_env())
        for k in OMP_VARS:
            self.assertNotIn(k, seen)
        self.assertIn("PATH", seen)  # the control: the child's environment was read
        for extra in ({"OMP_WAIT_POLICY": "active"}, {"GOMP_SPINCOUNT": "77"},
                      {"MSPROBE_OMP_PASSIVE": "0"}):
            with self.subTest(env=extra):
                seen = self.child_env(base_env(**extra))
                for k in OMP_VARS:
                    self.assertEqual(seen.get(k), extra.get(k), k)


if __name__ == "__main__":
    unittest.main()
