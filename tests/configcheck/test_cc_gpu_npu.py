"""config_check between a GPU run and an NPU run: what differs only in form
(output paths, NCCL_* vs HCCL_* names, --lr vs --learning_rate, 1e-3 vs 0.001)
passes; what differs in meaning fails and is named whole; seed calls at one
call site are one finding. Reports are read back with openpyxl."""
import os
import tempfile
import unittest

from cc_testlib import PRELOAD, TRAIN, msprobe, run_under_shim, sheet_header, sheet_rows, summary
from test_cc_packs import MANIFEST, env_member, make_pack, pip_member


def hyper_member(args, lr=0.05):
    return {"script": "train.py", "args": args,
            "optimizers": [{"class": "torch.optim.sgd.SGD", "param_groups": [{"num_params": 4, "lr": lr}]}]}


class Case(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def pack(self, name, **members):
        m = {"manifest.json": MANIFEST}
        m.update({k.replace("_json", ".json"): v for k, v in members.items()})
        return make_pack(os.path.join(self.d, name), m)

    def compare(self, a, b, *opts, verbose=False):
        out = os.path.join(self.d, "out")
        r = msprobe(*(["-v"] if verbose else []), "config_check", "-c", a, b, "-o", out, *opts)
        return r, os.path.join(out, "result.xlsx")


class Hyperparameters(Case):
    def test_lr_spelling_and_number_format_differ_only_in_form_and_pass(self):
        a = self.pack("a.zip", hyperparameters_json=hyper_member(["--lr", "1e-3", "--bs=32", "-e", "3"]))
        b = self.pack("b.zip", hyperparameters_json=hyper_member(["--learning_rate", "0.001",
                                                                    "--batch-size", "32.0", "-e", "3"]))
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIs(summary(x)["hyperparameters"], True)
        rows = {row["name"]: row for row in sheet_rows(x, "hyperparameters")}
        lr = rows["args.learning_rate"]
        self.assertEqual((lr["bench_value"], lr["cmp_value"], lr["equal"]), ("1e-3", "0.001", True))
        self.assertEqual((lr["bench_name"], lr["cmp_name"]), ("--lr", "--learning_rate"))
        self.assertIs(rows["args.batch_size"]["equal"], True)
        self.assertEqual(rows["args.e"]["bench_value"], "3")
        # The whole command line stays in the report, as information.
        self.assertEqual(rows["args"]["level"], "info")

    def test_a_learning_rate_difference_fails_naming_both_spellings(self):
        a = self.pack("a.zip", hyperparameters_json=hyper_member(["--lr", "1e-3", "--epochs", "3"]))
        b = self.pack("b.zip", hyperparameters_json=hyper_member(["--learning_rate=0.002", "--epochs", "3"]))
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIs(summary(x)["hyperparameters"], False)
        self.assertIn("args.learning_rate (bench --lr, cmp --learning_rate): bench 1e-3 vs cmp 0.002", r.stdout)
        bad = [(row["name"], row["bench_value"], row["cmp_value"]) for row in sheet_rows(x, "hyperparameters")
               if row["level"] == "error"]
        self.assertEqual(bad, [("args.learning_rate", "1e-3", "0.002")])
        self.assertEqual({row["filename"]: row["differences"] for row in sheet_rows(x, "summary")}
                         ["hyperparameters"], 1)

    def test_argparse_namespaces_fold_aliases_like_argv(self):
        # What the collector would record from parse_args(): {"namespace": vars(args)}.
        a = self.pack("a.zip", hyperparameters_json={"namespace": {"lr": 0.001, "bs": 32, "out_dir": "/a"}})
        b = self.pack("b.zip", hyperparameters_json={"namespace": {"learning_rate": "1e-3", "batch_size": 32,
                                                                   "out_dir": "/b"}})
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rows = {row["name"]: row for row in sheet_rows(x, "hyperparameters")}
        self.assertEqual(sorted(rows), ["namespace.batch_size", "namespace.learning_rate", "namespace.out_dir"])
        self.assertEqual(rows["namespace.out_dir"]["level"], "info")
        self.assertEqual({row["filename"]: row["info"] for row in sheet_rows(x, "summary")}["hyperparameters"], 1)
        c = self.pack("c.zip", hyperparameters_json={"namespace": {"learning_rate": 0.01, "bs": 32, "out_dir": "/a"}})
        r, x = self.compare(a, c)
        self.assertEqual(r.returncode, 1)
        self.assertIn("namespace.learning_rate (bench lr, cmp learning_rate): bench 0.001 vs cmp 0.01", r.stdout)

    def test_optimizer_values_compare_as_numbers(self):
        a = self.pack("a.zip", hyperparameters_json=hyper_member([], lr=0.001))
        b = self.pack("b.zip", hyperparameters_json=hyper_member([], lr=0.0011))
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 1)
        self.assertIn("optimizers[0].param_groups[0].lr: bench 0.001 vs cmp 0.0011", r.stdout)

    def test_paths_are_information_not_failures(self):
        out_a, out_b = os.path.join(self.d, "gpu_run"), os.path.join(self.d, "npu_run")
        os.mkdir(out_a)
        a = self.pack("a.zip", hyperparameters_json=hyper_member(
            ["--data", "/data/gpu/imagenet", "--save_dir", "ckpt_gpu", "--resume", out_a, "--config=gpu.yaml"]))
        b = self.pack("b.zip", hyperparameters_json=hyper_member(
            ["--data", "/mnt/npu/imagenet", "--save_dir", "ckpt_npu", "--resume", out_b, "--config=npu.yaml"]))
        r, x = self.compare(a, b, verbose=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rows = {row["name"]: row for row in sheet_rows(x, "hyperparameters")}
        for name in ("args.data", "args.save_dir", "args.resume", "args.config"):
            self.assertEqual((rows[name]["equal"], rows[name]["level"]), (False, "info"), name)
        self.assertIn("info: args.data: bench /data/gpu/imagenet vs cmp /mnt/npu/imagenet (a path)", r.stdout)

    def test_compute_dtype_flags_fold_to_one_name(self):
        a = self.pack("a.zip", hyperparameters_json=hyper_member(["--bf16"]))
        b = self.pack("b.zip", hyperparameters_json=hyper_member(["--dtype", "torch.bfloat16"]))
        c = self.pack("c.zip", hyperparameters_json=hyper_member(["--precision", "16-mixed"]))
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 0, r.stdout)
        r, x = self.compare(a, c)
        self.assertEqual(r.returncode, 1)
        self.assertIn("args.dtype (bench --bf16, cmp --precision): bench bf16 vs cmp fp16", r.stdout)

    def test_a_dtype_flag_that_is_off_is_the_default_not_a_value(self):
        # argparse's store_true leaves bf16=False in the namespace of the fp32 run
        a = self.pack("a.zip", hyperparameters_json=dict(hyper_member([]), namespaces=[{"bf16": False}]))
        b = self.pack("b.zip", hyperparameters_json=dict(hyper_member([]), namespaces=[{}]))
        c = self.pack("c.zip", hyperparameters_json=dict(hyper_member(["--bf16"]),
                                                         namespaces=[{"bf16": True}]))
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 0, r.stdout)
        r, x = self.compare(a, c)
        self.assertEqual(r.returncode, 1)
        failing = sorted(row["name"] for row in sheet_rows(x, "hyperparameters")
                         if row["equal"] is False and row["level"] != "info")
        self.assertEqual(failing, ["args.dtype", "namespaces[0].dtype"])

    def test_user_alias_file_extends_the_table(self):
        a = self.pack("a.zip", hyperparameters_json=hyper_member(["--init_lr", "0.1"]))
        b = self.pack("b.zip", hyperparameters_json=hyper_member(["--lr", "0.1"]))
        r, _ = self.compare(a, b)
        self.assertEqual(r.returncode, 1)
        aliases = os.path.join(self.d, "aliases.json")
        with open(aliases, "w") as f:
            f.write('{"learning_rate": ["init_lr"]}')
        r, x = self.compare(a, b, "--aliases", aliases)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(aliases, "w") as f:
            f.write('{"learning_rate": [1]}')
        r, _ = self.compare(a, b, "--aliases", aliases)
        self.assertEqual(r.returncode, 2)
        self.assertIn("learning_rate", r.stderr)

    def test_a_long_argument_difference_is_shown_whole_and_aligned(self):
        long_a = "layers=" + ",".join(str(i) for i in range(60)) + ",x"
        long_b = "layers=" + ",".join(str(i) for i in range(60)) + ",y"
        a = self.pack("a.zip", hyperparameters_json=hyper_member(["--dataset=synth"] * 8 + ["--arch", long_a]))
        b = self.pack("b.zip", hyperparameters_json=hyper_member(["--dataset=synth"] * 8 + ["--arch", long_b]))
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 1)
        lines = r.stdout.splitlines()
        i = next(k for k, line in enumerate(lines) if line.strip() == "args.arch:")
        bench, cmp, caret = lines[i + 1], lines[i + 2], lines[i + 3]
        self.assertTrue(bench.endswith(long_a) and cmp.endswith(long_b), r.stdout)
        # Both values start in one column and the caret sits under the first differing character.
        self.assertEqual(bench.index(long_a), cmp.index(long_b))
        self.assertEqual(caret.index("^"), bench.index(long_a) + len(long_a) - 1)
        row = next(row for row in sheet_rows(x, "hyperparameters") if row["name"] == "args.arch")
        self.assertEqual((row["bench_value"], row["cmp_value"]), (long_a, long_b))


