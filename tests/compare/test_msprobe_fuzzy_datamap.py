"""-fm and -dm against dumps msprobe 26 and 8.3.3 wrote themselves
(fixtures/msprobe, README.md there). Fuzzy matching pairs every backward
record with the backward of its forward's partner (msprobe lists a linear's
grads in autograd order, ours by argument, so their shapes differ role by
role), and a module forward whose parameters one side left out; a record
left unpaired while the other side holds an unpaired one of the same API is
a failure, not a silent N/A. data_mapping.yaml pairs the tensors it names
and nothing else (msprobe's left join of mapped compare tensor names on
bench tensor names), not whole records."""
import csv
import json
import os
import shutil
import tempfile
import unittest

from msp_msprobe import FIX, PRELOAD, dump_json, dump_seeded, msprobe


def compare(bench, cmp, out, *extra):
    p = msprobe("compare", "-b", bench, "-c", cmp, "-o", out, "--csv", *extra)
    with open(os.path.join(out, "result.csv"), newline="") as f:
        return p, list(csv.DictReader(f))


def rec_of(tensor_name):
    return tensor_name.rsplit(".", 2)[0]


def failing(rows):
    return [r for r in rows if r["Accuracy Reached or Not"] in ("No", "Warning")]


def edit_copy(src, dst, edit):
    """dst: a copy of msprobe dump src whose dump.json data went through edit."""
    shutil.copytree(src, dst)
    path, js = dump_json(dst)
    edit(js["data"])
    with open(path, "w") as f:
        json.dump(js, f)
    return dst


