"""config_check on real training runs under the preload shim: what is
collected, and that a diff flags exactly what differs between two runs."""
import math
import json
import os
import re
import signal
import tempfile
import unittest
import zipfile

import numpy as np

from cc_testlib import (PRELOAD, SRC, TRAIN, msprobe, read_member, read_text, run_under_shim, secret_hash,
                        sha256_hex, sheet_header, sheet_rows, summary)


def rel(b, c):
    m = max(abs(b), abs(c))
    return abs(c - b) / m if m > 0 else 0.0


@unittest.skipUnless(PRELOAD and os.path.exists(PRELOAD), "the dump shim (msprobe_preload) is not built")
class TwoRunsDifferingInThreeThings(unittest.TestCase):
    """Run A and run B differ in one seed (random.seed), one env var
    (CUBLAS_WORKSPACE_CONFIG) and one initial weight (fc2.bias[0])."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.a, cls.b = os.path.join(d, "a.zip"), os.path.join(d, "b.zip")
        cls.npz_a, cls.npz_b = os.path.join(d, "a.npz"), os.path.join(d, "b.npz")
        cls.secret = "s3cr3t-Value-%d-qwerty" % os.getpid()
        cls.args = [TRAIN, "--api-token", cls.secret, "--password=" + cls.secret, "--epochs", "1"]
        ra = run_under_shim(cls.args, cls.a, d, CCT_PY_SEED=7, CUBLAS_WORKSPACE_CONFIG=":4096:8",
                            CCT_SAVE=cls.npz_a, MY_SERVICE_TOKEN=cls.secret)
        rb = run_under_shim(cls.args, cls.b, d, CCT_PY_SEED=8, CUBLAS_WORKSPACE_CONFIG=":16:8",
                            CCT_PERTURB=1, CCT_SAVE=cls.npz_b, MY_SERVICE_TOKEN=cls.secret)
        cls.runs = (ra, rb)
        cls.out = os.path.join(d, "out")
        cls.cmp = msprobe("config_check", "-c", cls.a, cls.b, "-o", cls.out)
        cls.xlsx = os.path.join(cls.out, "result.xlsx")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_training_ran_and_wrote_packs(self):
        for r in self.runs:
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("warning", r.stderr)
        self.assertTrue(os.path.exists(self.a) and os.path.exists(self.b))

    def test_exit_status_is_1_and_terminal_names_what_failed(self):
        self.assertEqual(self.cmp.returncode, 1, self.cmp.stderr)
        out = self.cmp.stdout
        for item in ("env", "weights", "random"):
            self.assertRegex(out, r"(?m)^\s+%s\s+FAIL" % item)
        for item in ("pip", "dataset", "hyperparameters"):
            self.assertRegex(out, r"(?m)^\s+%s\s+pass" % item)
        self.assertIn("CUBLAS_WORKSPACE_CONFIG", out)
        self.assertIn("Net.fc2.bias", out)
        self.assertIn("random.seed", out)

    def test_summary_sheet_flags_exactly_env_weights_random(self):
        self.assertEqual(sheet_header(self.xlsx, "summary")[:2], ["filename", "pass_check"])
        self.assertEqual(summary(self.xlsx), {"env": False, "pip": True, "dataset": True, "weights": False,
                                              "random": False, "hyperparameters": True})

    def test_env_sheet_lists_only_the_changed_variable(self):
        rows = sheet_rows(self.xlsx, "env")
        self.assertEqual(rows, [{"key": "CUBLAS_WORKSPACE_CONFIG", "bench_value": ":4096:8",
                                 "cmp_value": ":16:8", "level": "error"}])

    def test_weights_sheet_flags_only_the_perturbed_parameter(self):
        pa, pb = np.load(self.npz_a), np.load(self.npz_b)
        names = sorted(k[len("param/"):] for k in pa.files if k.startswith("param/"))
        rows = sheet_rows(self.xlsx, "weights")
        self.assertEqual(sorted(r["name"] for r in rows), sorted("Net." + n for n in names))
        unequal = [r["name"] for r in rows if r["equal"] is not True]
        self.assertEqual(unequal, ["Net.fc2.bias"])
        # The hashes are SHA-256 of the raw parameter bytes at the first forward.
        for r in rows:
            n = r["name"][len("Net."):]
            self.assertEqual(r["bench_hash"], sha256_hex(np.ascontiguousarray(pa["param/" + n]).tobytes()))
            self.assertEqual(r["cmp_hash"], sha256_hex(np.ascontiguousarray(pb["param/" + n]).tobytes()))
            self.assertEqual(r["bench_shape"], "[" + ",".join(str(s) for s in pa["param/" + n].shape) + "]")
        row = next(r for r in rows if r["name"] == "Net.fc2.bias")
        ba, bb = pa["param/fc2.bias"].astype(np.float64), pb["param/fc2.bias"].astype(np.float64)
        self.assertAlmostEqual(row["max_rel_diff"], rel(ba.max(), bb.max()), places=12)
        self.assertAlmostEqual(row["min_rel_diff"], rel(ba.min(), bb.min()), places=12)
        self.assertAlmostEqual(row["mean_rel_diff"], rel(ba.mean(), bb.mean()), places=12)
        self.assertAlmostEqual(row["norm_rel_diff"], rel(np.linalg.norm(ba), np.linalg.norm(bb)), places=12)
        self.assertGreater(row["norm_rel_diff"], 0)

    def test_weight_statistics_match_numpy(self):
        pa = np.load(self.npz_a)
        for e in read_member(self.a, "weights.json")["tensors"]:
            arr = pa["param/" + e["name"][len("Net."):]].astype(np.float64)
            self.assertEqual(e["dtype"], "torch.float32")
            self.assertEqual(e["shape"], list(arr.shape))
            for key, want in (("max", arr.max()), ("min", arr.min()), ("mean", arr.mean()),
                              ("norm", np.linalg.norm(arr))):
                self.assertTrue(math.isclose(e[key], want, rel_tol=1e-12, abs_tol=1e-15), (e["name"], key))

    def test_dataset_holds_the_first_batch_and_matches(self):
        pa = np.load(self.npz_a)
        rows = sheet_rows(self.xlsx, "dataset")
        self.assertEqual([r["name"] for r in rows], ["batch0.Net.input.0"])
        self.assertIs(rows[0]["equal"], True)
        self.assertEqual(rows[0]["bench_hash"], sha256_hex(np.ascontiguousarray(pa["input/0"]).tobytes()))

    def test_random_sheet_flags_only_the_changed_seed(self):
        rows = sheet_rows(self.xlsx, "random")
        src = read_text(TRAIN).splitlines()
        want = {}
        for i, line in enumerate(src, 1):
            for api, pat in (("random.seed", r"^\s+random\.seed\("), ("numpy.random.seed", r"np\.random\.seed\("),
                             ("torch.manual_seed", r"^\s+torch\.manual_seed\("),
                             ("torch.cuda.manual_seed_all", r"^\s+torch\.cuda\.manual_seed_all\(")):
                if re.search(pat, line):
                    want[api] = "cc_train.py:%d" % i
        self.assertEqual(len(rows), 4)
        self.assertEqual({r["api"]: r["location"] for r in rows}, want)
        bad = [(r["api"], r["bench_value"], r["cmp_value"]) for r in rows if r["equal"] is not True]
        self.assertEqual(bad, [("random.seed", "7", "8")])
        good = {r["api"]: r["bench_value"] for r in rows if r["equal"] is True}
        # torch.manual_seed seeds CUDA through torch.cuda.manual_seed_all: that
        # inner call is not the script's and is not listed again.
        self.assertEqual(good, {"numpy.random.seed": "3", "torch.manual_seed": "0",
                                "torch.cuda.manual_seed_all": "11"})

    def test_hyperparameters_hold_optimizer_values_all_equal(self):
        rows = {r["name"]: r for r in sheet_rows(self.xlsx, "hyperparameters")}
        self.assertEqual(rows["optimizers[0].class"]["bench_value"], "torch.optim.sgd.SGD")
        self.assertEqual(float(rows["optimizers[0].param_groups[0].lr"]["bench_value"]), 0.05)
        self.assertEqual(float(rows["optimizers[0].param_groups[0].momentum"]["bench_value"]), 0.9)
        self.assertEqual(float(rows["optimizers[0].param_groups[0].weight_decay"]["bench_value"]), 1e-4)
        self.assertEqual(rows["script"]["bench_value"], "cc_train.py")
        # Values of options whose name looks secret are hidden, the rest kept.
        self.assertEqual(rows["args"]["bench_value"],
                         '["--api-token","<secret>","--password=<secret>","--epochs","1"]')
        # Without MSPROBE_SECRET_SALT nothing of a secret is kept: not compared.
        secrets = {n: (r["bench_value"], r["level"]) for n, r in rows.items() if r["equal"] is not True}
        self.assertEqual(secrets, {"args.api_token": ("<secret>", "not compared"),
                                   "args.password": ("<secret>", "not compared")})
        self.assertNotIn("optimizers[0].param_groups[0].params", rows)

    def test_manifest_records_format_tool_host_time_rank(self):
        m = read_member(self.a, "manifest.json")
        self.assertEqual(m["format"], "msprobe-config-check")
        self.assertEqual(m["format_version"], 1)
        self.assertEqual(m["tool_version"], re.search(r"project\(msprobe VERSION ([0-9.]+)", read_text(
            os.path.join(SRC, "CMakeLists.txt"))).group(1))
        self.assertEqual(m["host"], os.uname().nodename)
        self.assertRegex(m["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual((m["rank"], m["world_size"], m["kind"]), (0, 1, "run"))

    def test_pip_lists_numpy_and_torch_with_their_versions(self):
        import importlib.metadata as md
        pkgs = {p["name"].lower(): p["version"] for p in read_member(self.a, "pip.json")["packages"]}
        self.assertEqual(pkgs["numpy"], md.version("numpy"))
        self.assertEqual(pkgs["torch"], md.version("torch"))

    def test_secret_env_value_never_appears_in_the_pack(self):
        needle = self.secret.encode()
        with open(self.a, "rb") as f:
            raw = f.read()
        self.assertNotIn(needle, raw)
        with zipfile.ZipFile(self.a) as z:
            for name in z.namelist():
                self.assertNotIn(needle, z.read(name), name)
        env = read_member(self.a, "env.json")
        self.assertEqual(env["vars"]["MY_SERVICE_TOKEN"], secret_hash("MY_SERVICE_TOKEN", self.secret))
        self.assertIn("MY_SERVICE_TOKEN", env["hashed_keys"])


@unittest.skipUnless(PRELOAD and os.path.exists(PRELOAD), "the dump shim (msprobe_preload) is not built")
class IdenticalRunsOfTheExample(unittest.TestCase):
    def test_two_identical_runs_of_examples_train_all_pass(self):
        train = os.path.join(SRC, "examples", "train.py")
        if not os.path.exists(train):
            self.skipTest("examples/train.py is not there")
        with tempfile.TemporaryDirectory() as d:
            a, b = os.path.join(d, "a.zip"), os.path.join(d, "b.zip")
            for z in (a, b):
                r = run_under_shim([train, "--steps", "2"], z, d)
                self.assertEqual(r.returncode, 0, r.stderr)
            res = msprobe("config_check", "-c", a, b, "-o", os.path.join(d, "out"))
            self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
            xlsx = os.path.join(d, "out", "result.xlsx")
            self.assertEqual(summary(xlsx), {k: True for k in ("env", "pip", "dataset", "weights", "random",
                                                               "hyperparameters")})
            weights = sheet_rows(xlsx, "weights")
            self.assertEqual(len(weights), 8)  # conv1, conv2, fc1, fc2: weight and bias
            self.assertTrue(all(r["equal"] is True for r in weights))
            line = next(i for i, l in enumerate(read_text(train).splitlines(), 1)
                        if "torch.manual_seed(0)" in l)
            self.assertEqual([(r["api"], r["location"], r["bench_value"]) for r in sheet_rows(xlsx, "random")],
                             [("torch.manual_seed", "train.py:%d" % line, "0")])


@unittest.skipUnless(PRELOAD and os.path.exists(PRELOAD), "the dump shim (msprobe_preload) is not built")
class PackWritingRules(unittest.TestCase):
    def test_write_at_step_from_msprobe_json_survives_a_run_that_never_exits_cleanly(self):
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, "msprobe.json")
            with open(cfg, "w") as f:
                f.write('{"config_check": {"output_zip_path": "pack.zip", "write_at_step": 1, '
                        '"dataset_batches": 2}}')
            env_run = dict(CCT_HARD_EXIT=1, MSPROBE_PATH=cfg)
            r = run_under_shim([TRAIN], "", d, **env_run)
            self.assertEqual(r.returncode, -signal.SIGKILL, r.stderr)
            pack = os.path.join(d, "pack.zip")
            self.assertTrue(os.path.exists(pack), r.stderr)
            m = read_member(pack, "manifest.json")
            self.assertEqual(m["written_at"], "step 1")
            names = [t["name"] for t in read_member(pack, "dataset.json")["tensors"]]
            self.assertEqual(names, ["batch0.Net.input.0", "batch1.Net.input.0"])
            self.assertEqual([n for n in os.listdir(d) if ".tmp." in n], [])

    def test_hard_exit_without_write_at_step_leaves_no_pack(self):
        # The control for the test above: a killed process runs no exit handler.
        with tempfile.TemporaryDirectory() as d:
            pack = os.path.join(d, "p.zip")
            r = run_under_shim([TRAIN], pack, d, CCT_HARD_EXIT=1)
            self.assertEqual(r.returncode, -signal.SIGKILL, r.stderr)
            self.assertFalse(os.path.exists(pack))

    def test_unwritable_pack_path_stops_before_training(self):
        # found only at exit, the whole run's pack would be lost: say so before training
        with tempfile.TemporaryDirectory() as d:
            blocker = os.path.join(d, "file")
            with open(blocker, "w") as f:
                f.write("a file where the pack's directory should be")
            r = run_under_shim([TRAIN], os.path.join(blocker, "sub", "p.zip"), d, CCT_STEPS=1)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertNotIn("loss", r.stdout)
            lines = r.stderr.splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertTrue(lines[0].startswith("msprobe: MSPROBE_CONFIG_CHECK: "), lines[0])
            self.assertIn(blocker, lines[0])

    def test_pack_path_naming_a_directory_stops_before_training(self):
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, "msprobe.json")
            with open(cfg, "w") as f:
                json.dump({"config_check": {"output_zip_path": d}}, f)
            r = run_under_shim([TRAIN], "", d, MSPROBE_PATH=cfg, CCT_STEPS=1)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertNotIn("loss", r.stdout)
            self.assertIn("config_check.output_zip_path", r.stderr)
            self.assertIn("is a directory", r.stderr)
            self.assertEqual(sorted(os.listdir(d)), ["msprobe.json"])

    def test_pack_path_where_nothing_can_be_created_stops_before_training(self):
        # /proc exists and is a directory, yet no file can be created in it,
        # not even by root (for whom access(W_OK) says yes); a read-only
        # directory is the same for other users.
        places = ["/proc/config_check_pack.zip"]
        with tempfile.TemporaryDirectory() as d:
            if os.geteuid() != 0:
                ro = os.path.join(d, "ro")
                os.mkdir(ro, 0o555)
                places.append(os.path.join(ro, "p.zip"))
            for place in places:
                cfg = os.path.join(d, "msprobe.json")
                with open(cfg, "w") as f:
                    json.dump({"config_check": {"output_zip_path": place}}, f)
                r = run_under_shim([TRAIN], "", d, MSPROBE_PATH=cfg, CCT_STEPS=1)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertNotIn("loss", r.stdout)
                lines = r.stderr.splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertIn("config_check.output_zip_path: cannot write in \"%s\"" % os.path.dirname(place),
                              lines[0])

    def test_a_second_process_never_replaces_a_pack(self):
        # a later Python (here a second run with other seeds) writes beside it
        with tempfile.TemporaryDirectory() as d:
            pack = os.path.join(d, "p.zip")
            r = run_under_shim([TRAIN], pack, d, CCT_STEPS=1)
            self.assertEqual((r.returncode, r.stderr), (0, ""))
            with open(pack, "rb") as f:
                first = f.read()
            r = run_under_shim([TRAIN], pack, d, CCT_STEPS=1, CCT_PY_SEED=5)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
            self.assertIn("is never replaced", r.stderr)
            self.assertIn(os.path.join(d, "p-1.zip"), r.stderr)
            with open(pack, "rb") as f:
                self.assertEqual(f.read(), first)
            self.assertEqual(sorted(os.listdir(d)), ["p-1.zip", "p.zip"])
            seeds = [c["value"] for c in read_member(os.path.join(d, "p-1.zip"), "random.json")["calls"]]
            self.assertIn("5", seeds)

    def test_local_rank_names_the_pack_as_it_names_the_dump_rank(self):
        # one rank rule for the dump and config_check: RANK, then LOCAL_RANK
        with tempfile.TemporaryDirectory() as d:
            r = run_under_shim([TRAIN], os.path.join(d, "p.zip"), d, LOCAL_RANK=1, CCT_STEPS=1)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(sorted(os.listdir(d)), ["p_rank1.zip"])
            m = read_member(os.path.join(d, "p_rank1.zip"), "manifest.json")
            self.assertEqual((m["rank"], m["world_size"]), (1, 1))

    def test_rank_set_gives_a_rank_specific_pack_name(self):
        with tempfile.TemporaryDirectory() as d:
            r = run_under_shim([TRAIN], os.path.join(d, "p.zip"), d, RANK=3, WORLD_SIZE=4, CCT_STEPS=1)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(sorted(os.listdir(d)), ["p_rank3.zip"])
            m = read_member(os.path.join(d, "p_rank3.zip"), "manifest.json")
            self.assertEqual((m["rank"], m["world_size"]), (3, 4))

    def test_collection_does_not_change_the_losses(self):
        with tempfile.TemporaryDirectory() as d:
            plain = run_under_shim([TRAIN], "", d)  # MSPROBE_CONFIG_CHECK empty: collection off
            on = run_under_shim([TRAIN], os.path.join(d, "p.zip"), d)
            self.assertEqual(plain.returncode, 0, plain.stderr)
            self.assertEqual(on.returncode, 0, on.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "pack.zip")))
            self.assertTrue(os.path.exists(os.path.join(d, "p.zip")))
            self.assertEqual(plain.stdout, on.stdout)
            self.assertIn("step 2 loss", on.stdout)

    def test_a_dump_alongside_records_nothing_of_the_collection(self):
        import h5py
        from msp_h5dump import stats_rows  # /index, or a statistics dump's /stats
        names = []
        for cc in (False, True):
            with tempfile.TemporaryDirectory() as d:
                cfg = os.path.join(d, "msprobe.json")
                section = ', "config_check": {"output_zip_path": "pack.zip"}' if cc else ""
                with open(cfg, "w") as f:
                    f.write('{"dump": {"common_dump_settings": {"dump_mode": "mix", "dump_path": "dump", '
                            '"dump_iter": "0", "task": "statistics"}, "api_list": []}%s}' % section)
                r = run_under_shim([TRAIN], "", d, MSPROBE_PATH=cfg)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(os.path.exists(os.path.join(d, "pack.zip")), cc)
                with h5py.File(os.path.join(d, "dump", "step0", "rank0", "dump.h5"), "r") as h:
                    names.append(sorted({r["record"] for r in stats_rows(h)}))
                names.append(r.stdout)
        self.assertGreater(len(names[0]), 10)
        self.assertEqual(names[2], names[0])  # the same records with and without config_check
        self.assertEqual(names[3], names[1])  # and the same losses


@unittest.skipUnless(PRELOAD and os.path.exists(PRELOAD), "the dump shim (msprobe_preload) is not built")
class DatasetDtypes(unittest.TestCase):
    def test_inputs_of_every_dtype_are_hashed_and_summarised_like_numpy(self):
        with tempfile.TemporaryDirectory() as d:
            pack, npz = os.path.join(d, "p.zip"), os.path.join(d, "v.npz")
            r = run_under_shim([os.path.join(os.path.dirname(TRAIN), "cc_dtypes.py")], pack, d, CCT_SAVE=npz)
            self.assertEqual(r.returncode, 0, r.stderr)
            saved = np.load(npz)
            got = {e["name"]: e for e in read_member(pack, "dataset.json")["tensors"]}
            dtypes = {"0": "torch.float16", "1": "torch.bfloat16", "2": "torch.int64", "3": "torch.bool",
                      "4": "torch.float32", "5.mask": "torch.int32"}
            for k, dt in dtypes.items():
                e = got["batch0.Sink.input.%s" % k]
                vals = saved["val/" + k]
                self.assertEqual(e["dtype"], dt)
                self.assertEqual(e["shape"], list(vals.shape))
                self.assertEqual(e["hash"], sha256_hex(np.ascontiguousarray(saved["raw/" + k]).tobytes()), k)
                for key, want in (("max", vals.max()), ("min", vals.min()), ("mean", vals.mean()),
                                  ("norm", math.sqrt((vals * vals).sum()))):
                    self.assertTrue(math.isclose(e[key], want, rel_tol=1e-12, abs_tol=1e-300), (k, key))
            self.assertEqual((got["batch0.Sink.input.6"]["type"], got["batch0.Sink.input.6"]["value"]), ("int", "3"))
            self.assertEqual(got["batch0.Sink.input.7"]["value"], "'text'")
            self.assertEqual(len(got), 8)


if __name__ == "__main__":
    unittest.main()
