"""msprobe.json loader: feeds config files to cfg_dump_parsed (which prints
what msp_config_load made of them, or the error) and compares with values
and messages written out by hand here.

Usage: test_config.py /path/to/cfg_dump_parsed
"""
import os
import subprocess
import sys
import tempfile
import unittest

PARSED = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else ""

SEED = """{
  "dump": {
    "common_dump_settings": {
      "dump_mode": "api",            // "api" | "module" | "mix"
      "dump_path": "./msprobe_dump_data",
      "dump_iter": "10|20",          // steps to dump; also "5-8", "all"
      "task": "tensor"               // "tensor" (default) | "statistics"
    },
    "api_list": [
      { "name": "torch.nn.functional.conv2d", "api_type": "forward" },
      { "name": "my_model.layer1.0.conv1",   "api_type": "backward" }
    ]
  },
  "config_check": { "output_zip_path": "./gpu_config_pack.zip" }
}
"""

DEFAULTS = {
    "source": "msprobe.json",
    "has_dump": "0",
    "dump_mode": "api",
    "dump_path": "./msprobe_dump_data",
    "dump_iter": "all",
    "task": "tensor",
    "step_trigger": "optimizer",
    "api_list": "0",
    "has_config_check": "0",
    "output_zip_path": "./config_check_pack.zip",
    "write_at_step": "-1",
    "dataset_batches": "1",
}

F = "msprobe.json"
CDS = F + ": dump.common_dump_settings"
ITER_HINT = 'expected a step set like "10|20", "5-8", "1|3-5" or "all"'


class ConfigCase(unittest.TestCase):
    def setUp(self):
        self.assertTrue(PARSED and os.access(PARSED, os.X_OK), "pass the cfg_dump_parsed path")
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def run_parsed(self, args):
        r = subprocess.run([PARSED, *args], cwd=self.tmp.name, capture_output=True)
        out = r.stdout.decode("utf-8", "replace")
        fields = {}
        for line in out.splitlines():
            key, _, value = line.partition("=")
            fields[key] = value
        return r.returncode, fields

    def load(self, text, *steps, name=F):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
        return self.run_parsed([name, *map(str, steps)])

    def assertLoads(self, text, **expected):
        rc, got = self.load(text)
        self.assertEqual(rc, 0, got.get("detail"))
        want = dict(DEFAULTS)
        want.update(expected)
        self.assertEqual({k: got[k] for k in want}, want)
        return got

    def assertRejects(self, text, detail, code="CONFIG", name=F):
        rc, got = self.load(text, name=name)
        self.assertEqual(rc, 2, got)
        self.assertEqual(got.get("error"), code)
        self.assertEqual(got.get("detail"), detail)


