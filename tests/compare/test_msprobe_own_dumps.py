"""Dumps written by Huawei's Python msprobe itself (fixtures/msprobe: 26's
stepN/proc<PID>/ and 8.3.3's stepN/rank/ of one seeded run) are found by
ls and compare, as roots, step dirs or rank dirs; and the same run dumped by
our shim compares clean against either, in both directions: the backward
records pair msprobe's autograd-order outputs with ours, the values equal
to the bit. A rank dir holding only a killed run's .part file is ignored."""
import csv
import glob
import json
import os
import shutil
import tempfile
import unittest

from msp_msprobe import FIX, MODEL, PRELOAD, dump_json, dump_seeded, msprobe
LOSS = "1.13963532"  # what msprobe's runs printed (fixtures/msprobe/README.md)


def csv_rows(out):
    with open(os.path.join(out, "result.csv"), newline="") as f:
        return list(csv.DictReader(f))


class SingleProcessRoots(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_ls_lists_msprobe_single_process_roots_and_step_dirs(self):
        for v, sub in (("v26", "proc"), ("v833", "rank")):
            root = os.path.join(FIX, v)
            path, js = dump_json(root)
            self.assertTrue(os.path.basename(os.path.dirname(path)).startswith(sub))
            for given in (root, os.path.join(root, "step0"), os.path.dirname(path)):
                with self.subTest(path=given):
                    p = msprobe("ls", given)
                    self.assertEqual((p.returncode, p.stderr), (0, ""))
                    head = p.stdout.splitlines()[0]
                    self.assertTrue(head.startswith("step 0 rank 0: "), head)
                    self.assertIn(path if given != root else os.path.relpath(path, root), head)
                    listed = [l.split()[0] for l in p.stdout.splitlines()
                              if l.startswith("  ") and not l.startswith("    ")]
                    self.assertEqual(listed, list(js["data"]))

    def test_compare_pairs_msprobe_roots_and_step_dirs(self):
        a, b = os.path.join(FIX, "v26"), os.path.join(FIX, "v833")
        for bench, cmp in ((a, b), (os.path.join(a, "step0"), os.path.join(b, "step0"))):
            with self.subTest(bench=bench):
                out = os.path.join(self.d, "o")
                p = msprobe("compare", "-b", bench, "-c", cmp, "-o", out, "--csv")
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertTrue(p.stdout.startswith("pairs 1, "), p.stdout)
                # every record of either dump has its rows; 8.3.3 also wraps
                # torch.ones_like and Tensor.transpose, 26 does not: N/A rows
                names = {r["NPU Name"].rsplit(".", 2)[0] for r in csv_rows(out)} | \
                        {r["Bench Name"].rsplit(".", 2)[0] for r in csv_rows(out)}
                want = set(dump_json(a)[1]["data"]) | set(dump_json(b)[1]["data"])
                self.assertEqual(names - {"N/A"}, want)
                only = set(dump_json(b)[1]["data"]) - set(dump_json(a)[1]["data"])
                self.assertEqual(only, {"Torch.ones_like.0.forward", "Tensor.transpose.0.forward",
                                        "Tensor.transpose.0.backward"})
                for r in csv_rows(out):
                    if r["NPU Name"].rsplit(".", 2)[0] in only:
                        self.assertEqual((r["Bench Name"], r["Accuracy Reached or Not"]),
                                         ("N/A", "N/A"))

    def test_rank_dir_holding_only_a_part_file_is_ignored(self):
        root = os.path.join(self.d, "dump")
        os.makedirs(os.path.join(root, "step0", "rank0"))
        with open(os.path.join(root, "step0", "rank0", ".dump.h5.4242.part"), "wb") as f:
            f.write(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
        for given in (root, os.path.join(root, "step0")):
            p = msprobe("ls", given)
            self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "", ""), given)
        # beside a finished rank, it changes nothing
        shutil.copytree(os.path.join(FIX, "v833", "step0", "rank"),
                        os.path.join(root, "step0", "rank1"))
        p = msprobe("ls", os.path.join(root, "step0"))
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertTrue(p.stdout.startswith("step 0 rank 1: "), p.stdout[:200])


