"""msprobe's own dump directories (stepN/rankN/dump.json with .pt or .npy
tensor files, written here with torch.save / numpy.save following msprobe's
published layout) are compared like our HDF5 dumps: msprobe vs msprobe, msprobe
vs ours (mixed) and ours vs ours give the same rows and metrics, which equal
numpy's. Statistics-only and md5 dumps compare on what they hold; a .pt that
is not a plain tensor is refused naming the file."""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmp_h5 as H  # noqa: E402
import msprobe_layout as ML  # noqa: E402

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
METRICS = ("cosine", "euc_dist", "max_abs_err", "max_rel_err", "one_thousandth_ratio",
           "five_thousandths_ratio")


def bf16_bits(t):
    return t.view(torch.int16).numpy().view(np.uint16)


@unittest.skipIf(torch is None, "needs torch (MSPROBE_PYTHON)")
class MsprobeDirs(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        g = torch.Generator().manual_seed(7)
        a = torch.randn(4, 6, generator=g)
        w = torch.randn(3, 6, generator=g)
        out = torch.nn.functional.linear(a, w)
        # the compare side: the same inputs, a bf16-rounded output, a
        # transposed (non-contiguous) tensor as saved by torch.save
        out_c = out.to(torch.bfloat16).to(torch.float32)
        wt = torch.randn(6, 5, generator=g).t()
        w_rg = w.clone().requires_grad_(True)  # a parameter on the bench side only
        self.bench = [("Functional.linear.0.forward",
                       {"input_args": [a, w_rg, None], "input_kwargs": {}, "output": [out]}),
                      ("Torch.mul.0.forward", {"input_args": [wt, 3], "output": [wt * 3]}),
                      ("Tensor.to.0.forward", {"input_args": [out], "output": [out.to(torch.bfloat16)]})]
        self.cmp = [("Functional.linear.0.forward",
                     {"input_args": [a, w, None], "input_kwargs": {}, "output": [out_c]}),
                    ("Torch.mul.0.forward", {"input_args": [wt, 3], "output": [wt * 3 + 1e-3]}),
                    ("Tensor.to.0.forward", {"input_args": [out_c], "output": [out_c.to(torch.bfloat16)]})]

    def tearDown(self):
        self.tmp.cleanup()

    def ours(self, path, records):
        """The same tensors in our HDF5 layout, written with h5py."""
        recs = []
        for name, parts in records:
            t = {}
            for key, vals in parts.items():
                prefix = "input" if key in ("input_args", "input") else "output"
                for i, v in enumerate(vals):
                    if isinstance(v, torch.Tensor):
                        if v.dtype == torch.bfloat16:
                            t["%s.%d" % (prefix, i)] = H.BF16(v.detach().float().numpy())
                        else:
                            t["%s.%d" % (prefix, i)] = v.detach().contiguous().numpy()
            recs.append((name, t))
        H.write_dump(path, recs)
        return path

    def rows(self, b, c):
        rows, summary, _ = H.run_driver(b, c)
        return {r["npu_name"]: r for r in rows}, summary

    def test_msprobe_pair_mixed_pair_and_ours_agree_with_numpy(self):
        mb = ML.write(os.path.join(self.d, "mb"), self.bench, fmt="pt")
        mc = ML.write(os.path.join(self.d, "mc"), self.cmp, fmt="npy")
        mc_pt = ML.write(os.path.join(self.d, "mcpt"), self.cmp, fmt="pt")
        ob = self.ours(os.path.join(self.d, "ob.h5"), self.bench)
        oc = self.ours(os.path.join(self.d, "oc.h5"), self.cmp)
        ref, _ = self.rows(ob, oc)
        self.assertEqual(len(ref), 7)
        for label, (b, c) in {"msprobe .pt vs .npy": (mb, mc), "msprobe .pt vs .pt": (mb, mc_pt),
                              "mixed msprobe bench, ours compare": (mb, oc),
                              "mixed ours bench, msprobe compare": (ob, mc)}.items():
            got, _ = self.rows(b, c)
            with self.subTest(pair=label):
                self.assertEqual(sorted(got), sorted(ref))
                for name, r in ref.items():
                    for k in METRICS + ("npu_dtype", "bench_dtype", "npu_shape", "verdict"):
                        if isinstance(r[k], float):
                            self.assertAlmostEqual(got[name][k], r[k], places=12, msg=(name, k))
                        else:
                            self.assertEqual(got[name][k], r[k], (name, k))
        # and the metrics are numpy's, on the tensors as torch holds them
        for rec_b, rec_c in zip(self.bench, self.cmp):
            for key in ("input_args", "output"):
                for i, (tb, tc) in enumerate(zip(rec_b[1][key], rec_c[1][key])):
                    if not isinstance(tb, torch.Tensor):
                        continue
                    name = "%s.%s.%d" % (rec_b[0], "input" if key == "input_args" else "output", i)
                    def np_of(t):
                        return H.BF16(t.detach().float().numpy()) if t.dtype == torch.bfloat16 \
                            else t.detach().numpy()
                    want = H.ref_metrics(np_of(tc), np_of(tb))
                    got = ref[name]
                    for k in METRICS:
                        if want[k] is None:
                            self.assertIsNone(got[k], (name, k))
                        else:
                            self.assertAlmostEqual(got[k], want[k], places=9, msg=(name, k))
        self.assertGreater(ref["Torch.mul.0.forward.output.0"]["max_abs_err"], 0.0)

    def test_transposed_and_bf16_pt_read_exactly(self):
        mb = ML.write(os.path.join(self.d, "mb"), self.bench, fmt="pt")
        ob = self.ours(os.path.join(self.d, "ob.h5"), self.bench)
        got, _ = self.rows(mb, ob)
        for name in ("Torch.mul.0.forward.input.0", "Tensor.to.0.forward.output.0"):
            self.assertEqual(got[name]["max_abs_err"], 0.0, name)
            self.assertEqual(got[name]["euc_dist"], 0.0, name)
        self.assertEqual(got["Tensor.to.0.forward.output.0"]["npu_dtype"], "torch.bfloat16")

    def test_statistics_and_md5_dumps_compare_on_what_they_hold(self):
        sb = ML.write(os.path.join(self.d, "sb"), self.bench, task="statistics")
        sc = ML.write(os.path.join(self.d, "sc"), self.cmp, task="statistics")
        got, summary = self.rows(sb, sc)
        self.assertEqual(summary["stats_mode"], 1)
        r = got["Functional.linear.0.forward.output.0"]
        ob = self.bench[0][1]["output"][0].double()
        oc = self.cmp[0][1]["output"][0].double()
        self.assertAlmostEqual(r["max_diff"], (oc.max() - ob.max()).item(), places=12)
        self.assertAlmostEqual(r["norm_diff"], (oc.norm() - ob.norm()).item(), places=9)
        # md5: equal CRC-32 -> pass, different -> not
        mb = ML.write(os.path.join(self.d, "m5b"), self.bench, task="statistics",
                      summary_mode="md5")
        mc = ML.write(os.path.join(self.d, "m5c"), self.cmp, task="statistics",
                      summary_mode="md5")
        got, _ = self.rows(mb, mc)
        self.assertEqual(got["Functional.linear.0.forward.input.0"]["verdict"], "Yes")
        self.assertEqual(got["Functional.linear.0.forward.output.0"]["verdict"], "No")
        self.assertIn("crc32", got["Functional.linear.0.forward.output.0"]["err_message"])

    def test_ls_and_cli_compare_over_dump_roots(self):
        ML.write(os.path.join(self.d, "rb"), self.bench, fmt="pt", step=0,
                 stacks=[(["File \"train.py\", line 12, in forward"],
                          ["Functional.linear.0.forward"])])
        ML.write(os.path.join(self.d, "rc"), self.cmp, fmt="npy", step=0,
                 stacks=[(["File \"train_npu.py\", line 40, in forward"],
                          ["Functional.linear.0.forward"])])
        p = subprocess.run([BIN, "ls", os.path.join(self.d, "rb")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("File \"train.py\", line 12, in forward", p.stdout)
        out = os.path.join(self.d, "out")
        p = subprocess.run([BIN, "compare", "-b", os.path.join(self.d, "rb"), "-c",
                            os.path.join(self.d, "rc"), "-o", out], capture_output=True, text=True)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        import openpyxl
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)
        rows = list(wb["details"].iter_rows(values_only=True))
        head = list(rows[0])
        by_name = {r[0]: dict(zip(head, r)) for r in rows[1:]}
        self.assertIn("Functional.linear.0.forward.output.0", by_name)
        w_row = by_name["Functional.linear.0.forward.input.1"]
        self.assertEqual((w_row["NPU Requires_grad"], w_row["Bench Requires_grad"],
                          w_row["Requires_grad Consistent"]), ("False", "True", "False"))
        a_row = by_name["Functional.linear.0.forward.input.0"]
        self.assertEqual(a_row["Requires_grad Consistent"], "True")
        # the compare side's stack, on the record's first row (as msprobe writes it)
        self.assertEqual(a_row["NPU_Stack_Info"], 'File "train_npu.py", line 40, in forward')
        self.assertIn(by_name["Functional.linear.0.forward.output.0"]["NPU_Stack_Info"],
                      (None, ""))

    def test_rank_dir_without_dump_is_named_plainly(self):
        ML.write(os.path.join(self.d, "xb"), self.bench, fmt="pt", rank=0)
        ML.write(os.path.join(self.d, "xc"), self.cmp, fmt="pt", rank=0)
        os.makedirs(os.path.join(self.d, "xb", "step0", "rank1"))
        ML.write(os.path.join(self.d, "xc"), self.cmp, fmt="pt", rank=1)
        p = subprocess.run([BIN, "compare", "-b", os.path.join(self.d, "xb"), "-c",
                            os.path.join(self.d, "xc"), "-o", os.path.join(self.d, "o")],
                           capture_output=True, text=True)
        rank1 = os.path.join(self.d, "xb", "step0", "rank1")
        self.assertIn("%s: holds neither dump.h5 (msprobe-c) nor dump.json (msprobe)" % rank1,
                      p.stderr)
        self.assertNotIn("has no dump.h5", p.stderr)

    def test_pt_that_is_not_a_plain_tensor_is_refused(self):
        rdir = ML.write(os.path.join(self.d, "bad"), self.bench, fmt="pt")
        victim = os.path.join(rdir, "dump_tensor_data", "Functional.linear.0.forward.output.0.pt")
        torch.save({"t": torch.ones(4, 3)}, victim)
        ok = ML.write(os.path.join(self.d, "ok"), self.bench, fmt="pt")
        rc, lines, err = H.run_driver(rdir, ok, expect_ok=False)
        text = err + " ".join(str(x) for x in lines)
        self.assertIn(victim, text)
        self.assertIn("plain tensor", text)

    def test_damaged_files_are_errors_never_crashes(self):
        """Mutated .pt / .npy bytes, a truncated dump.json, NaN and Infinity as
        Python's json writes them: every run ends with a result or an error."""
        import random
        rnd = random.Random(5)
        ok = ML.write(os.path.join(self.d, "ok"), self.bench, fmt="pt")
        for fmt in ("pt", "npy"):
            rdir = ML.write(os.path.join(self.d, "m" + fmt), self.bench, fmt=fmt)
            victim = os.path.join(rdir, "dump_tensor_data",
                                  "Functional.linear.0.forward.output.0." + fmt)
            good = open(victim, "rb").read()
            for _ in range(60):
                bad = bytearray(good)
                for _ in range(rnd.randint(1, 4)):
                    bad[rnd.randrange(min(len(bad), 200 if fmt == "npy" else len(bad)))] = \
                        rnd.randrange(256)
                if rnd.random() < 0.3:
                    bad = bad[:rnd.randrange(len(bad))]
                open(victim, "wb").write(bytes(bad))
                rc, _, err = H.run_driver(rdir, ok, expect_ok=False)
                self.assertIn(rc, (0, 1, 2), err)
        # NaN / Infinity bare in the JSON (Python's json.dump default)
        rdir = ML.write(os.path.join(self.d, "nan"), self.bench, task="statistics")
        js = os.path.join(rdir, "dump.json")
        text = open(js).read()
        import json as _json
        d = _json.loads(text)
        ent = d["data"]["Torch.mul.0.forward"]["output"][0]
        ent["Max"], ent["Min"] = float("nan"), float("-inf")
        open(js, "w").write(_json.dumps(d))
        self.assertIn("NaN", open(js).read())
        rows, _ = self.rows(rdir, rdir)
        r = rows["Torch.mul.0.forward.output.0"]
        self.assertIsNone(r["npu_max"])
        self.assertEqual(r["npu_min"], "-inf")
        open(js, "w").write(text[: len(text) // 2])
        rc, lines, err = H.run_driver(rdir, ok, expect_ok=False)
        self.assertEqual(rc, 2)
        self.assertIn("dump.json", str(lines) + err)


if __name__ == "__main__":
    unittest.main()