class AcceptsValidConfigs(ConfigCase):
    def test_seed_verbatim_with_comments(self):
        got = self.assertLoads(
            SEED, has_dump="1", dump_iter="10|20", api_list="2", has_config_check="1",
            output_zip_path="./gpu_config_pack.zip")
        self.assertEqual(got["api[0]"], "torch.nn.functional.conv2d forward")
        self.assertEqual(got["api[1]"], "my_model.layer1.0.conv1 backward")

    def test_empty_object_gives_every_default(self):
        self.assertLoads("{}")
        self.assertLoads('{"dump": {}}', has_dump="1")
        self.assertLoads('{"config_check": {}}', has_config_check="1")

    def test_every_key_set(self):
        got = self.assertLoads("""{
          "dump": {
            "common_dump_settings": {
              "dump_mode": "mix", "dump_path": "/data/run 1/dump", "dump_iter": "1|3-5",
              "task": "statistics", "step_trigger": "manual"
            },
            "api_list": [
              {"name": "torch.matmul", "api_type": "all"},
              {"name": "Tensor.add", "api_type": "both"},
              {"name": "layer1.0.conv1"}
            ]
          },
          "config_check": {"output_zip_path": "out/pack.zip", "write_at_step": 0,
                           "dataset_batches": 3}
        }""", has_dump="1", dump_mode="mix", dump_path="/data/run 1/dump", dump_iter="1|3-5",
            task="statistics", step_trigger="manual", api_list="3", has_config_check="1",
            output_zip_path="out/pack.zip", write_at_step="0", dataset_batches="3")
        self.assertEqual(got["api[0]"], "torch.matmul all")
        self.assertEqual(got["api[1]"], "Tensor.add all")
        self.assertEqual(got["api[2]"], "layer1.0.conv1 all")  # api_type absent = both

    def test_each_enum_value(self):
        for mode in ("api", "module", "mix"):
            self.assertLoads('{"dump": {"common_dump_settings": {"dump_mode": "%s"}}}' % mode,
                             has_dump="1", dump_mode=mode)
        for trig in ("optimizer", "backward", "forward", "manual"):
            self.assertLoads('{"dump": {"common_dump_settings": {"step_trigger": "%s"}}}' % trig,
                             has_dump="1", step_trigger=trig)
        for task in ("tensor", "statistics", "overflow_check"):
            self.assertLoads('{"dump": {"common_dump_settings": {"task": "%s"}}}' % task,
                             has_dump="1", task=task, overflow_nums="1")

    def test_overflow_nums_in_both_layouts(self):
        self.assertLoads('{"dump": {"common_dump_settings": {"task": "overflow_check", '
                         '"overflow_nums": -1}}}', has_dump="1", task="overflow_check",
                         overflow_nums="-1")
        self.assertLoads('{"task": "overflow_check", "overflow_check": {"overflow_nums": 3, '
                         '"check_mode": "all"}, "tensor": {"list": []}}',
                         has_dump="1", task="overflow_check", overflow_nums="3",
                         msprobe_format="1")
        self.assertRejects('{"dump": {"common_dump_settings": {"task": "tensor", '
                           '"overflow_nums": 2}}}',
                           CDS + '.overflow_nums: applies only to task "overflow_check"')
        self.assertRejects('{"dump": {"common_dump_settings": {"task": "overflow_check", '
                           '"overflow_nums": 1.5}}}',
                           CDS + '.overflow_nums: expected a number of overflows >= 1, or -1 for '
                           'no limit, got number 1.5')

    def test_dump_iter_forms_select_the_right_steps(self):
        cases = [  # (JSON value, printed set, steps in, steps out)
            ('"10|20"', "10|20", [10, 20], [0, 9, 11, 19, 21]),
            ('"5-8"', "5-8", [5, 6, 7, 8], [4, 9]),
            ('"1|3-5"', "1|3-5", [1, 3, 4, 5], [0, 2, 6]),
            ('" 2 - 4 | 6 "', "2-4|6", [2, 3, 4, 6], [1, 5, 7]),
            ('"0"', "0", [0], [1]),
            ('"all"', "all", [0, 1, 10**12], []),
            ('""', "all", [0, 7], []),
            ("7", "7", [7], [6, 8]),
            ("[1, 5, 9]", "1|5|9", [1, 5, 9], [0, 2, 8, 10]),
            ("[0]", "0", [0], [1]),
            ('"3-3"', "3", [3], [2, 4]),
            ('"9223372036854775807"', "9223372036854775807", [9223372036854775807], [0]),
        ]
        for value, printed, yes, no in cases:
            with self.subTest(value=value):
                text = '{"dump": {"common_dump_settings": {"dump_iter": %s}}}' % value
                rc, got = self.load(text, *yes, *no)
                self.assertEqual(rc, 0, got.get("detail"))
                self.assertEqual(got["dump_iter"], printed)
                for s in yes:
                    self.assertEqual(got[f"contains[{s}]"], "1", s)
                for s in no:
                    self.assertEqual(got[f"contains[{s}]"], "0", s)

    def test_comment_markers_inside_strings_are_kept(self):
        got = self.assertLoads(r'''{"dump": {  // a comment with "quotes" and /* inside
          /* a block comment
             over lines, with // and "{" */
          "common_dump_settings": {"dump_path": "./a//b/*c*/"},
          "api_list": [{"name": "x\"//y"}]}}  // no newline at the end''',
                               has_dump="1", dump_path="./a//b/*c*/", api_list="1")
        self.assertEqual(got["api[0]"], 'x"//y all')

    def test_byte_order_mark_crlf_and_escapes(self):
        text = '\ufeff{"dump": {"common_dump_settings":\r\n {"dump_path": "d\\u00e9j\\u00e0/\\t"}}}\r\n'
        self.assertLoads(text.encode("utf-8"), has_dump="1", dump_path="d\u00e9j\u00e0/\t")

    def test_integral_numbers_in_any_json_spelling(self):
        self.assertLoads('{"config_check": {"dataset_batches": 1e2, "write_at_step": 4.0}}',
                         has_config_check="1", dataset_batches="100", write_at_step="4")
        self.assertLoads('{"config_check": {"write_at_step": -1}}', has_config_check="1")

    def test_stack_rank_and_where_each_entry_was_written(self):
        got = self.assertLoads('{"dump": {"common_dump_settings": {"stack": false, "rank": [3, 1]}, '
                               '"api_list": [{"name": "torch.matmul"}, {"name": "fc1", '
                               '"api_type": "forward"}]}}', has_dump="1", api_list="2")
        self.assertEqual((got["stacks"], got["rank"]), ("0", "3|1"))
        self.assertEqual(got["api_key[0]"], 'dump.api_list[0].name "torch.matmul"')
        self.assertEqual(got["api_key[1]"], 'dump.api_list[1].name "fc1"')
        self.assertNotIn("api_call[0]", got)  # our api_list names every call
        got = self.assertLoads('{"dump": {"common_dump_settings": {"stack": true}}}', has_dump="1")
        self.assertEqual(got["stacks"], "1")
        self.assertEqual(self.assertLoads("{}")["stacks"], "1")  # default on

    def test_empty_api_list_means_every_api(self):
        self.assertLoads('{"dump": {"api_list": []}}', has_dump="1", api_list="0")

    def test_source_is_the_path_given(self):
        os.mkdir(os.path.join(self.tmp.name, "sub"))
        rc, got = self.load("{}", name="sub/my.json")
        self.assertEqual((rc, got["source"]), (0, "sub/my.json"))