class FuzzyCallIndexShift(unittest.TestCase):
    """msprobe 8.3.3 dumped the run twice, once with one more F.relu call
    first: every later relu is one index up. --fuzzy (and msprobe's -f/-fm)
    pairs them all by order, name without index and shape."""

    def test_fuzzy_pairs_across_a_call_index_shift(self):
        bench, cmp = os.path.join(FIX, "v833"), os.path.join(FIX, "v833_extra_relu")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "o")
            p = msprobe("compare", "-b", bench, "-c", cmp, "-o", out, "--csv")
            self.assertEqual(p.returncode, 1)  # by name: relu.0 is not relu.0
            for flag in ("--fuzzy", "-f", "-fm"):
                with self.subTest(flag=flag):
                    p = msprobe("compare", "-b", bench, "-c", cmp, "-o", out, "--csv", flag)
                    self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                    got = csv_rows(out)
                    pairs = {r["NPU Name"]: r["Bench Name"] for r in got}
                    self.assertEqual(pairs["Functional.relu.1.forward.input.0"],
                                     "Functional.relu.0.forward.input.0")
                    self.assertEqual(pairs["Functional.relu.1.backward.output.0"],
                                     "Functional.relu.0.backward.output.0")
                    # the extra call is the one record without a partner
                    alone = {r["NPU Name"].rsplit(".", 2)[0] for r in got
                             if r["Bench Name"] == "N/A"}
                    self.assertEqual(alone, {"Functional.relu.0.forward"})
                    self.assertFalse([r for r in got if r["NPU Name"] == "N/A"])
                    for r in got:
                        if r["Bench Name"] != "N/A":
                            self.assertEqual(r["MaxAbsErr"], "0", r["NPU Name"])


class OneBadTensorFile(unittest.TestCase):
    """A missing .pt and a truncated .pt in msprobe's dump: each is its own
    row's error; every other row is compared as usual (real data)."""

    def test_missing_and_truncated_pt_are_one_row_each(self):
        with tempfile.TemporaryDirectory() as d:
            good = os.path.dirname(dump_json(os.path.join(FIX, "v26"))[0])
            bad = os.path.join(d, "bad")
            shutil.copytree(good, bad)
            data = os.path.join(bad, "dump_tensor_data")
            missing = os.path.join(data, "Functional.relu.0.forward.input.0.pt")
            cut = os.path.join(data, "Functional.gelu.0.forward.output.0.pt")
            os.remove(missing)
            with open(cut, "rb") as f:
                head = f.read(300)
            with open(cut, "wb") as f:
                f.write(head)
            out = os.path.join(d, "o")
            p = msprobe("compare", "-b", good, "-c", bad, "-o", out, "--csv")
            # exit 3: the report is written, but two tensors could not be read
            self.assertEqual(p.returncode, 3, p.stderr)
            self.assertIn("failing records 2", p.stdout)
            self.assertIn("not read: 2 tensors could not be read", p.stdout)
            got = csv_rows(out)
            self.assertIn("Cosine", got[0])  # a tensor compare, not statistics
            with open(os.path.join(good, "dump.json")) as f:
                n_tensors = sum(1 for r in json.load(f)["data"].values()
                                for k in ("input_args", "input_kwargs", "input", "output")
                                for x in (r.get(k) or []) if isinstance(x, dict) and "dtype" in x)
            self.assertEqual(len(got), n_tensors)
            bad_rows = {r["NPU Name"]: r for r in got if r["Accuracy Reached or Not"] != "Yes"}
            self.assertEqual(set(bad_rows), {"Functional.relu.0.forward.input.0",
                                             "Functional.gelu.0.forward.output.0"})
            for name, path in (("Functional.relu.0.forward.input.0", missing),
                               ("Functional.gelu.0.forward.output.0", cut)):
                r = bad_rows[name]
                self.assertTrue(r["Err_message"].startswith("tensor data cannot be read: file " +
                                                            path), r["Err_message"])
                self.assertEqual((r["Cosine"], r["MaxAbsErr"]), ("N/A", "N/A"))
            for r in got:
                if r["NPU Name"] not in bad_rows and r["Cosine"] != "N/A":
                    self.assertEqual(r["MaxAbsErr"], "0", r["NPU Name"])