class EnvironmentAcrossPlatforms(Case):
    GPU = {"NCCL_ALGO": "Ring", "NCCL_DETERMINISTIC": "1", "CUDA_VISIBLE_DEVICES": "0,1,2,3",
           "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "OMP_NUM_THREADS": "8"}
    NPU = {"HCCL_ALGO": "Ring", "HCCL_DETERMINISTIC": "true", "ASCEND_RT_VISIBLE_DEVICES": "4,5,6,7",
           "TASK_QUEUE_ENABLE": "2", "OMP_NUM_THREADS": "8"}

    def test_gpu_and_npu_variables_with_one_meaning_pass(self):
        a = self.pack("gpu.zip", env_json=env_member(self.GPU))
        b = self.pack("npu.zip", env_json=env_member(self.NPU))
        r, x = self.compare(a, b, verbose=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIs(summary(x)["env"], True)
        rows = {row["key"]: row for row in sheet_rows(x, "env")}
        self.assertEqual({k: row["level"] for k, row in rows.items()},
                         {"NCCL_ALGO / HCCL_ALGO": "info", "NCCL_DETERMINISTIC / HCCL_DETERMINISTIC": "info",
                          "CUDA_VISIBLE_DEVICES / ASCEND_RT_VISIBLE_DEVICES": "info",
                          "CUBLAS_WORKSPACE_CONFIG": "info", "TASK_QUEUE_ENABLE": "info"})
        self.assertEqual((rows["TASK_QUEUE_ENABLE"]["bench_value"], rows["TASK_QUEUE_ENABLE"]["cmp_value"]),
                         ("<unset>", "2"))
        self.assertIn("TASK_QUEUE_ENABLE: NPU-only variable", r.stdout)

    def test_hccl_algo_is_compared_with_nccl_algo(self):
        a = self.pack("gpu.zip", env_json=env_member(self.GPU))
        b = self.pack("npu.zip", env_json=env_member(dict(self.NPU, HCCL_ALGO="level0:NA;level1:H-D_R")))
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 1)
        bad = [row for row in sheet_rows(x, "env") if row["level"] == "error"]
        self.assertEqual(bad, [{"key": "NCCL_ALGO / HCCL_ALGO", "bench_value": "Ring",
                                "cmp_value": "level0:NA;level1:H-D_R", "level": "error"}])
        self.assertIn("NCCL_ALGO / HCCL_ALGO: bench 'Ring' vs cmp 'level0:NA;level1:H-D_R'", r.stdout)

    def test_unset_variable_takes_the_platform_default(self):
        # HCCL_DETERMINISTIC defaults to false: NCCL_DETERMINISTIC=1 on the GPU side differs.
        npu = dict(self.NPU)
        del npu["HCCL_DETERMINISTIC"]
        a = self.pack("gpu.zip", env_json=env_member(self.GPU))
        b = self.pack("npu.zip", env_json=env_member(npu))
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 1)
        bad = [(row["key"], row["bench_value"], row["cmp_value"]) for row in sheet_rows(x, "env")
               if row["level"] == "error"]
        self.assertEqual(bad, [("NCCL_DETERMINISTIC", "1", "<unset> (default false)")])

    def test_same_platform_one_sided_variable_still_fails(self):
        a = self.pack("a.zip", env_json=env_member(self.GPU))
        gpu2 = dict(self.GPU)
        del gpu2["CUBLAS_WORKSPACE_CONFIG"]
        b = self.pack("b.zip", env_json=env_member(gpu2))
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 1)
        self.assertEqual([(row["key"], row["level"]) for row in sheet_rows(x, "env")],
                         [("CUBLAS_WORKSPACE_CONFIG", "error")])

    def test_platform_packages_and_local_builds_are_information_across_platforms(self):
        a = self.pack("gpu.zip", env_json=env_member(self.GPU),
                      pip_json=pip_member({"torch": "2.1.0+cu121", "nvidia-cudnn-cu12": "8.9.2", "numpy": "1.26.0"}))
        b = self.pack("npu.zip", env_json=env_member(self.NPU),
                      pip_json=pip_member({"torch": "2.1.0", "torch_npu": "2.1.0.post3", "numpy": "1.26.0"}))
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual({row["package"]: row["level"] for row in sheet_rows(x, "pip")},
                         {"torch": "info", "nvidia-cudnn-cu12": "info", "torch_npu": "info"})