class RejectsInvalidConfigs(ConfigCase):
    def test_unknown_keys_name_the_path_and_the_choices(self):
        self.assertRejects('{"dumps": {}}',
                           F + ": dumps: unknown key (expected dump or config_check)")
        self.assertRejects(
            '{"dump": {"common_dump_settings": {"dump_modee": "api"}}}',
            CDS + ".dump_modee: unknown key (expected dump_mode, dump_path, dump_iter, task, "
            "step_trigger, rank, stack or overflow_nums)")
        self.assertRejects('{"dump": {"level": "L1"}}',
                           F + ": dump.level: unknown key (expected common_dump_settings or api_list)")
        self.assertRejects(
            '{"dump": {"api_list": [{"name": "a"}, {"name": "b", "type": "forward"}]}}',
            F + ": dump.api_list[1].type: unknown key (expected name or api_type)")
        self.assertRejects(
            '{"config_check": {"output_zip": "a.zip"}}',
            F + ": config_check.output_zip: unknown key (expected output_zip_path, "
            "write_at_step or dataset_batches)")

    def test_duplicate_keys(self):
        self.assertRejects('{"dump": {}, "dump": {}}',
                           F + ": dump: duplicate key (each key may appear once)")
        self.assertRejects(
            '{"dump": {"common_dump_settings": {"task": "tensor", "task": "statistics"}}}',
            CDS + ".task: duplicate key (each key may appear once)")
        self.assertRejects('{"dump": {"api_list": [{"name": "a", "name": "b"}]}}',
                           F + ": dump.api_list[0].name: duplicate key (each key may appear once)")

    def test_bad_enum_values(self):
        self.assertRejects('{"dump": {"common_dump_settings": {"task": "tensors"}}}',
                           CDS + ': task: expected "tensor", "statistics", "md5" or "overflow_check", got "tensors"'
                           .replace(": task", ".task"))
        self.assertRejects('{"dump": {"common_dump_settings": {"dump_mode": "API"}}}',
                           CDS + '.dump_mode: expected "api", "module" or "mix", got "API"')
        self.assertRejects(
            '{"dump": {"common_dump_settings": {"step_trigger": "epoch"}}}',
            CDS + '.step_trigger: expected "optimizer", "backward", "forward" or "manual", '
            'got "epoch"')
        self.assertRejects(
            '{"dump": {"api_list": [{"name": "a", "api_type": "fw"}]}}',
            F + ': dump.api_list[0].api_type: expected "forward", "backward", "all" or "both", '
            'got "fw"')
        self.assertRejects('{"dump": {"common_dump_settings": {"task": 1}}}',
                           CDS + '.task: expected "tensor", "statistics", "md5" or "overflow_check", got number 1')

    def test_wrong_types(self):
        cases = [
            ('{"dump": []}', F + ": dump: expected an object { ... }, got an array"),
            ('{"dump": {"common_dump_settings": "api"}}',
             CDS + ': expected an object { ... }, got "api"'),
            ('{"config_check": null}', F + ": config_check: expected an object { ... }, got null"),
            ('{"dump": {"common_dump_settings": {"dump_path": 3}}}',
             CDS + ".dump_path: expected a non-empty directory path, got number 3"),
            ('{"dump": {"common_dump_settings": {"dump_path": ""}}}',
             CDS + '.dump_path: expected a non-empty directory path, got ""'),
            ('{"dump": {"api_list": {"name": "a"}}}',
             F + ': dump.api_list: expected an array of {"name": ..., "api_type": ...}, '
             "got an object"),
            ('{"dump": {"api_list": ["torch.matmul"]}}',
             F + ': dump.api_list[0]: expected an object { ... }, got "torch.matmul"'),
            ('{"dump": {"api_list": [{"api_type": "forward"}]}}',
             F + ": dump.api_list[0].name: missing (each api_list entry needs a name, e.g. "
             '"torch.nn.functional.conv2d" or "layer1.0.conv1")'),
            ('{"dump": {"api_list": [{"name": ""}]}}',
             F + ': dump.api_list[0].name: expected a non-empty API or module name, got ""'),
            ('{"dump": {"api_list": [{"name": "torch.matmul "}]}}',
             F + ': dump.api_list[0].name: expected an API or module name without spaces, '
             'got "torch.matmul "'),
            ('{"config_check": {"output_zip_path": false}}',
             F + ": config_check.output_zip_path: expected a non-empty file path, got false"),
            ('{"config_check": {"output_zip_path": "packs/"}}',
             F + ": config_check.output_zip_path: expected a file path, not a directory "
             "(ending in '/'), got \"packs/\""),
            ('{"config_check": {"write_at_step": "3"}}',
             F + ': config_check.write_at_step: expected a step number >= 0 (or -1: only at '
             'exit), got "3"'),
            ('{"config_check": {"write_at_step": -2}}',
             F + ": config_check.write_at_step: expected a step number >= 0 (or -1: only at "
             "exit), got number -2"),
            ('{"config_check": {"write_at_step": 1.5}}',
             F + ": config_check.write_at_step: expected a step number >= 0 (or -1: only at "
             "exit), got number 1.5"),
            ('{"config_check": {"dataset_batches": 0}}',
             F + ": config_check.dataset_batches: expected an integer >= 1, got number 0"),
            ('{"config_check": {"dataset_batches": true}}',
             F + ": config_check.dataset_batches: expected an integer >= 1, got true"),
            ('{"config_check": {"dataset_batches": 1e300}}',
             F + ": config_check.dataset_batches: expected an integer >= 1, got number 1e+300"),
        ]
        for text, detail in cases:
            with self.subTest(text=text):
                self.assertRejects(text, detail)

    def test_bad_stack_and_rank(self):
        self.assertRejects('{"dump": {"common_dump_settings": {"stack": "no"}}}',
                           CDS + '.stack: expected true or false, got "no"')
        self.assertRejects('{"dump": {"common_dump_settings": {"stack": 0}}}',
                           CDS + ".stack: expected true or false, got number 0")
        self.assertRejects('{"dump": {"common_dump_settings": {"rank": [0, -1]}}}',
                           CDS + ".rank[1]: expected a step number >= 0, got number -1")
        self.assertRejects('{"dump": {"common_dump_settings": {"rank": "2-1"}}}',
                           CDS + f'.rank: {ITER_HINT}, got "2-1" (range 2-1 ends before it starts)')

    def test_first_error_in_key_order(self):
        # the table's order, not the file's: dump_mode is checked before task
        self.assertRejects('{"dump": {"common_dump_settings": {"task": "x", "dump_mode": "y"}}}',
                           CDS + '.dump_mode: expected "api", "module" or "mix", got "y"')
        # every key of an object is known before any value is read
        self.assertRejects('{"dump": {"common_dump_settings": {"task": "x", "tsk": 1}}}',
                           CDS + ".tsk: unknown key (expected dump_mode, dump_path, dump_iter, "
                           "task, step_trigger, rank, stack or overflow_nums)")
        # overflow_nums is read after task, wherever the file puts it
        self.assertLoads('{"dump": {"common_dump_settings": {"overflow_nums": 4, '
                         '"task": "overflow_check"}}}', has_dump="1", task="overflow_check",
                         overflow_nums="4")
        # dump is read in full before config_check
        self.assertRejects('{"config_check": {"write_at_step": "x"}, '
                           '"dump": {"api_list": [{"name": ""}]}}',
                           F + ': dump.api_list[0].name: expected a non-empty API or module '
                           'name, got ""')

    def test_bad_dump_iter_values(self):
        any_form = (CDS + '.dump_iter: expected a step set like "10|20", "5-8", "1|3-5" or '
                    '"all", a step number, or a non-empty array of step numbers, got ')
        cases = [
            ('"-1"', CDS + f'.dump_iter: {ITER_HINT}, got "-1" (a negative step at offset 0)'),
            ('"8-5"', CDS + f'.dump_iter: {ITER_HINT}, got "8-5" (range 8-5 ends before it starts)'),
            ('"abc"', CDS + f'.dump_iter: {ITER_HINT}, got "abc" (not a step number at offset 0)'),
            ('"1||2"', CDS + f'.dump_iter: {ITER_HINT}, got "1||2" (an empty entry at offset 2)'),
            ('"1|"', CDS + f'.dump_iter: {ITER_HINT}, got "1|" (an empty entry at offset 2)'),
            ('"3-"', CDS + f'.dump_iter: {ITER_HINT}, got "3-" (a range needs an end step, as in "5-8")'),
            ('"1,2"', CDS + f".dump_iter: {ITER_HINT}, got \"1,2\" (unexpected ',' at offset 1)"),
            ('"all|1"', CDS + f'.dump_iter: {ITER_HINT}, got "all|1" (not a step number at offset 0)'),
            ('"5-8x"', CDS + f".dump_iter: {ITER_HINT}, got \"5-8x\" (unexpected 'x' at offset 3)"),
            ('"99999999999999999999"',
             CDS + f'.dump_iter: {ITER_HINT}, got "99999999999999999999" (step number too large)'),
            ("true", any_form + "true"),
            ("[]", any_form + "an array"),
            ("{}", any_form + "an object"),
            ('[1, "2"]', CDS + '.dump_iter[1]: expected a step number >= 0, got "2"'),
            ("[1, -3]", CDS + ".dump_iter[1]: expected a step number >= 0, got number -3"),
            ("-1", CDS + '.dump_iter: expected a step set like "10|20", "5-8", "all" or a step '
                         "number >= 0, got number -1"),
            ("2.5", CDS + '.dump_iter: expected a step set like "10|20", "5-8", "all" or a step '
                          "number >= 0, got number 2.5"),
        ]
        for value, detail in cases:
            with self.subTest(value=value):
                self.assertRejects('{"dump": {"common_dump_settings": {"dump_iter": %s}}}' % value,
                                   detail)

    def test_too_many_step_ranges(self):
        many = "|".join(str(i) for i in range(65537))
        self.assertRejects('{"dump": {"common_dump_settings": {"dump_iter": "%s"}}}' % many,
                           CDS + ".dump_iter: more than 65536 steps or ranges in one step set")

    def test_invalid_json_reports_line_column_and_reason(self):
        bad = F + ":%s: invalid JSON: %s, near '%s'"
        eof = F + ":%s: invalid JSON: unexpected end of file"
        trailing = "text after the end of the top-level object"
        cases = [
            ('{\n  "dump": {\n    "x": 1 "y": 2\n  }\n}',
             bad % ("3:12", "expected ',' or '}' (a comma missing?)", '"y": 2')),
            ('{"dump": {},}', bad % ("1:13", "comma before '}' (JSON allows no trailing comma)", "}")),
            ('{"dump": {"api_list": [{"name": "a"},]}}',
             bad % ("1:38", "comma before ']' (JSON allows no trailing comma)", "]}}")),
            ('{"dump": {"api_list": [{"name": "a"} {"name": "b"}]}}',
             bad % ("1:38", "expected ',' or ']' (a comma missing?)", '{"name": "b"}]}}')),
            ("{'dump': {}}", bad % ("1:2", "keys need double quotes, not single", "'dump': {}}")),
            ('{"dump": {"common_dump_settings": {"task": \'tensor\'}}}',
             bad % ("1:44", "strings need double quotes, not single", "'tensor'}}}")),
            ('{"dump" {}}', bad % ("1:9", "expected ':' after the key", "{}}")),
            ('{dump: {}}', bad % ("1:2", "expected a key in double quotes", "dump: {}}")),
            ('{"dump": {"common_dump_settings": {"task": tensor}}}',
             bad % ("1:44", "expected a value (object, array, \"string\", number, true, false "
                    "or null)", "tensor}}}")),
            ('{"config_check": {"write_at_step": -x}}',
             bad % ("1:36", "invalid number", "-x}}")),
            ('{"dump": {"common_dump_settings": {"dump_path": "a\\qb"}}}',
             bad % ("1:51", "invalid escape (allowed: \\\" \\\\ \\/ \\b \\f \\n \\r "
                    "\\t \\uXXXX)", "\\qb\"}}}")),
            ('{"dump": {"common_dump_settings": {"dump_path": "\\ud800x"}}}',
             bad % ("1:50", "\\u escape of a lone UTF-16 surrogate", '\\ud800x"}}}')),
            ('{"dump": {"common_dump_settings": {"dump_path": "abc}}}',
             bad % ("1:49", "string never closed (missing '\"')", '"abc}}}')),
            ('// only a comment\n{"dump": {}} x', bad % ("2:14", trailing, "x")),
            ('{"dump": {}}\n{"dump": {}}', bad % ("2:1", trailing, '{"dump": {}}')),
            ('{"dump": {\n  /* never closed\n}}',
             F + ':2:3: invalid JSON: comment "/*" is never closed'),
            ('{"dump": {"common_dump_settings": {',
             eof % "1:36" + " (the '{' at line 1, column 35 is never closed)"),
            ('{"dump": {"api_list": [\n', eof % "2:1" + " (the '[' at line 1, column 23 is never closed)"),
            ('{"dump"', eof % "1:8" + " (the '{' at line 1, column 1 is never closed)"),
            ("", F + ': empty file (expected a JSON object such as {"dump": {...}})'),
            ("  // nothing but a comment\n",
             F + ': empty file (expected a JSON object such as {"dump": {...}})'),
            ("[]", F + ': expected a JSON object {"dump": ..., "config_check": ...} at the top '
             "level, got an array"),
            ('"dump"', F + ': expected a JSON object {"dump": ..., "config_check": ...} at the '
             'top level, got "dump"'),
            ("[" * 1001 + "]" * 1001,
             bad % ("1:1001", "nested more than 1000 levels deep", "[" + "]" * 23)),
        ]
        for text, detail in cases:
            with self.subTest(text=text[:60]):
                self.assertRejects(text, detail)

    def test_nesting_up_to_1000_levels_parses(self):
        # reaches the type check, so the JSON itself was accepted
        self.assertRejects("[" * 1000 + "]" * 1000,
                           F + ': expected a JSON object {"dump": ..., "config_check": ...} at '
                           "the top level, got an array")

    def test_nul_byte_is_refused(self):
        self.assertRejects(b'{"dump":\n {}\x00}', F + ":2:4: invalid JSON: NUL byte (binary file?)")
        # cJSON would cut the string at the NUL: "a\u0000b" would silently become "a"
        self.assertRejects('{"dump": {"common_dump_settings": {\n "dump_path": "a\\u0000b"}}}',
                           F + ":2:17: \\u0000 (a NUL character) is not allowed in a string")
        self.assertLoads('{"dump": {"common_dump_settings": {"dump_path": "a\\\\u0000b"}}}',
                         has_dump="1", dump_path="a\\u0000b")  # an escaped backslash, then text

    def test_missing_file_is_not_found(self):
        rc, got = self.run_parsed(["nowhere.json"])
        self.assertEqual((rc, got["error"], got["detail"]),
                         (2, "NOT_FOUND", "config file nowhere.json not found"))

    def test_directory_is_an_io_error(self):
        os.mkdir(os.path.join(self.tmp.name, "d.json"))
        rc, got = self.run_parsed(["d.json"])
        self.assertEqual((rc, got["error"]), (2, "IO"))
        self.assertIn("d.json", got["detail"])

    def test_fifo_and_device_are_refused_without_blocking(self):
        # the loader the shim runs in every training process (issue 37): a
        # FIFO as msprobe.json blocked it forever
        fifo = os.path.join(self.tmp.name, "fifo.json")
        os.mkfifo(fifo)
        for path, kind in ((fifo, "a FIFO"), ("/dev/zero", "a device")):
            r = subprocess.run([PARSED, path], cwd=self.tmp.name, capture_output=True, text=True,
                               timeout=300)  # a hang guard: blocking stays forever
            got = dict(l.partition("=")[::2] for l in r.stdout.splitlines())
            self.assertEqual((r.returncode, got.get("error")), (2, "USAGE"), got)
            self.assertEqual(got["detail"].split(" (")[0], path + ": not a regular file")
            self.assertIn(kind, got["detail"])

    def test_file_over_16_mib_is_refused(self):
        text = '{"dump": {}}' + " " * (16 * 1024 * 1024)
        self.assertRejects(text, F + ": larger than 16 MiB; not a msprobe.json")

    def test_file_of_exactly_16_mib_is_read(self):
        body = '{"dump": {}}'
        self.assertLoads(body + " " * (16 * 1024 * 1024 - len(body)), has_dump="1")