class FuzzyAgainstMsprobe(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_module_forwards_pair_when_one_side_left_out_parameters(self):
        def strip(data):
            for k, v in data.items():
                if k.startswith("Module.") and ".forward." in k:
                    v.pop("parameters", None)
        bench = os.path.join(FIX, "v833_mix_stats")
        cmp = edit_copy(os.path.join(FIX, "v26_mix_stats"), os.path.join(self.d, "np"), strip)
        mods = [k for k in dump_json(cmp)[1]["data"] if k.startswith("Module.") and ".forward." in k]
        self.assertEqual(len(mods), 4)
        p, rows = compare(bench, cmp, os.path.join(self.d, "o"), "-fm")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("failing records 0", p.stdout)
        pairs = {rec_of(r["NPU Name"]): rec_of(r["Bench Name"]) for r in rows
                 if r["NPU Name"] != "N/A" and r["Bench Name"] != "N/A"}
        for m in mods:  # the run is one: each pairs with its namesake
            self.assertEqual(pairs.get(m), m)

    def test_an_unpaired_record_beside_an_unpaired_twin_fails(self):
        """8.3.3's relu call given another shape: -fm cannot pair it with
        26's, and neither side's relu forward is a quiet N/A."""
        def reshape(data):
            rec = data["Functional.relu.0.forward"]
            for t in rec["input_args"] + rec["output"]:
                t["shape"] = [4, 9]
        bench = os.path.join(FIX, "v26_mix_stats")
        cmp = edit_copy(os.path.join(FIX, "v833_mix_stats"), os.path.join(self.d, "rs"), reshape)
        p, rows = compare(bench, cmp, os.path.join(self.d, "o"), "-fm")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("failing records 2", p.stdout)
        bad = failing(rows)
        self.assertEqual({rec_of(r["NPU Name"]) for r in bad} - {"N/A"},
                         {"Functional.relu.0.forward"})
        self.assertEqual({rec_of(r["Bench Name"]) for r in bad} - {"N/A"},
                         {"Functional.relu.0.forward"})
        for r in bad:
            self.assertIn("holds an unpaired record of this API", r["Err_message"])
        # the backward still pairs: its shapes were not touched
        pairs = {r["NPU Name"]: r["Bench Name"] for r in rows}
        self.assertEqual(pairs["Functional.relu.0.backward.input.0"],
                         "Functional.relu.0.backward.input.0")
        # one side only (8.3.3 wraps torch.ones_like, 26 does not) stays N/A
        ones = [r for r in rows if r["NPU Name"].startswith("Torch.ones_like.0.forward")]
        self.assertTrue(ones)
        self.assertEqual({r["Accuracy Reached or Not"] for r in ones}, {"N/A"})


@unittest.skipUnless(PRELOAD and os.path.exists(PRELOAD), "MSPROBE_PRELOAD_LIB not set (ctest)")
class FuzzyOursAgainstMsprobe(unittest.TestCase):
    """Our L1 dump of the run msprobe dumped: -fm pairs what exact names
    pair, backward records included."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.ours, _ = dump_seeded(cls.tmp.name, "ours", {
            "task": "tensor", "rank": [], "step": [0], "level": "L1",
            "tensor": {"scope": [], "list": [], "data_mode": ["all"]}})

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_fuzzy_pairs_backward_records_with_msprobe(self):
        for v in ("v26", "v833"):
            theirs = os.path.join(FIX, v)
            backward = [k for k in dump_json(theirs)[1]["data"] if k.endswith(".backward")]
            self.assertTrue({"Functional.linear.0.backward", "Functional.linear.1.backward",
                             "Functional.cross_entropy.0.backward"} <= set(backward))
            for bench, cmp in ((theirs, self.ours), (self.ours, theirs)):
                with self.subTest(bench=bench, cmp=cmp):
                    p, rows = compare(bench, cmp, os.path.join(self.tmp.name, "o"), "-fm")
                    self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                    self.assertIn("failing records 0", p.stdout)
                    side = "Bench Name" if bench == theirs else "NPU Name"
                    other = "NPU Name" if side == "Bench Name" else "Bench Name"
                    partner = {}
                    for r in rows:
                        if r[side] != "N/A" and r[other] != "N/A":
                            partner[rec_of(r[side])] = rec_of(r[other])
                            self.assertEqual(r["MaxAbsErr"], "0", r[side])
                    for rec in backward:
                        if rec.startswith("Tensor.transpose."):
                            continue  # 8.3.3 wraps it, we do not
                        self.assertEqual(partner.get(rec), rec)


class DataMappingAgainstMsprobe(unittest.TestCase):
    """26 against 8.3.3, one run: two lines send a compare tensor to the bench
    tensor that holds the same values under another name."""

    LINES = {"Functional.linear.1.forward.input.0": "Functional.relu.0.forward.output.0",
             "Functional.gelu.0.forward.input.0": "Functional.linear.0.forward.output.0"}

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, lines):
        ym = os.path.join(self.d, "data_mapping.yaml")
        with open(ym, "w") as f:
            f.write("".join("%s: %s\n" % kv for kv in lines.items()))
        return ym

    @staticmethod
    def pt(root, name):
        import torch
        path, _ = dump_json(root)
        return torch.load(os.path.join(os.path.dirname(path), "dump_tensor_data", name + ".pt"))

    def test_named_tensors_pair_and_the_rest_by_their_own_names(self):
        import torch
        bench, cmp = os.path.join(FIX, "v26"), os.path.join(FIX, "v833")
        for npu, b in self.LINES.items():  # the same values, as the lines claim
            self.assertTrue(torch.equal(self.pt(cmp, npu), self.pt(bench, b)))
        p, rows = compare(bench, cmp, os.path.join(self.d, "o"), "-dm", self.write(self.LINES))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("failing records 0", p.stdout)
        for r in rows:  # msprobe's key: the line's bench name, else the NPU name
            if r["NPU Name"] != "N/A" and r["Bench Name"] != "N/A":
                self.assertEqual(r["Bench Name"], self.LINES.get(r["NPU Name"], r["NPU Name"]))
                self.assertEqual(r["MaxAbsErr"], "0", r["NPU Name"])
        npu_names = {r["NPU Name"] for r in rows}
        self.assertTrue(set(self.LINES) <= npu_names)
        # the bench tensors whose namesakes the lines sent elsewhere: no row
        bench_names = [r["Bench Name"] for r in rows]
        for gone in self.LINES:
            self.assertNotIn(gone, bench_names)
        # a bench tensor a line targets still pairs with its own namesake too
        self.assertEqual(bench_names.count("Functional.relu.0.forward.output.0"), 2)

    def test_a_line_to_other_values_fails_that_tensor_alone(self):
        bench, cmp = os.path.join(FIX, "v26"), os.path.join(FIX, "v833")
        npu, b = "Functional.linear.1.forward.input.0", "Functional.relu.0.forward.input.0"
        want = float((self.pt(cmp, npu).double() - self.pt(bench, b).double()).abs().max())
        self.assertGreater(want, 0.01)  # relu(h) against h: h has negatives
        p, rows = compare(bench, cmp, os.path.join(self.d, "o"), "-dm", self.write({npu: b}))
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("failing records 1", p.stdout)
        bad = failing(rows)
        self.assertEqual([(r["NPU Name"], r["Bench Name"]) for r in bad], [(npu, b)])
        self.assertAlmostEqual(float(bad[0]["MaxAbsErr"]), want, places=6)
        for r in rows:  # linear.1's other tensors pair by name, clean
            if rec_of(r["NPU Name"]) == "Functional.linear.1.forward" and r["NPU Name"] != npu:
                self.assertEqual((r["Bench Name"], r["Accuracy Reached or Not"]),
                                 (r["NPU Name"], "Yes"))


if __name__ == "__main__":
    unittest.main()