class RandomBySite(Case):
    def test_a_site_seeded_per_sample_is_one_finding(self):
        site = {"api": "random.seed", "file": "/a/data.py", "line": 12}
        a_calls = [dict(site, value=str(i)) for i in range(999)]
        b_calls = [dict(site, value=str(1000 + i)) for i in range(999)]
        top = {"api": "torch.manual_seed", "value": "0", "file": "/a/train.py", "line": 3}
        a = self.pack("a.zip", random_json={"calls": [top] + a_calls})
        b = self.pack("b.zip", random_json={"calls": [top] + b_calls})
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 1)
        rows = sheet_rows(x, "random")
        self.assertEqual([(row["api"], row["location"], row["equal"]) for row in rows],
                         [("torch.manual_seed", "train.py:3", True), ("random.seed", "data.py:12", False)])
        row = rows[1]
        self.assertEqual((row["bench_calls"], row["cmp_calls"], row["differing_calls"]), (999, 999, 999))
        self.assertEqual((row["bench_value"], row["cmp_value"], row["first_differing_call"]), ("0", "1000", 0))
        self.assertEqual({row["filename"]: row["differences"] for row in sheet_rows(x, "summary")}["random"], 1)
        self.assertIn("random.seed at data.py:12: 999 vs 999 calls, 999 differ", r.stdout)
        self.assertIn("1 difference", r.stdout)

    def test_equal_sequences_at_a_site_pass_and_a_late_change_is_located(self):
        site = {"api": "numpy.random.seed", "file": "/a/data.py", "line": 7}
        calls = [dict(site, value=str(i % 5)) for i in range(50)]
        a = self.pack("a.zip", random_json={"calls": calls})
        r, x = self.compare(a, a)
        self.assertEqual(r.returncode, 0, r.stdout)
        changed = [dict(c) for c in calls]
        changed[37]["value"] = "99"
        b = self.pack("b.zip", random_json={"calls": changed})
        r, x = self.compare(a, b)
        self.assertEqual(r.returncode, 1)
        row = sheet_rows(x, "random")[0]
        self.assertEqual((row["differing_calls"], row["first_differing_call"], row["bench_value"],
                          row["cmp_value"]), (1, 37, str(37 % 5), "99"))


