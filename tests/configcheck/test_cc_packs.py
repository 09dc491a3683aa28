"""config_check packs without a training run: the static pack (-d), the diff
rules on packs built here, hostile packs, and the command line."""
import io
import json
import os
import subprocess
import tempfile
import unittest
import zipfile

from cc_testlib import (UNSTORED, PYTHON, clean_env, msprobe, read_member, secret_hash, sheet_header, sheet_rows,
                        summary)

MANIFEST = {"format": "msprobe-config-check", "format_version": 1, "tool": "msprobe", "tool_version": "x",
            "kind": "static", "host": "h", "time": "2026-01-01T00:00:00Z", "rank": 0, "world_size": 1}


def make_pack(path, members, raw=None):
    """A pack from JSON-able members (name -> object) plus raw (name -> bytes)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, obj in members.items():
            z.writestr(name, json.dumps(obj))
        for name, data in (raw or {}).items():
            z.writestr(name, data)
    return path


def env_member(vars_):
    return {"salt": "default", "hashed_keys": [], "vars": vars_}


def pip_member(pkgs, python="3.11.2"):
    return {"python": python, "packages": [{"name": n, "version": v} for n, v in pkgs.items()]}


class StaticPack(unittest.TestCase):
    def test_static_pack_holds_env_and_pip_of_msprobe_python(self):
        with tempfile.TemporaryDirectory() as d:
            pack = os.path.join(d, "s.zip")
            secret = "pw-%d-zzTop" % os.getpid()
            env = clean_env(MSPROBE_PYTHON=PYTHON, DB_PASSWORD=secret, OMP_NUM_THREADS="3")
            r = msprobe("-f", "pytorch", "config_check", "-d", "-o", pack, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            with zipfile.ZipFile(pack) as z:
                self.assertEqual(sorted(z.namelist()), ["env.json", "manifest.json", "pip.json"])
                for n in z.namelist():
                    self.assertNotIn(secret.encode(), z.read(n))
            with open(pack, "rb") as f:
                self.assertNotIn(secret.encode(), f.read())
            e = read_member(pack, "env.json")
            self.assertEqual(e["vars"]["OMP_NUM_THREADS"], "3")
            self.assertEqual(e["vars"]["PATH"], env["PATH"])
            self.assertEqual(e["vars"]["DB_PASSWORD"], secret_hash("DB_PASSWORD", secret))
            want = json.loads(subprocess.run(
                [PYTHON, "-c", "import json, importlib.metadata as m; "
                 "print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))"],
                capture_output=True, text=True, check=True).stdout)
            got = {p["name"].lower(): p["version"] for p in read_member(pack, "pip.json")["packages"]}
            self.assertEqual(got["numpy"], want["numpy"])
            self.assertEqual(set(got), set(want))
            self.assertEqual(read_member(pack, "manifest.json")["kind"], "static")

    def test_user_salt_changes_the_hash_and_is_not_stored(self):
        with tempfile.TemporaryDirectory() as d:
            pack = os.path.join(d, "s.zip")
            salt = "pepper-9f3Kq2Lw7xZa"  # strong enough to be used (a guess would not find it)
            env = clean_env(API_KEY="abc123", MSPROBE_SECRET_SALT=salt)
            r = msprobe("config_check", "-d", "-o", pack, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            e = read_member(pack, "env.json")
            self.assertEqual(e["vars"]["API_KEY"], secret_hash("API_KEY", "abc123", salt.encode()))
            self.assertEqual(e["salt"], "MSPROBE_SECRET_SALT")
            self.assertNotIn("MSPROBE_SECRET_SALT", e["vars"])
            with zipfile.ZipFile(pack) as z:
                self.assertFalse(any(salt.encode() in z.read(n) for n in z.namelist()))

    def test_weak_user_salt_is_refused_with_a_warning(self):
        with tempfile.TemporaryDirectory() as d:
            pack = os.path.join(d, "s.zip")
            r = msprobe("config_check", "-d", "-o", pack,
                        env=clean_env(API_KEY="abc123", MSPROBE_SECRET_SALT="pepper"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("MSPROBE_SECRET_SALT is too weak", r.stderr)
            e = read_member(pack, "env.json")
            self.assertEqual((e["salt"], e["salt_id"], e["vars"]["API_KEY"]),
                             ("none", "none", UNSTORED))

    def test_two_static_packs_differing_in_a_listed_key_fail_env_only(self):
        with tempfile.TemporaryDirectory() as d:
            a, b = os.path.join(d, "a.zip"), os.path.join(d, "b.zip")
            self.assertEqual(msprobe("config_check", "-d", "-o", a, env=clean_env(PYTHONHASHSEED="0")).returncode, 0)
            self.assertEqual(msprobe("config_check", "-d", "-o", b, env=clean_env(PYTHONHASHSEED="1")).returncode, 0)
            r = msprobe("config_check", "-c", a, b, "-o", os.path.join(d, "o"))
            self.assertEqual(r.returncode, 1, r.stderr)
            x = os.path.join(d, "o", "result.xlsx")
            self.assertEqual(summary(x), {"env": False, "pip": True, "dataset": "N/A", "weights": "N/A",
                                          "random": "N/A", "hyperparameters": "N/A"})
            self.assertEqual([(r["key"], r["bench_value"], r["cmp_value"]) for r in sheet_rows(x, "env")],
                             [("PYTHONHASHSEED", "0", "1")])


class DiffRules(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def compare(self, bench, cmp, *opts):
        out = os.path.join(self.d, "out")
        r = msprobe("config_check", "-c", bench, cmp, "-o", out, *opts)
        return r, os.path.join(out, "result.xlsx")

    def test_unlisted_env_key_passes_by_default_and_fails_when_listed(self):
        a = make_pack(os.path.join(self.d, "a.zip"), {"manifest.json": MANIFEST,
                                                      "env.json": env_member({"FOO_X": "1", "OMP_NUM_THREADS": "4"})})
        b = make_pack(os.path.join(self.d, "b.zip"), {"manifest.json": MANIFEST,
                                                      "env.json": env_member({"FOO_X": "2", "OMP_NUM_THREADS": "4"})})
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(sheet_rows(x, "env"), [])
        r, x = self.compare(a, b, "--env-keys", "FOO_X,OMP_NUM_THREADS")
        self.assertEqual(r.returncode, 1)
        self.assertEqual([row["key"] for row in sheet_rows(x, "env")], ["FOO_X"])
        keys = os.path.join(self.d, "keys.txt")
        with open(keys, "w") as f:
            f.write("# determinism switches\nFOO_*\n")
        r, x = self.compare(a, b, "--env-keys", keys)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(sheet_rows(x, "env"), [{"key": "FOO_X", "bench_value": "1", "cmp_value": "2",
                                                 "level": "error"}])

    def test_star_compares_every_key_and_salt_mismatch_is_reported(self):
        a = make_pack(os.path.join(self.d, "a.zip"), {"manifest.json": MANIFEST,
                                                      "env.json": env_member({"HOME": "/a", "X_TOKEN": "sha256:1"})})
        cm = env_member({"HOME": "/b", "X_TOKEN": "sha256:1"})
        cm["salt"] = "MSPROBE_SECRET_SALT"
        b = make_pack(os.path.join(self.d, "b.zip"), {"manifest.json": MANIFEST, "env.json": cm})
        r, x = self.compare(a, b, "--env-keys", "*")
        self.assertEqual(r.returncode, 1)
        self.assertEqual([row["key"] for row in sheet_rows(x, "env")], ["HOME"])
        self.assertIn("different salts", r.stderr)
        self.assertIn("MSPROBE_SECRET_SALT", {row["filename"]: row["note"] for row in sheet_rows(x, "summary")}["env"])

    def test_env_key_unset_on_one_side_is_a_difference(self):
        a = make_pack(os.path.join(self.d, "a.zip"), {"manifest.json": MANIFEST,
                                                      "env.json": env_member({"NCCL_ALGO": "Ring"})})
        b = make_pack(os.path.join(self.d, "b.zip"), {"manifest.json": MANIFEST, "env.json": env_member({})})
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(sheet_rows(x, "env"), [{"key": "NCCL_ALGO", "bench_value": "Ring",
                                                 "cmp_value": "<unset>", "level": "error"}])

    def test_pip_framework_version_is_an_error_other_packages_only_warn(self):
        base = {"numpy": "1.24.2", "requests": "2.28.1", "torch_npu": "2.1.0"}
        a = make_pack(os.path.join(self.d, "a.zip"), {"manifest.json": MANIFEST, "pip.json": pip_member(base)})
        other = dict(base, requests="2.31.0")
        b = make_pack(os.path.join(self.d, "b.zip"), {"manifest.json": MANIFEST, "pip.json": pip_member(other)})
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIs(summary(x)["pip"], True)
        self.assertEqual(sheet_header(x, "pip"), ["package", "bench version", "cmp version", "level"])
        self.assertEqual(sheet_rows(x, "pip"), [{"package": "requests", "bench version": "2.28.1",
                                                 "cmp version": "2.31.0", "level": "warning"}])
        # torch-npu spelled differently is the same distribution (PEP 503 names).
        npu = {"numpy": "1.26.0", "requests": "2.28.1", "Torch-NPU": "2.1.0"}
        c = make_pack(os.path.join(self.d, "c.zip"), {"manifest.json": MANIFEST, "pip.json": pip_member(npu)})
        r, x = self.compare(a, c)
        self.assertEqual(r.returncode, 1)
        self.assertIs(summary(x)["pip"], False)
        self.assertEqual([(row["package"], row["level"]) for row in sheet_rows(x, "pip")], [("numpy", "error")])
        self.assertIn("numpy: bench 1.24.2 vs cmp 1.26.0", r.stdout)

    def test_item_missing_from_one_pack_fails_it(self):
        a = make_pack(os.path.join(self.d, "a.zip"), {"manifest.json": MANIFEST,
                                                      "random.json": {"calls": []}})
        b = make_pack(os.path.join(self.d, "b.zip"), {"manifest.json": MANIFEST})
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 1)
        self.assertIs(summary(x)["random"], False)
        self.assertIn("random.json is missing from the cmp pack", r.stdout)

    def test_seed_from_system_entropy_never_counts_as_equal(self):
        call = {"api": "random.seed", "value": None, "file": "/x/t.py", "line": 3}
        a = make_pack(os.path.join(self.d, "a.zip"), {"manifest.json": MANIFEST, "random.json": {"calls": [call]}})
        r, x = self.compare(a, a)
        self.assertEqual(r.returncode, 1)
        self.assertEqual([(row["api"], row["location"], row["equal"]) for row in sheet_rows(x, "random")],
                         [("random.seed", "t.py:3", False)])

    def test_an_extra_seed_call_does_not_shift_the_others(self):
        c1 = {"api": "torch.manual_seed", "value": "0", "file": "/a/t.py", "line": 3}
        c2 = {"api": "numpy.random.seed", "value": "5", "file": "/a/t.py", "line": 9}
        extra = {"api": "random.seed", "value": "1", "file": "/b/t.py", "line": 2}
        a = make_pack(os.path.join(self.d, "a.zip"), {"manifest.json": MANIFEST, "random.json": {"calls": [c1, c2]}})
        b = make_pack(os.path.join(self.d, "b.zip"), {"manifest.json": MANIFEST,
                                                      "random.json": {"calls": [extra, c1, c2]}})
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 1)
        rows = sheet_rows(x, "random")
        self.assertEqual([(row["api"], row["equal"]) for row in rows],
                         [("torch.manual_seed", True), ("numpy.random.seed", True), ("random.seed", False)])
        self.assertEqual(rows[2]["bench_value"], "<no call>")


class HostilePacks(unittest.TestCase):
    """Every hostile pack: exit 2, a message naming the pack and the member,
    nothing written anywhere (not even the report)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = os.path.join(self.tmp.name, "work")
        os.mkdir(self.d)
        self.good = make_pack(os.path.join(self.d, "good.zip"), {"manifest.json": MANIFEST,
                                                                 "env.json": env_member({})})

    def tearDown(self):
        self.tmp.cleanup()

    def refused(self, pack, member, *opts, needle=None):
        out = os.path.join(self.d, "out")
        before = sorted(os.listdir(self.tmp.name)), sorted(os.listdir(self.d))
        for args in ((pack, self.good), (self.good, pack)):
            r = msprobe("config_check", "-c", *args, "-o", out, *opts, cwd=self.d)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(pack, r.stderr)
            self.assertIn(member, r.stderr)
            if needle:
                self.assertIn(needle, r.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertEqual((sorted(os.listdir(self.tmp.name)), sorted(os.listdir(self.d))), before)
        return r.stderr

    def test_parent_directory_member(self):
        p = make_pack(os.path.join(self.d, "dotdot.zip"), {"manifest.json": MANIFEST},
                      raw={"../evil.json": b"{}"})
        self.refused(p, "../evil.json", needle="..")

    def test_nested_parent_directory_member(self):
        p = make_pack(os.path.join(self.d, "dotdot2.zip"), {"manifest.json": MANIFEST},
                      raw={"a/../../evil.json": b"{}"})
        self.refused(p, "a/../../evil.json")

    def test_absolute_member(self):
        p = make_pack(os.path.join(self.d, "abs.zip"), {"manifest.json": MANIFEST},
                      raw={"/tmp/evil.json": b"{}"})
        self.refused(p, "/tmp/evil.json", needle="absolute")

    def test_symlink_member(self):
        p = os.path.join(self.d, "link.zip")
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("manifest.json", json.dumps(MANIFEST))
            info = zipfile.ZipInfo("env.json")
            info.create_system = 3
            info.external_attr = (0o120777 << 16)
            z.writestr(info, "/etc/passwd")
        self.refused(p, "env.json", needle="symbolic link")

    def test_oversized_member(self):
        p = make_pack(os.path.join(self.d, "big.zip"), {"manifest.json": MANIFEST},
                      raw={"weights.json": os.urandom(3 << 20)})
        self.refused(p, "weights.json", "--max-member-mib", "2", needle="limit")

    def test_highly_compressed_member(self):
        p = os.path.join(self.d, "bomb.zip")
        with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("manifest.json", json.dumps(MANIFEST))
            z.writestr("dataset.json", b" " * (64 << 20))
        self.assertLess(os.path.getsize(p), 1 << 20)
        self.refused(p, "dataset.json", needle="compression ratio")

    def test_malformed_json_member(self):
        p = make_pack(os.path.join(self.d, "bad.zip"), {"manifest.json": MANIFEST},
                      raw={"random.json": b'{"calls": [1, 2,'})
        self.refused(p, "random.json", needle="malformed JSON")

    def test_member_of_the_wrong_shape(self):
        p = make_pack(os.path.join(self.d, "shape.zip"), {"manifest.json": MANIFEST, "weights.json": [1, 2]})
        self.refused(p, "weights.json", needle="expected a JSON object")

    def test_unknown_format_version(self):
        p = make_pack(os.path.join(self.d, "v99.zip"), {"manifest.json": dict(MANIFEST, format_version=99)})
        self.refused(p, "manifest.json", needle="format_version 99")

    def test_missing_manifest(self):
        p = make_pack(os.path.join(self.d, "nomani.zip"), {"env.json": env_member({})})
        self.refused(p, "manifest.json", needle="missing")

    def test_duplicate_member(self):
        p = os.path.join(self.d, "dup.zip")
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("manifest.json", json.dumps(MANIFEST))
            z.writestr("env.json", json.dumps(env_member({})))
            with self.assertWarns(UserWarning):
                z.writestr("env.json", json.dumps(env_member({"NCCL_ALGO": "Tree"})))
        # libzip itself refuses duplicate names before any member is listed.
        self.refused(p, "", needle="same name")

    def test_not_a_zip(self):
        p = os.path.join(self.d, "plain.zip")
        with open(p, "w") as f:
            f.write("not a zip")
        out = os.path.join(self.d, "out")
        r = msprobe("config_check", "-c", p, self.good, "-o", out)
        self.assertEqual(r.returncode, 2)
        self.assertIn(p, r.stderr)
        self.assertFalse(os.path.exists(out))


class CommandLine(unittest.TestCase):
    def test_neither_or_both_modes_is_a_usage_error(self):
        self.assertEqual(msprobe("config_check").returncode, 2)
        self.assertEqual(msprobe("config_check", "-d", "-c", "a.zip", "b.zip").returncode, 2)

    def test_compare_needs_two_packs(self):
        r = msprobe("config_check", "-c", "a.zip")
        self.assertEqual(r.returncode, 2)
        self.assertIn("BENCH.zip CMP.zip", r.stderr)

    def test_missing_pack_is_bad_input(self):
        with tempfile.TemporaryDirectory() as d:
            r = msprobe("config_check", "-c", os.path.join(d, "no.zip"), os.path.join(d, "no2.zip"), "-o", d)
            self.assertEqual(r.returncode, 2)
            self.assertIn("no.zip", r.stderr)

    def test_help_goes_to_stdout(self):
        r = msprobe("config_check", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("--env-keys", r.stdout)
        self.assertEqual(r.stderr, "")

    def test_bad_python_for_static_pack_is_reported(self):
        with tempfile.TemporaryDirectory() as d:
            r = msprobe("config_check", "-d", "-o", os.path.join(d, "s.zip"),
                        env=clean_env(MSPROBE_PYTHON=os.path.join(d, "nopython")))
            self.assertEqual(r.returncode, 2)
            self.assertIn("nopython", r.stderr)
            self.assertEqual(os.listdir(d), [])


if __name__ == "__main__":
    unittest.main()
