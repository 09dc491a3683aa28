"""msprobe's own compare command lines run unchanged on msprobe's own dumps
(fixtures/msprobe): 26's -tp/-gp/-fm/-dm/-cm/-da/-tensor_log/--xlsx/-m and
8.x's -i compare.json/-s/-c/-f/-hl; a data_mapping.yaml pairs what it names
(also through our --mapping), a line that matches nothing is warned, a
cell_mapping.yaml renames module records; merge_result names our equivalent.
The rows are checked against what the fixtures' dump.json files hold."""
import csv
import glob
import json
import os
import shutil
import subprocess
import tempfile
import unittest

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
SOURCE = os.environ.get("MSPROBE_SOURCE_DIR",
                        os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FIX = os.path.join(SOURCE, "fixtures", "msprobe")


def msprobe(*args, cwd=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, cwd=cwd)


def json_of(v):
    (p,) = glob.glob(os.path.join(FIX, v, "step0", "*", "dump.json"))
    return p


def rows(out):
    with open(os.path.join(out, "result.csv"), newline="") as f:
        return list(csv.DictReader(f))


class MsprobeFlags(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def out(self, name="o"):
        return os.path.join(self.d, name)

    def copy_renamed(self, v, renames, name):
        """A copy of fixture v's rank dir with records renamed in dump.json
        (their .pt files keep their names: dump.json's data_name says where)."""
        src = os.path.dirname(json_of(v))
        dst = os.path.join(self.d, name)
        shutil.copytree(src, dst)
        with open(os.path.join(dst, "dump.json")) as f:
            js = json.load(f)
        js["data"] = {renames.get(k, k): v for k, v in js["data"].items()}
        with open(os.path.join(dst, "dump.json"), "w") as f:
            json.dump(js, f)
        return dst

    def test_msprobe_26_command_line(self):
        p = msprobe("compare", "-tp", json_of("v26"), "-gp", json_of("v833"), "-o", self.out(),
                    "-fm", "-da", "--xlsx", "-m", "auto", "--csv")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        # msprobe's command line, msprobe's files (two dump.json: no rank in
        # the name; --xlsx: a workbook); --csv adds our result.csv
        self.assertEqual(len(glob.glob(os.path.join(self.out(), "compare_result_" + "[0-9]" * 14
                                                    + ".xlsx"))), 1, os.listdir(self.out()))
        self.assertFalse(os.path.exists(os.path.join(self.out(), "result.xlsx")))
        got = rows(self.out())
        # -tp is the compare (NPU) side, -gp the bench: 8.3.3's extra records
        # (torch.ones_like, Tensor.transpose) are bench-only rows
        with open(json_of("v833")) as f:
            bench_only = set(json.load(f)["data"])
        with open(json_of("v26")) as f:
            bench_only -= set(json.load(f)["data"])
        self.assertTrue(bench_only)
        for r in got:
            rec = r["Bench Name"].rsplit(".", 2)[0]
            if rec in bench_only:
                self.assertEqual(r["NPU Name"], "N/A")
        p = msprobe("compare", "-tp", json_of("v26"), "-gp", json_of("v833"), "-m", "torchair")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--mode: 'torchair' is not supported", p.stderr)

    def test_msprobe_8x_compare_json(self):
        cj = os.path.join(self.d, "compare.json")
        with open(cj, "w") as f:
            json.dump({"npu_path": json_of("v26"), "bench_path": json_of("v833"),
                       "stack_path": os.path.join(os.path.dirname(json_of("v26")), "stack.json"),
                       "is_print_compare_log": True}, f)
        p = msprobe("-f", "pytorch", "compare", "-i", cj, "-o", self.out(), "-s", "-c", "-f",
                    "-hl", "--csv")
        self.assertEqual(p.returncode, 0, p.stderr)
        log = [l for l in p.stdout.splitlines() if " vs " in l]
        got = rows(self.out())
        self.assertEqual(len(log), len(got))
        self.assertEqual(log[0].split(" vs ")[0], got[0]["NPU Name"])
        # NPU_Stack_Info comes from msprobe 26's stack.json, the compare side
        with open(os.path.join(os.path.dirname(json_of("v26")), "stack.json")) as f:
            stacks = json.load(f)
        relu = [v[1] for v in stacks.values() if "Functional.relu.0.forward" in v[0]][0]
        first = [r for r in got if r["NPU Name"] == "Functional.relu.0.forward.input.0"][0]
        self.assertEqual(first["NPU_Stack_Info"], "\n".join(relu))
        for bad, msg in (({"npu_path": 3, "bench_path": "x"}, 'key "npu_path" must be a path'),
                         ({"npu_path": "a", "bench_path": "b", "extra": 1}, 'unknown key "extra"'),
                         ({"npu_path": "a", "bench_path": "b", "stack_path": "/no/such"},
                          "stack_path '/no/such'")):
            with open(cj, "w") as f:
                json.dump(bad, f)
            p = msprobe("compare", "-i", cj, "-o", self.out())
            self.assertEqual(p.returncode, 2)
            self.assertIn(msg, p.stderr)

    def test_data_mapping_pairs_what_it_names_and_warns_what_matches_nothing(self):
        npu = self.copy_renamed("v26", {"Functional.gelu.0.forward": "NPU.fast_gelu.0.forward"},
                                "npu")
        bench = os.path.dirname(json_of("v833"))
        ym = os.path.join(self.d, "data_mapping.yaml")
        with open(ym, "w") as f:
            f.write("# msprobe's data_mapping.yaml\n"
                    "NPU.fast_gelu.0.forward.input.0: Functional.gelu.0.forward.input.0\n"
                    "'NPU.fast_gelu.0.forward.output.0': \"Functional.gelu.0.forward.output.0\"\n"
                    "Torch.matmul.0.forward.input.0: Torch.matmul.0.forward.input.1\n"
                    "Functional.no_such.0.forward.input.0: Functional.relu.0.forward.input.0\n")
        p = msprobe("compare", "-tp", npu, "-gp", bench, "-o", self.out("plain"), "--csv")
        plain = {r["NPU Name"]: r for r in rows(self.out("plain"))}
        self.assertEqual(plain["NPU.fast_gelu.0.forward.input.0"]["Bench Name"], "N/A")
        for how in (["-dm", ym], ["--mapping", ym]):
            with self.subTest(how=how[0]):
                p = msprobe("compare", "-tp", npu, "-gp", bench, "-o", self.out(), "--csv", *how)
                got = {r["NPU Name"]: r for r in rows(self.out())}
                for role in ("input.0", "output.0"):
                    r = got["NPU.fast_gelu.0.forward." + role]
                    self.assertEqual(r["Bench Name"], "Functional.gelu.0.forward." + role)
                    self.assertEqual(r["MaxAbsErr"], "0")
                # a tensor under another role: input.1 of the bench pairs with
                # input.0 of the compare side, the bench's input.0 is left alone
                m = got["Torch.matmul.0.forward.input.0"]
                self.assertEqual(m["Bench Name"], "Torch.matmul.0.forward.input.1")
                self.assertEqual(m["NPU Tensor Shape"], "[4, 5, 8]")
                self.assertEqual(m["Bench Tensor Shape"], "[4, 8, 5]")
                self.assertIn("%s:5: compare record Functional.no_such.0.forward is in no "
                              "compare dump; the line matched nothing" % ym, p.stderr)
                self.assertEqual(p.stderr.count("matched nothing"), 1)

    def test_data_mapping_is_read_as_yaml(self):
        # a value on its own line, an explicit key: YAML the hand-written
        # reader refused ("found 1 field") and msprobe's PyYAML takes
        npu = self.copy_renamed("v26", {"Functional.gelu.0.forward": "NPU.fast_gelu.0.forward"},
                                "npu")
        bench = os.path.dirname(json_of("v833"))
        ym = os.path.join(self.d, "data_mapping.yaml")
        with open(ym, "w") as f:
            f.write("NPU.fast_gelu.0.forward.input.0:\n    Functional.gelu.0.forward.input.0\n"
                    "? NPU.fast_gelu.0.forward.output.0\n: Functional.gelu.0.forward.output.0\n")
        p = msprobe("compare", "-tp", npu, "-gp", bench, "-o", self.out(), "--csv", "-dm", ym)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = {r["NPU Name"]: r for r in rows(self.out())}
        for role in ("input.0", "output.0"):
            self.assertEqual(got["NPU.fast_gelu.0.forward." + role]["Bench Name"],
                             "Functional.gelu.0.forward." + role)
        # a name with a '#' inside is not cut there; a pair of names among
        # YAML lines makes the file neither kind; each is refused by line
        for text, needle in (("A.0.forward: B.0.for#ward\n", ":1: expected \"npu_name: "
                                                              "bench_name\""),
                             ("A.0.forward: B.0.forward\nC.0.forward D.0.forward\n",
                              ":2: not YAML (could not find expected ':' while scanning a simple "
                              "key), and line 1 is \"npu_name: bench_name\"")):
            with open(ym, "w") as f:
                f.write(text)
            p = msprobe("compare", "-tp", npu, "-gp", bench, "-o", self.out(), "-dm", ym)
            self.assertEqual(p.returncode, 2, p.stdout)
            self.assertIn("mapping file " + ym + needle, p.stderr)

    def test_cell_mapping_renames_module_records(self):
        npu = self.copy_renamed("v26", {"Functional.linear.1.forward":
                                        "Module.fc2.Dense.forward.0"}, "npu")
        bench = self.copy_renamed("v833", {"Functional.linear.1.forward":
                                           "Module.fc2.Linear.forward.0"}, "bench")
        cm = os.path.join(self.d, "cell_mapping.yaml")
        with open(cm, "w") as f:
            f.write("fc2.Dense: fc2.Linear\nNoSuchCell: Other\n")
        p = msprobe("compare", "-tp", npu, "-gp", bench, "-o", self.out(), "--csv", "-cm", cm)
        got = {r["NPU Name"]: r for r in rows(self.out())}
        r = got["Module.fc2.Dense.forward.0.output.0"]
        self.assertEqual(r["Bench Name"], "Module.fc2.Linear.forward.0.output.0")
        self.assertEqual(r["MaxAbsErr"], "0")
        self.assertIn("%s:2: no compare module record has \"NoSuchCell\"" % cm, p.stderr)
        # -cm without a file: nothing to map, the records stay apart
        p = msprobe("compare", "-tp", npu, "-gp", bench, "-o", self.out(), "--csv", "-cm")
        got = {r["NPU Name"]: r for r in rows(self.out())}
        self.assertEqual(got["Module.fc2.Dense.forward.0.output.0"]["Bench Name"], "N/A")

    def test_mindspore_only_flags_note_and_merge_result_names_ours(self):
        p = msprobe("compare", "-tp", json_of("v26"), "-gp", json_of("v26"), "-o", self.out(),
                    "-am", "-lm", "layers.yaml")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr.count("msprobe: note: "), 2)
        self.assertIn("-am (api_mapping) maps MindSpore APIs", p.stderr)
        # merge_result is a command of its own (msprobe-merge_result(1)): a
        # config file that is not there is named
        p = msprobe("merge_result", "-i", self.d, "-o", self.out(), "-config", "c.yaml")
        self.assertEqual(p.returncode, 2)
        self.assertIn("c.yaml", p.stderr)

    def test_man_page_has_the_table_of_msprobe_flags(self):
        text = open(os.path.join(SOURCE, "man", "msprobe-compare.1"), encoding="utf-8").read()
        section = text.split('.SH "MSPROBE\'S FLAGS"')[1].split("\n.SH")[0]
        for flag in ("\\-tp", "\\-gp", "\\-fm", "\\-dm", "\\-cm", "\\-da", "\\-tensor_log",
                     "\\-i, \\-\\-input_path", "\\-s, \\-\\-stack_mode", "merge_result"):
            self.assertIn(flag, section)


if __name__ == "__main__":
    unittest.main()