@unittest.skipUnless(PRELOAD and os.path.exists(PRELOAD), "MSPROBE_PRELOAD_LIB not set (ctest)")
class MixedDumpsOfOneRun(unittest.TestCase):
    """Our shim dumps the run msprobe dumped; the two dumps agree."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.ours, p = dump_seeded(cls.tmp.name, "ours", {  # msprobe's own config.json
            "task": "tensor", "rank": [], "step": [0], "level": "L1",
            "tensor": {"scope": [], "list": [], "data_mode": ["all"]}})
        cls.loss = p.stdout.split()[-1]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    # 8.3.3 wraps torch.ones_like (called inside loss.backward()), 26 does not
    NOT_WRAPPED_BY_ALL = ("Torch.ones_like.",)

    @staticmethod
    def in_optimizer_step(data):
        """msprobe's records of the calls optimizer.step() made (SGD's add_):
        those after the run's last backward record. Ours keeps the step as one
        record, Optimizer.SGD.0.step (msprobe-dump(5))."""
        names = list(data)
        last_bwd = max(i for i, n in enumerate(names) if n.endswith(".backward"))
        return set(names[last_bwd + 1:])

    def test_losses_equal_msprobe_runs(self):
        self.assertEqual(self.loss, LOSS)

    def test_identical_run_compares_clean_both_ways(self):
        for v in ("v26", "v833"):
            theirs = os.path.join(FIX, v)
            for bench, cmp in ((theirs, self.ours), (self.ours, theirs)):
                with self.subTest(bench=bench, cmp=cmp):
                    out = os.path.join(self.tmp.name, "o")
                    p = msprobe("compare", "-b", bench, "-c", cmp, "-o", out, "--csv")
                    self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                    self.assertIn("failing records 0", p.stdout)
                    self.assertIn("no introduced error found", p.stdout)
                    paired = [r for r in csv_rows(out)
                              if r["NPU Name"] != "N/A" and r["Bench Name"] != "N/A"]
                    for r in paired:  # one run: every shared tensor equal to the bit
                        self.assertEqual(r["MaxAbsErr"], "0", r["NPU Name"])
                    # every record of msprobe's pairs with ours, but for the APIs
                    # one msprobe version wraps and the other does not
                    paired_recs = {r["Bench Name"].rsplit(".", 2)[0] for r in paired} | \
                                  {r["NPU Name"].rsplit(".", 2)[0] for r in paired}
                    data = dump_json(theirs)[1]["data"]
                    step_calls = self.in_optimizer_step(data)
                    self.assertTrue(step_calls and all(k.startswith("Tensor.add_.")
                                                       for k in step_calls), step_calls)
                    theirs_recs = set(data) - step_calls
                    self.assertEqual({k for k in theirs_recs - paired_recs
                                      if not k.startswith(self.NOT_WRAPPED_BY_ALL)}, set())

    def test_export_writes_what_msprobe_wrote(self):
        """msprobe export rewrites our dump in msprobe's layout: every record
        msprobe 26 wrote of this run is there with the same structure, dtypes,
        shapes and (torch.load'ed) values, backward outputs in autograd order."""
        import torch
        out = os.path.join(self.tmp.name, "exported")
        p = msprobe("export", "-o", out, self.ours)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertEqual(p.stdout, "exported 1 dump to %s\n" % out)
        mine_path = os.path.join(out, "step0", "rank0", "dump.json")
        with open(mine_path) as f:
            mine = json.load(f)
        theirs_path, theirs = dump_json(os.path.join(FIX, "v26"))
        self.assertEqual((mine["task"], mine["level"], mine["framework"]), ("tensor", "L1", "pytorch"))
        checked = 0

        def walk(a, b, where):
            nonlocal checked
            if isinstance(a, list):
                self.assertIsInstance(b, list, where)
                self.assertEqual(len(a), len(b), where)
                for i, (x, y) in enumerate(zip(a, b)):
                    walk(x, y, "%s[%d]" % (where, i))
            elif isinstance(a, dict) and a.get("type") == "torch.Tensor":
                self.assertEqual((b["dtype"], b["shape"]), (a["dtype"], a["shape"]), where)
                ta = torch.load(os.path.join(os.path.dirname(theirs_path), "dump_tensor_data",
                                             a["data_name"]))
                tb = torch.load(os.path.join(out, "step0", "rank0", "dump_tensor_data",
                                             b["data_name"]))
                self.assertTrue(torch.equal(ta, tb), where)
                checked += 1
            elif isinstance(a, dict) and "type" not in a:  # kwargs
                self.assertEqual(sorted(a), sorted(b), where)
                for k in a:
                    walk(a[k], b[k], where + "." + k)
            elif a is None:
                self.assertIsNone(b, where)

        # the optimizer step, one record of ours, has no place in msprobe's layout
        self.assertNotIn("Optimizer.SGD.0.step", mine["data"])
        step_calls = self.in_optimizer_step(theirs["data"])
        for name, rec in theirs["data"].items():
            if name in step_calls:
                continue
            self.assertIn(name, mine["data"])
            self.assertEqual(sorted(rec), sorted(mine["data"][name]), name)
            for key in rec:
                walk(rec[key], mine["data"][name][key], name + "." + key)
        self.assertGreater(checked, 50)
        # and compare reads it back as it reads msprobe's: clean against both
        for other in (os.path.join(FIX, "v26"), self.ours):
            p = msprobe("compare", "-b", other, "-c", out, "-o", os.path.join(self.tmp.name, "x"))
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        p = msprobe("export", "-o", os.path.join(self.tmp.name, "again"), out)
        self.assertEqual(p.returncode, 2)
        self.assertIn("is msprobe's own layout already", p.stderr)

    def test_our_call_sites_fill_npu_stack_info(self):
        out = os.path.join(self.tmp.name, "os")
        p = msprobe("compare", "-b", os.path.join(FIX, "v26"), "-c", self.ours, "-o", out, "--csv")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        rows = csv_rows(out)
        with open(MODEL) as f:
            src = f.read().split("\n")
        n = 1 + next(i for i, l in enumerate(src) if "F.gelu(self.proj(h))" in l)
        first = {}
        for r in rows:
            first.setdefault(r["NPU Name"].rsplit(".", 2)[0], r)
        want = "File %s, line %d, in forward\n    %s" % (os.path.realpath(MODEL), n,
                                                        src[n - 1].strip())
        for rec in ("Functional.linear.0.forward", "Functional.gelu.0.forward",
                    "Functional.linear.0.backward"):  # one call site, one line of code
            self.assertTrue(first[rec]["NPU_Stack_Info"].startswith(want),
                            (rec, first[rec]["NPU_Stack_Info"]))

    def test_backward_outputs_pair_in_msprobe_autograd_order(self):
        """msprobe's linear backward holds (bias, input, weight.t()) grads and
        cross_entropy's the grad of its inner log_softmax; ours the grads of
        the arguments. Each pairs with the tensor it equals."""
        import h5py
        from msp_h5dump import record_attrs
        import numpy as np
        import torch
        (h5,) = glob.glob(os.path.join(self.ours, "step0", "rank0", "dump.h5"))
        with h5py.File(h5, "r") as f:
            ce_f, ce_b = f["Functional.cross_entropy.0.forward"], f["Functional.cross_entropy.0.backward"]
            logits = torch.from_numpy(ce_f["input.0"][()])
            target = torch.from_numpy(ce_f["input.1"][()])
            n = logits.shape[0]
            onehot = torch.nn.functional.one_hot(target, logits.shape[1]).float()
            # ours: d loss / d logits; msprobe's: d loss / d log_softmax(logits)
            self.assertTrue(np.allclose(ce_b["output.0"][()],
                                        ((logits.softmax(1) - onehot) / n).numpy(), atol=1e-7))
            self.assertTrue(np.array_equal(ce_b["grad_fn.0"][()], (-onehot / n).numpy()))
            lin = f["Functional.linear.1.backward"]
            ra = record_attrs(f)
            self.assertEqual(ra["Functional.linear.1.backward"]["grad_fn_outputs"],
                             "output.2,output.0,grad_fn.2")
            self.assertTrue(np.array_equal(lin["grad_fn.2"][()], lin["output.1"][()].T))
            emb = f["Functional.embedding.0.backward"]
            self.assertEqual(ra["Functional.embedding.0.backward"]["grad_fn_outputs"], "output.1")
        out = os.path.join(self.tmp.name, "ob")
        p = msprobe("compare", "-b", os.path.join(FIX, "v26"), "-c", self.ours, "-o", out, "--csv")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        pairs = {r["Bench Name"]: r["NPU Name"] for r in csv_rows(out)}
        want = {"Functional.cross_entropy.0.backward.output.0": "grad_fn.0",
                "Functional.linear.1.backward.output.0": "output.2",
                "Functional.linear.1.backward.output.1": "output.0",
                "Functional.linear.1.backward.output.2": "grad_fn.2",
                "Functional.layer_norm.0.backward.output.1": "output.2",
                "Functional.embedding.0.backward.output.0": "output.1"}
        for bench, role in want.items():
            self.assertEqual(pairs[bench], bench.rsplit(".", 2)[0] + "." + role)
        # ours against ours: the grad_fn.* copies are not compared
        p = msprobe("compare", "-b", self.ours, "-c", self.ours, "-o", out, "--csv")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertFalse([r for r in csv_rows(out) if ".grad_fn." in r["NPU Name"]])


if __name__ == "__main__":
    unittest.main()