@unittest.skipUnless(PRELOAD and os.path.exists(PRELOAD), "the dump shim (msprobe_preload) is not built")
class RealRunsDifferingOnlyInOutputPaths(unittest.TestCase):
    """Two runs of the same script under the real shim whose argv differs only
    in where they write: config_check passes every item."""

    def test_two_runs_with_other_output_directories_pass(self):
        with tempfile.TemporaryDirectory() as d:
            packs = []
            for tag in ("gpu_run", "npu_run"):
                out = os.path.join(d, tag)
                os.mkdir(out)
                z = os.path.join(d, tag + ".zip")
                r = run_under_shim([TRAIN, "--output_dir", out, "--log-file=" + os.path.join(out, "train.log"),
                                    "--lr", "0.05", "--save", out + "/ckpt.pt"], z, d, CCT_STEPS=1)
                self.assertEqual(r.returncode, 0, r.stderr)
                packs.append(z)
            res = msprobe("config_check", "-c", packs[0], packs[1], "-o", os.path.join(d, "out"))
            self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
            xlsx = os.path.join(d, "out", "result.xlsx")
            self.assertEqual(summary(xlsx), {k: True for k in ("env", "pip", "dataset", "weights", "random",
                                                               "hyperparameters")})
            self.assertEqual(sheet_header(xlsx, "hyperparameters")[:5],
                             ["name", "bench_value", "cmp_value", "equal", "level"])
            rows = {row["name"]: row for row in sheet_rows(xlsx, "hyperparameters")}
            for name in ("args.output_dir", "args.log_file", "args.save"):
                self.assertEqual((rows[name]["equal"], rows[name]["level"]), (False, "info"), name)
            self.assertEqual(rows["args.output_dir"]["bench_value"], os.path.join(d, "gpu_run"))
            self.assertIs(rows["args.learning_rate"]["equal"], True)
            self.assertIs(rows["optimizers[0].param_groups[0].lr"]["equal"], True)


if __name__ == "__main__":
    unittest.main()