# msprobe's own python/msprobe/config.json, as published (Ascend/msprobe).
MSPROBE_SAMPLE = """{
    "task": "statistics",
    "dump_path": "./dump_path",
    "rank": [],
    "step": [],
    "level": "L1",
    "extra_info": true,
    "async_dump": false,
    "statistics": {
        "scope": [],
        "list": [],
        "data_mode": ["all"],
        "summary_mode": "statistics"
    },
    "tensor": {
        "scope": [],
        "list": [],
        "data_mode": ["all"]
    },
    "acc_check": {
        "white_list": [],
        "black_list": [],
        "error_data_path": "./"
    }
}
"""


class AcceptsMsprobeConfigJson(ConfigCase):
    def test_published_sample_maps_and_reports_ignored_keys(self):
        got = self.assertLoads(MSPROBE_SAMPLE, source="config.json", has_dump="1",
                               dump_path="./dump_path", task="statistics")
        self.assertEqual(got["msprobe_format"], "1")
        self.assertEqual(got["rank"], "all")
        self.assertEqual(got["ignored"], "async_dump,acc_check,tensor")  # extra_info applies

    def assertLoads(self, text, **expected):
        rc, got = self.load(text, name="config.json")
        self.assertEqual(rc, 0, got.get("detail"))
        want = dict(DEFAULTS, source="config.json")
        want.update(expected)
        self.assertEqual({k: got[k] for k in want}, want)
        return got

    def test_levels_tasks_ranks_steps(self):
        for level, mode in (("L0", "module"), ("L1", "api"), ("mix", "mix")):
            self.assertLoads('{"task": "tensor", "level": "%s"}' % level, has_dump="1",
                             dump_mode=mode)
        got = self.assertLoads('{"task": "md5", "dump_path": "/x", "rank": [1, "0", "4-6"], '
                               '"step": [0, "2", "5-7"]}', has_dump="1", task="md5",
                               dump_path="/x", dump_iter="0|2|5-7")
        self.assertEqual(got["rank"], "1|0|4-6")
        self.assertLoads('{"task": "statistics", "statistics": {"summary_mode": "md5"}}',
                         has_dump="1", task="md5")
        # tensor + md5 keeps the data: the crc32 is stored anyway
        self.assertLoads('{"task": "tensor", "tensor": {"summary_mode": "md5"}}', has_dump="1")

    def test_extra_info_and_dump_enable(self):
        got = self.assertLoads('{"task": "tensor", "extra_info": false}', has_dump="1")
        self.assertEqual((got["stacks"], got["dump_disabled"]), ("0", "0"))
        self.assertEqual(got["dump_enable_set"], "0")
        # dump_enable false: the dump is set up, off until the file says true
        got = self.assertLoads('{"task": "tensor", "dump_enable": false}', has_dump="1")
        self.assertEqual((got["stacks"], got["dump_disabled"], got["dump_enable_set"]),
                         ("1", "1", "1"))
        got = self.assertLoads('{"task": "tensor", "dump_enable": true}', has_dump="1")
        self.assertEqual((got["dump_disabled"], got["dump_enable_set"]), ("0", "1"))

    def test_list_name_fragments(self):
        # msprobe's "list": ["relu"]: every API or module whose name holds it
        got = self.assertLoads('{"task": "tensor", "tensor": {"list": ["relu", '
                               '"Functional.gelu", "fc1.0"]}}', has_dump="1", api_list="3")
        self.assertEqual(got["api[0]"], "relu all")
        self.assertEqual(got["api_fragment[0]"], "1")
        self.assertEqual(got["api[1]"], "torch.nn.functional.gelu all")
        self.assertNotIn("api_fragment[1]", got)  # a full name: that API
        self.assertNotIn("api_fragment[2]", got)  # a dotted path: that module

    def test_scope_ranges(self):
        got = self.assertLoads('{"task": "tensor", "level": "L1", "tensor": {"scope": '
                               '["Functional.linear.0.forward", "Tensor.__matmul__.0.forward"]}}',
                               has_dump="1")
        self.assertEqual(got["scope"], "Functional.linear.0.forward,Tensor.__matmul__.0.forward")
        got = self.assertLoads('{"task": "statistics", "level": "L0", "statistics": {"scope": '
                               '["Module.emb.Embedding.forward.0", "Module.proj.Linear.forward.0"]}}',
                               has_dump="1", task="statistics", dump_mode="module")
        self.assertEqual(got["scope"], "Module.emb.Embedding.forward.0,"
                                       "Module.proj.Linear.forward.0")
        got = self.assertLoads('{"task": "tensor", "level": "mix", "tensor": {"scope": '
                               '["Module.norm.LayerNorm.forward.0", "Torch.matmul.0.forward"]}}',
                               has_dump="1", dump_mode="mix")
        self.assertEqual(got["scope"], "Module.norm.LayerNorm.forward.0,Torch.matmul.0.forward")
        got = self.assertLoads('{"task": "tensor", "tensor": {"scope": ['
                               '"Functional.relu.0.forward", "Functional.relu.0.backward"]}}',
                               has_dump="1")
        self.assertEqual(got["scope"], "Functional.relu.0.forward,Functional.relu.0.backward")
        # a list beside it filters the range (msprobe's RangeScope.check_api_list)
        got = self.assertLoads('{"task": "tensor", "tensor": {"scope": ['
                               '"Functional.relu.0.forward", "Functional.relu.1.forward"], '
                               '"list": ["relu"]}}', has_dump="1", api_list="1")
        self.assertEqual(got["api[0]"], "relu all")
        got = self.assertLoads('{"task": "tensor", "tensor": {"scope": []}}', has_dump="1")
        self.assertEqual(got["scope"], "")

    def test_tensor_list(self):
        got = self.assertLoads('{"task": "statistics", "statistics": {"tensor_list": '
                               '["Functional.linear", "Module.fc1"]}}', has_dump="1",
                               task="statistics")
        self.assertEqual(got["tensor_list"], "Functional.linear,Module.fc1")
        got = self.assertLoads('{"task": "statistics", "statistics": {"tensor_list": []}}',
                               has_dump="1", task="statistics")
        self.assertEqual(got["tensor_list"], "")

    def test_ignored_keys_in_order(self):
        # top-level keys as the file has them, then the task's section, then the
        # sections of other tasks (which are not read at all: "statistics": 5)
        got = self.assertLoads(
            '{"async_dump": false, "task": "tensor", "overflow_check": {"x": 1}, '
            '"tensor": {"device": "npu", "list": [], "overflow_nums": 2, "bench_path": "b"}, '
            '"statistics": 5, "precision": "high"}', has_dump="1", overflow_nums="1")
        self.assertEqual(got["ignored"], "async_dump,precision,tensor.device,"
                         "tensor.overflow_nums,tensor.bench_path,statistics,overflow_check")
        got = self.assertLoads('{"task": "overflow_check", "overflow_check": {"check_mode": "all"}, '
                               '"tensor": {}, "statistics": {}}', has_dump="1",
                               task="overflow_check")
        self.assertEqual(got["ignored"], "overflow_check.check_mode,statistics,tensor")

    def test_list_names_give_the_call_and_direction(self):
        got = self.assertLoads(
            '{"task": "tensor", "tensor": {"list": ["Functional.conv2d.0.forward", '
            '"Tensor.add.1.backward", "Torch.matmul.3", "Module.layer1.0.conv1.Conv2d.forward.2", '
            '"NPU.npu_rms_norm.0.forward", "Distributed.all_reduce", "torch.nn.functional.relu", '
            '"layer2.fc", "Module.fc.Linear.backward"]}}', has_dump="1", api_list="9")
        want = [("torch.nn.functional.conv2d forward", "0"), ("torch.Tensor.add backward", "1"),
                ("torch.matmul all", "3"), ("layer1.0.conv1 forward", "2"),
                ("torch_npu.npu_rms_norm forward", "0"), ("torch.distributed.all_reduce all", None),
                ("torch.nn.functional.relu all", None), ("layer2.fc all", None),
                ("fc backward", None)]
        for i, (api, call) in enumerate(want):
            self.assertEqual((got[f"api[{i}]"], got.get(f"api_call[{i}]")), (api, call), i)
        self.assertEqual(got["api_key[0]"], 'tensor.list[0] "Functional.conv2d.0.forward"')
        self.assertEqual(got["api_key[8]"], 'tensor.list[8] "Module.fc.Linear.backward"')

    def test_list_and_data_mode(self):
        got = self.assertLoads(
            '{"task": "tensor", "tensor": {"list": ["Functional.conv2d.0.forward", '
            '"Tensor.add.1.backward", "Torch.matmul", '
            '"Module.layer1.0.conv1.Conv2d.forward.0"], "data_mode": ["backward", "input"]}}',
            has_dump="1", api_list="4")
        self.assertEqual(got["api[0]"], "torch.nn.functional.conv2d forward")
        self.assertEqual(got["api[1]"], "torch.Tensor.add backward")
        self.assertEqual(got["api[2]"], "torch.matmul all")
        self.assertEqual(got["api[3]"], "layer1.0.conv1 forward")
        self.assertEqual(got["dump_dirs"], "backward")
        self.assertEqual(got["dump_roles"], "input")

    def test_own_format_takes_rank_and_md5(self):
        got = self.assertLoads('{"dump": {"common_dump_settings": {"rank": "0|2", "task": "md5"}}}',
                               has_dump="1", task="md5")
        self.assertEqual(got["rank"], "0|2")
        self.assertEqual(got["msprobe_format"], "0")

    def test_strict_on_everything_else(self):
        cases = (
            ('{"task": "tensor", "dump_paht": "x"}', 'config.json: dump_paht: unknown key '
             "(msprobe's config.json keys are task, dump_path, rank, step, level, statistics, "
             "tensor, ...; ours are dump and config_check)"),
            ('{"task": "free_benchmark"}',
             'config.json: task: expected "tensor", "statistics", "md5" or "overflow_check", '
             'got "free_benchmark"'),
            ('{"task": "overflow_check", "overflow_check": {"overflow_num": 2}}',
             'config.json: overflow_check.overflow_num: unknown key (expected overflow_nums or '
             'check_mode)'),
            ('{"task": "overflow_check", "overflow_check": {"overflow_nums": 0}}',
             'config.json: overflow_check.overflow_nums: expected a number of overflows >= 1, or '
             '-1 for no limit, got number 0'),
            ('{"task": "tensor", "level": "L2"}',
             'config.json: level: expected "L1", "L0" or "mix", got "L2"'),
            ('{"task": "tensor", "rank": "0"}', 'config.json: rank: expected a list of numbers '
             '>= 0, numeric strings or ranges like [0, "2", "4-6"] ([] = all), got "0"'),
            # scope: two names, of the level's kind, forward ones, and no list beside
            ('{"task": "tensor", "tensor": {"scope": ["Functional.relu.0.forward"]}}',
             'config.json: tensor.scope: expected two record names, the first and the last of '
             'the range dumped, e.g. ["Module.conv1.Conv2d.forward.0", '
             '"Module.fc2.Linear.forward.0"], got 1'),
            ('{"task": "tensor", "tensor": {"scope": ["Module.a.A.forward.0", "Module.b.B.forward.0"]}}',
             'config.json: tensor.scope[0]: expected an API record name like '
             '"Functional.conv2d.0.forward" (level L1), got "Module.a.A.forward.0"'),
            ('{"task": "tensor", "level": "L0", "tensor": {"scope": ["Module.a.A.forward.0", '
             '"Functional.relu.0.forward"]}}',
             'config.json: tensor.scope[1]: expected a module record name like '
             '"Module.fc.Linear.forward.0" (level L0), got "Functional.relu.0.forward"'),
            ('{"task": "tensor", "tensor": {"scope": ["Functional.relu.1234567890123456x.forward", '
             '"Functional.relu.1.forward"]}}',
             'config.json: tensor.scope[0]: expected an API record name like '
             '"Functional.conv2d.0.forward" (level L1), got '
             '"Functional.relu.1234567890123456x.forward"'),
            ('{"task": "tensor", "level": "mix", "tensor": {"scope": ["Module.a.A.forward.0", '
             '"relu"]}}',
             'config.json: tensor.scope[1]: expected an API or module record name like '
             '"Functional.conv2d.0.forward" or "Module.fc.Linear.forward.0" (level mix), '
             'got "relu"'),
            ('{"task": "tensor", "tensor": {"data_mode": ["sideways"]}}',
             'config.json: tensor.data_mode[0]: expected "all", "forward", "backward", "input" '
             'or "output", got "sideways"'),
            ('{"task": "statistics", "statistics": {"summary_mode": "xor"}}',
             'config.json: statistics.summary_mode: expected "statistics" or "md5", got "xor"'),
            ('{"task": "tensor", "tensor": {"lists": []}}',
             'config.json: tensor.lists: unknown key (expected scope, list, data_mode, '
             'summary_mode, tensor_list, or one msprobe documents)'),
            ('{"task": "tensor", "task": "tensor"}',
             "config.json: task: duplicate key (each key may appear once)"),
            ('{"task": "tensor", "tensor": {"list": [], "list": []}}',
             "config.json: tensor.list: duplicate key (each key may appear once)"),
            ('{"task": "tensor", "extra_info": 1}',
             "config.json: extra_info: expected true or false, got number 1"),
            ('{"task": "tensor", "dump_enable": "no"}',
             'config.json: dump_enable: expected true or false, got "no"'),
            ('{"task": "tensor", "tensor": {"data_mode": ["all", "input"]}}',
             'config.json: tensor.data_mode: "all" cannot be combined with other modes'),
            ('{"task": "tensor", "tensor": {"data_mode": "all"}}',
             'config.json: tensor.data_mode: expected a list of strings, got "all"'),
            ('{"task": "tensor", "tensor": {"list": ["Module."]}}',
             'config.json: tensor.list[0]: expected an API or module name like '
             '"Functional.conv2d.0.forward" (an empty name between dots selects nothing), '
             'got "Module."'),
            ('{"task": "tensor", "tensor": {"list": ["Torch.matmul", 3]}}',
             "config.json: tensor.list[1]: expected a string, got number 3"),
            ('{"task": "statistics", "statistics": {"tensor_list": ["Functional.linear", ""]}}',
             'config.json: statistics.tensor_list[1]: expected an API or module name, got ""'),
            ('{"task": "tensor", "rank": [0, -1]}',
             "config.json: rank[1]: expected a number >= 0, got number -1"),
            ('{"task": "tensor", "step": ["1|2"]}',
             'config.json: step[0]: expected a number or a range like "4-6", got "1|2"'),
            ('{"task": "tensor", "dump_path": ""}',
             'config.json: dump_path: expected a non-empty directory path, got ""'),
            ('{"task": "tensor", "tensor": []}',
             "config.json: tensor: expected an object { ... }, got an array"),
            # a file with one of our sections is ours, whatever else it has
            ('{"task": "tensor", "dump": {}}',
             "config.json: task: unknown key (expected dump or config_check)"),
        )
        for text, detail in cases:
            with self.subTest(text=text):
                self.assertRejects(text, detail, name="config.json")


class StepSetParser(ConfigCase):
    def test_direct_parse(self):
        rc, got = self.run_parsed(["-s", "3-5|1", "0", "1", "2", "5", "6"])
        self.assertEqual(rc, 0)
        self.assertEqual(got["steps"], "3-5|1")
        self.assertEqual([got[f"contains[{s}]"] for s in (0, 1, 2, 5, 6)],
                         ["0", "1", "0", "1", "0"])
        rc, got = self.run_parsed(["-s", " all "])
        self.assertEqual((rc, got["steps"]), (0, "all"))
        rc, got = self.run_parsed(["-s", "1-"])
        self.assertEqual((rc, got["error"]), (2, "CONFIG"))
        self.assertEqual(got["detail"], ITER_HINT + ', got "1-" (a range needs an end step, '
                         'as in "5-8")')


if __name__ == "__main__":
    unittest.main()
