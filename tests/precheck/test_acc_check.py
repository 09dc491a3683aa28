"""acc_check and api_precision_compare.

A real training step (acc_train.py: conv2d, relu, linear, a custom kernel
registered by name in api_list, division, addition, dropout, cross_entropy)
dumped under the real preload shim; its custom kernel is planted 40 ULPs off
(nan_kernels.py), past what msprobe's standard for mul allows. acc_check
must flag that kernel, pass every unmodified API, and skip what it cannot
rebuild with the reason. Its metric columns are checked against msprobe's
published formulas computed here with numpy from the dump's own tensors
(h5py) and a float64 benchmark computed here too: never from msprobe-c's
output. api_precision_compare is checked on CSVs written by hand, with the
verdicts worked out from msprobe's published thresholds."""
import csv
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import h5py
from msp_h5dump import record_attrs
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = os.environ.get("MSPROBE_PYTHON", "/usr/bin/python3")
PRELOAD = os.environ.get("MSPROBE_PRELOAD_LIB", "")
BIN = os.environ.get("MSPROBE_BIN", "msprobe")
APIS = ["nan_kernels.mul", "torch.nn.functional.conv2d", "torch.nn.functional.linear",
        "torch.nn.functional.relu", "torch.nn.functional.cross_entropy",
        "torch.nn.functional.dropout", "torch.Tensor.__truediv__", "torch.Tensor.__add__",
        "torch.Tensor.flatten"]
REF = "nan_kernels.mul=torch.mul"


def dump(name, ulps="40", task="tensor", model=(), apis=APIS, step="0"):
    root = os.path.join(WORK, name)
    if os.path.isdir(root):
        return os.path.join(root, "step" + step, "rank0")
    cfg = root + ".json"
    with open(cfg, "w") as f:
        json.dump({"dump": {"common_dump_settings": {"dump_mode": "api", "dump_path": root,
                                                     "dump_iter": step, "task": task},
                            "api_list": [{"name": n} for n in apis]}}, f)
    env = dict(os.environ, LD_PRELOAD=PRELOAD, MSPROBE_PATH=cfg, NAN_KERNEL_ULPS=ulps,
               PYTHONPATH=HERE, OMP_NUM_THREADS="1")
    p = subprocess.run([PYTHON, os.path.join(HERE, "acc_train.py"), *model], cwd=WORK, env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-3000:])
    return os.path.join(root, "step" + step, "rank0")


def acc_check(rank_dir, *args):
    out = os.path.join(WORK, "acc-%d" % len(os.listdir(WORK)))
    env = dict(os.environ, PYTHONPATH=HERE)
    p = subprocess.run([BIN, "acc_check", "-d", rank_dir, "-o", out, *args], capture_output=True,
                       text=True, timeout=600, env=env)
    res = glob.glob(os.path.join(out, "accuracy_checking_result_*.csv"))
    det = glob.glob(os.path.join(out, "accuracy_checking_details_*.csv"))
    return p, read_csv(res[0]) if res else [], read_csv(det[0]) if det else [], det[0] if det else None


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def setUpModule():
    global WORK
    if not PRELOAD or not os.path.exists(PRELOAD):
        raise unittest.SkipTest("MSPROBE_PRELOAD_LIB not set (run through ctest)")
    WORK = tempfile.mkdtemp(prefix="msp-acc-")


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


def tensors(rank_dir):
    """{record: {role: ndarray}} and {record: {attr: text}} with h5py."""
    data, attrs = {}, {}
    with h5py.File(os.path.join(rank_dir, "dump.h5"), "r") as f:
        ra = record_attrs(f)
        for name, g in f.items():
            if isinstance(g, h5py.Group):
                data[name] = {r: ds[()] for r, ds in g.items() if ds.shape is not None}
                attrs[name] = dict(ra.get(name, {}), order=str(g.attrs["order"]))
    return data, attrs


# ---- msprobe's published formulas, with numpy (float32 outputs) ---------------------

def msprobe_metrics(d, b):
    """The columns of accuracy_checking_details for a float32 output d against
    its float64 benchmark b, by the formulas of msprobe's API pre-check
    (benchmark eps: float64's, small values 2^-20, atol 2^-30, rtol 2^-20,
    ULP: exponent floor log2|b| >= -126, 23 mantissa bits, threshold 32)."""
    d = np.asarray(d, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    n = d.size
    eps = np.finfo(np.float64).eps
    ae = np.abs(d - b)
    rel = ae / (np.abs(b) + eps)
    m = {"最大绝对误差": ae.max(), "双千指标": np.mean(rel < 0.001),
         "双万指标": np.mean(rel < 0.0001),
         "二进制一致错误率": np.mean(b.astype(np.float32).astype(np.float64) != d)}
    if n > 1:
        dn, bn = d / np.abs(d).max(), b / np.abs(b).max()
        m["余弦相似度"] = float(np.dot(dn, bn) / (np.linalg.norm(dn) * np.linalg.norm(bn)))
    fin = np.isfinite(d) & np.isfinite(b.astype(np.float32))
    small = (np.abs(b) <= 2.0 ** -20) & fin
    relb = np.where(small | ~fin, -1.0, rel)
    m["相对误差最大值"] = max(relb.max(), 0.0)
    m["相对误差平均值"] = relb[relb >= 0].mean() if (relb >= 0).any() else 0.0
    m["小值域错误占比"] = (np.sum(small & (ae > 2.0 ** -30)) / small.sum()) if small.any() else 0.0
    masked = np.where(~fin | small, 0.0, ae)
    mse = np.mean(masked ** 2) * (n / (n - np.sum(~fin | small) + 1e-4) + 1e-4)
    m["均方根误差"] = np.sqrt(mse)
    diff = d - b.astype(np.float32).astype(np.float64)
    m["误差均衡性"] = abs(int(np.sum(diff > 0)) - int(np.sum(diff < 0))) / n
    normal = fin & ~small
    m["相对误差错误率"] = np.sum((rel > 2.0 ** -20) & normal) / normal.sum() if normal.any() else 0.0
    m["绝对误差错误率"] = np.sum((ae > 2.0 ** -30) & small) / small.sum() if small.any() else 0.0
    m["inf/nan错误率"] = 0.0
    eb = np.where(np.abs(b) == 0, 0.0, np.floor(np.log2(np.abs(b), where=np.abs(b) > 0,
                                                        out=np.zeros_like(b))))
    ulp = np.abs((d - b) * np.exp2(-np.maximum(eb, -126) + 23))
    m["ULP误差最大值"], m["ULP误差平均值"] = ulp.max(), ulp.mean()
    m["ULP误差大于阈值占比"] = np.mean(ulp > 32)
    return m


def log_softmax(z):
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


def benchmarks(data, attrs):
    """float64 benchmarks of the records numpy can replay: {row name: (d, b)}."""
    f64 = lambda a: np.asarray(a, np.float64)
    out = {}
    for name, t in data.items():
        if name.startswith("Functional.linear.") and name.endswith(".forward"):
            b = f64(t["input.0"]) @ f64(t["input.1"]).T + f64(t["input.2"])
            out[name + ".output.0"] = (t["output.0"], b)
        elif name.startswith("Functional.linear.") and name.endswith(".backward"):
            fw = data[name[:-len("backward")] + "forward"]
            g = f64(t["input.0"])
            out[name + ".output.0"] = (t["output.0"], g @ f64(fw["input.1"]))
            out[name + ".output.1"] = (t["output.1"], g.T @ f64(fw["input.0"]))
            out[name + ".output.2"] = (t["output.2"], g.sum(0))
        elif name.startswith("Functional.relu.") and name.endswith(".forward"):
            out[name + ".output.0"] = (t["output.0"], np.maximum(f64(t["input.0"]), 0.0))
        elif name.startswith("Custom.nan_kernels.mul.") and name.endswith(".forward"):
            out[name + ".output.0"] = (t["output.0"], f64(t["input.0"]) * f64(t["input.1"]))
        elif name.startswith("Tensor.__truediv__.") and name.endswith(".forward"):
            out[name + ".output.0"] = (t["output.0"],
                                       f64(t["input.0"]) / float(attrs[name]["input.1"]))
        elif name.startswith("Functional.cross_entropy.") and name.endswith(".forward"):
            z, y = f64(t["input.0"]), t["input.1"].astype(np.int64)
            b = -log_softmax(z)[np.arange(len(y)), y].mean()
            out[name + ".output.0"] = (t["output.0"], np.array(b))
    return out


# the columns each standard fills, besides the ones every float output has
STANDARD_COLS = {
    "absolute threshold": ["inf/nan错误率", "相对误差错误率", "绝对误差错误率"],
    "binary consistency": ["二进制一致错误率"],
    "ULP error": ["ULP误差最大值", "ULP误差平均值", "ULP误差大于阈值占比"],
    "benchmark": ["小值域错误占比", "相对误差最大值", "相对误差平均值", "均方根误差", "误差均衡性"],
    "dual thousandths": [],
}
ALWAYS = ["最大绝对误差", "双千指标", "双万指标"]


class AccCheck(unittest.TestCase):
    def test_planted_kernel_is_flagged_and_every_unmodified_api_passes(self):
        rd = dump("planted")
        p, res, det, _ = acc_check(rd, "--reference", REF, "-n", "2")
        self.assertEqual(p.returncode, 1, p.stderr)
        by_api = {r["API name"]: r for r in res}
        # every API record of the dump has its row, in execution order
        data, _ = tensors(rd)
        with h5py.File(os.path.join(rd, "dump.h5"), "r") as f:
            order = {r["record"].decode(): int(r["order"]) for r in f["index"][()]}
        apis = []
        for n in sorted(order, key=order.get):
            a = n.rsplit(".", 1)[0]
            if a not in apis:
                apis.append(a)
        self.assertEqual([r["API name"] for r in res], apis)
        self.assertEqual(by_api["Custom.nan_kernels.mul.0"]["Forward Test Success"], "error")
        dropout = [a for a in apis if a.startswith("Functional.dropout.")]
        self.assertEqual(len(dropout), 1)
        self.assertEqual(by_api[dropout[0]]["Forward Test Success"], "SKIP")
        self.assertIn("random op", by_api[dropout[0]]["Message"])
        for a, r in by_api.items():
            if a.startswith("Custom.") or a in dropout:
                continue
            self.assertEqual(r["Forward Test Success"], "pass", r)
            self.assertIn(r["Backward Test Success"], ("pass", " "), r)
        # the custom kernel's forward row: the relative error rate msprobe's
        # mul standard (absolute threshold, rtol 2^-20) counts, from the data
        d, b = benchmarks(*tensors(rd))["Custom.nan_kernels.mul.0.forward.output.0"]
        row = next(r for r in det if r["API Name"] == "Custom.nan_kernels.mul.0.forward.output.0")
        want = msprobe_metrics(d, b)["相对误差错误率"]
        self.assertGreater(want, 0)
        self.assertAlmostEqual(float(row["相对误差错误率"]), want, places=12)
        self.assertEqual(row["Status"], "error")
        self.assertTrue(row["Message"].startswith("absolute threshold"), row)
        m = re.search(r"\(([\d.]+) records/s\)", p.stdout)
        self.assertTrue(m and float(m.group(1)) > 0, p.stdout)

    def test_metric_columns_agree_with_msprobes_formulas(self):
        rd = dump("planted")
        _, _, det, _ = acc_check(rd, "--reference", REF)
        bench = benchmarks(*tensors(rd))
        rows = {r["API Name"]: r for r in det}
        checked = 0
        for name, (d, b) in bench.items():
            row = rows[name]
            want = msprobe_metrics(d, b)
            std = row["Message"].split(":")[0].split(" (")[0]
            cols = ALWAYS + STANDARD_COLS[std] + (["余弦相似度"] if d.size > 1 else [])
            for col in cols:
                with self.subTest(row=name, col=col):
                    self.assertNotEqual(row[col].strip(), "", col)
                    got = float(row[col])
                    self.assertTrue(abs(got - want[col]) <= 1e-9 + 1e-6 * abs(want[col]),
                                    (name, col, got, want[col]))
                    checked += 1
            # the columns of other standards stay blank, as msprobe leaves them
            others = {c for s, cs in STANDARD_COLS.items() if s != std for c in cs}
            for col in others - set(cols):
                self.assertEqual(row[col], " ", (name, col))
        self.assertGreater(checked, 40)

    def test_workers_change_nothing_but_time(self):
        rd = dump("planted")
        _, r1, d1, _ = acc_check(rd, "--reference", REF, "-n", "1")
        _, r2, d2, _ = acc_check(rd, "--reference", REF, "-n", "3")
        self.assertEqual(r1, r2)
        self.assertEqual(d1, d2)

    def test_without_a_reference_the_custom_kernel_is_skipped_with_the_reason(self):
        rd = dump("planted")
        p, res, det, _ = acc_check(rd)
        self.assertEqual(p.returncode, 0, p.stdout)
        row = next(r for r in res if r["API name"] == "Custom.nan_kernels.mul.0")
        self.assertEqual((row["Forward Test Success"], row["Backward Test Success"]),
                         ("SKIP", "SKIP"))
        self.assertIn("--reference", row["Message"])
        drow = next(r for r in det if r["API Name"].startswith("Custom.nan_kernels.mul.0.forward"))
        self.assertEqual(drow["Status"], "SKIP")
        self.assertEqual([drow[c] for c in ("Bench Dtype", "DEVICE Dtype", "Shape")], [" "] * 3)

    def test_the_correct_kernel_passes(self):
        rd = dump("clean", ulps="0")
        p, res, _, _ = acc_check(rd, "--reference", REF)
        self.assertEqual(p.returncode, 0, p.stdout)
        row = next(r for r in res if r["API name"] == "Custom.nan_kernels.mul.0")
        self.assertEqual(row["Forward Test Success"], "pass")

    def test_api_precision_compare_of_two_real_runs(self):
        _, _, _, npu = acc_check(dump("planted"), "--reference", REF)
        _, _, _, gpu = acc_check(dump("clean", ulps="0"), "--reference", REF)
        out = os.path.join(WORK, "apc-real")
        p = subprocess.run([BIN, "api_precision_compare", "-npu", npu, "-gpu", gpu, "-o", out],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 1, p.stderr)
        res = read_csv(glob.glob(os.path.join(out, "api_precision_compare_result_*.csv"))[0])
        by = {r["API Name"]: r for r in res}
        self.assertEqual(by["Custom.nan_kernels.mul.0"]["Forward Test Success"], "error")
        for a, r in by.items():
            if not a.startswith(("Custom.", "Functional.dropout.")):
                self.assertEqual(r["Forward Test Success"], "pass", r)

    def test_every_api_of_a_batch_norm_model_with_momentum_sgd_is_replayed(self):
        # batch_norm's backward (its running statistics take no gradient), an
        # in-place relu's backward, and SGD's step (no default lr in torch 1.13)
        rd = dump("bn", model=("bn",), apis=[], step="1")
        p, res, det, _ = acc_check(rd)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        self.assertFalse([r for r in det if r["Status"] == "error"], p.stdout)
        # a warning only where a correct float32 kernel misses the standard too
        # (conv2d's bias gradient, ~0 behind batch_norm, against dual thousandths)
        for r in det:
            if r["Status"] == "warning":
                self.assertIn("The same-dtype CPU replay misses it too", r["Message"])
        names = {r["API name"] for r in res}
        for want in ("Functional.batch_norm.0", "Functional.relu.0", "Optimizer.SGD.0"):
            self.assertIn(want, names)
        skipped = [r for r in res if "SKIP" in (r["Forward Test Success"],
                                                r["Backward Test Success"])]
        self.assertEqual(skipped, [])
        bwd = {r["API name"]: r["Backward Test Success"] for r in res}
        self.assertEqual((bwd["Functional.batch_norm.0"], bwd["Functional.relu.0"]),
                         ("pass", "pass"))
        # the step's rows: every parameter the optimizer wrote, by the benchmark
        sgd = [r for r in det if r["API Name"].startswith("Optimizer.SGD.0.step.output.param.")]
        with h5py.File(os.path.join(rd, "dump.h5"), "r") as f:
            n = int(record_attrs(f)["Optimizer.SGD.0.step"]["group.0.params"])
        self.assertEqual(len(sgd), n)
        self.assertTrue(all(r["Status"] == "pass" for r in sgd), sgd)

    def test_msprobes_own_dump_layout_is_replayed(self):
        import torch
        import msprobe_layout
        root = os.path.join(WORK, "msprobe-layout")
        torch.manual_seed(3)
        x, w, b = torch.randn(4, 5), torch.randn(3, 5), torch.randn(3)
        rd = msprobe_layout.write(root, [
            ("Functional.linear.0.forward", {"input_args": [x, w, b],
                                             "output": [torch.nn.functional.linear(x, w, b)]}),
            ("Torch.mul.0.forward", {"input_args": [x, x], "output": [x * x * (1 + 2 ** -18)]}),
        ], task="tensor", level="api")
        p, res, det, _ = acc_check(os.path.join(rd, "dump.json"))
        self.assertEqual(p.returncode, 1, p.stderr)
        got = {r["API name"]: r["Forward Test Success"] for r in res}
        self.assertEqual(got, {"Functional.linear.0": "pass", "Torch.mul.0": "error"})
        row = next(r for r in det if r["API Name"] == "Functional.linear.0.forward.output.0")
        d = torch.nn.functional.linear(x, w, b).numpy()
        want = msprobe_metrics(d, x.double().numpy() @ w.double().numpy().T + b.double().numpy())
        self.assertAlmostEqual(float(row["ULP误差平均值"]), want["ULP误差平均值"], places=9)

    def test_statistics_dump_and_several_files_are_refused(self):
        rd = dump("stats", task="statistics")
        p, _, _, _ = acc_check(rd)
        self.assertEqual(p.returncode, 2)
        self.assertIn("holds no tensor data", p.stderr)
        p, _, _, _ = acc_check(os.path.join(WORK, "planted"))  # root: one file, fine
        self.assertIn(p.returncode, (0, 1), p.stderr)

    def test_usage_errors(self):
        for args, want in ((["acc_check"], "-d DUMP is required"),
                           (["acc_check", "-d", "/nonexistent"], "cannot open"),
                           (["acc_check", "-d", ".", "--reference", "nodot"], "--reference"),
                           # an option is named as it was typed
                           (["acc_check", "-d", ".", "-n", "0"],
                            "-n: '0' is not a whole number from 1 to 64"),
                           (["acc_check", "-d", ".", "--workers=65"],
                            "--workers: '65' is not a whole number from 1 to 64"),
                           (["api_precision_compare", "-npu", "x.csv"], "-gpu CSV is required")):
            p = subprocess.run([BIN, *args], capture_output=True, text=True)
            self.assertEqual((p.returncode, p.stdout), (2, ""), args)
            self.assertIn(want, p.stderr)


# ---- api_precision_compare on hand-made CSVs ---------------------------------------------

REQUIRED = ["API Name", "DEVICE Dtype", "Shape", "小值域错误占比", "均方根误差", "相对误差最大值",
            "相对误差平均值", "误差均衡性", "二进制一致错误率", "inf/nan错误率", "相对误差错误率",
            "绝对误差错误率", "ULP误差平均值", "ULP误差大于阈值占比", "双千指标", "Status", "Message"]


def write_csv(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(REQUIRED)
        for r in rows:
            w.writerow([r.get(c, " ") for c in REQUIRED])


class ApiPrecisionCompare(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="msp-apc-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_apc(self, npu_rows, gpu_rows):
        npu, gpu = os.path.join(self.dir, "npu.csv"), os.path.join(self.dir, "gpu.csv")
        write_csv(npu, npu_rows)
        write_csv(gpu, gpu_rows)
        out = os.path.join(self.dir, "out")
        p = subprocess.run([BIN, "api_precision_compare", "-npu", npu, "--gpu_csv_path", gpu,
                            "-o", out], capture_output=True, text=True, timeout=60)
        if p.returncode == 2:
            return p, None, None
        return (p, read_csv(glob.glob(os.path.join(out, "api_precision_compare_result_*.csv"))[0]),
                read_csv(glob.glob(os.path.join(out, "api_precision_compare_details_*.csv"))[0]))

    def test_each_standard_by_msprobes_thresholds(self):
        b = dict(zip(["小值域错误占比", "均方根误差", "相对误差最大值", "相对误差平均值", "误差均衡性"],
                     ["0", "0.001", "0.001", "0.0005", "0.1"]))
        npu = [
            # benchmark (softmax, L0): max_rel 0.02 / max(0.001, 2^-11) = 20 > 10
            dict(b, **{"API Name": "Functional.softmax.0.forward.output.0",
                       "DEVICE Dtype": "torch.float16", "相对误差最大值": "0.02"}),
            # benchmark at L2 (matmul is ULP; sum is L2): mean_rel 0.0007/0.0005 = 1.4 > 1.2
            dict(b, **{"API Name": "Torch.sum.0.forward.output.0", "DEVICE Dtype": "torch.float32",
                       "相对误差平均值": "0.0007"}),
            # ULP, float32: mean 100 >= 64, share 0.2 >= 0.05, ratio 0.2/0.1 = 2 >= 1: error
            {"API Name": "Torch.matmul.0.forward.output.0", "DEVICE Dtype": "torch.float32",
             "ULP误差平均值": "100", "ULP误差大于阈值占比": "0.2"},
            # ULP, float32, the GPU worse (ratio 0.2/0.3 < 1): pass
            {"API Name": "Torch.matmul.1.forward.output.0", "DEVICE Dtype": "torch.float32",
             "ULP误差平均值": "100", "ULP误差大于阈值占比": "0.2"},
            # absolute threshold: all zero passes, a non-zero rate fails
            {"API Name": "Torch.add.0.forward.output.0", "DEVICE Dtype": "torch.float32",
             "inf/nan错误率": "0", "相对误差错误率": "0", "绝对误差错误率": "0"},
            {"API Name": "Torch.add.1.forward.output.0", "DEVICE Dtype": "torch.float32",
             "inf/nan错误率": "0", "相对误差错误率": "0", "绝对误差错误率": "0.1"},
            # dual thousandths: forward 0.9995 >= 0.999 passes, backward 0.99 fails
            {"API Name": "Functional.conv2d.0.forward.output.0", "DEVICE Dtype": "torch.float32",
             "双千指标": "0.9995"},
            {"API Name": "Functional.conv2d.0.backward.output.0", "DEVICE Dtype": "torch.float32",
             "双千指标": "0.99"},
            # binary consistency (an integer output)
            {"API Name": "Torch.argmax.0.forward.output.0", "DEVICE Dtype": "torch.int64",
             "二进制一致错误率": "0.125"},
            # float64: not covered
            {"API Name": "Torch.exp.0.forward.output.0", "DEVICE Dtype": "torch.float64"},
            # not in the GPU file
            {"API Name": "Torch.cos.0.forward.output.0", "DEVICE Dtype": "torch.float32"},
        ]
        gpu = [dict(r) for r in npu if not r["API Name"].startswith("Torch.cos.")]
        for r in gpu:
            for k in ("相对误差最大值", "相对误差平均值"):
                if k in r:
                    r[k] = b[k]
        gpu[2]["ULP误差大于阈值占比"] = "0.1"
        gpu[3]["ULP误差大于阈值占比"] = "0.3"
        p, res, det = self.run_apc(npu, gpu)
        self.assertEqual(p.returncode, 1, p.stderr)
        got = {r["API Name"]: (r["Forward Test Success"], r["Backward Test Success"]) for r in res}
        self.assertEqual(got, {
            "Functional.softmax.0": ("error", " "), "Torch.sum.0": ("error", " "),
            "Torch.matmul.0": ("error", " "), "Torch.matmul.1": ("pass", " "),
            "Torch.add.0": ("pass", " "), "Torch.add.1": ("error", " "),
            "Functional.conv2d.0": ("pass", "error"), "Torch.argmax.0": ("error", " "),
            "Torch.exp.0": ("SKIP", "SKIP")})
        d = {r["API Name"]: r for r in det}
        sm = d["Functional.softmax.0.forward.output.0"]
        self.assertAlmostEqual(float(sm["相对误差最大值比值"]), 0.02 / 0.001, places=9)
        self.assertEqual(sm["相对误差最大值判定结果"], "error")
        self.assertEqual(sm["比对算法"], "标杆比对法")
        self.assertAlmostEqual(float(d["Torch.sum.0.forward.output.0"]["相对误差平均值比值"]),
                               0.0007 / 0.0005, places=9)
        mm = d["Torch.matmul.0.forward.output.0"]
        self.assertAlmostEqual(float(mm["ULP误差大于阈值占比比值"]), 2.0, places=9)
        self.assertEqual((mm["ULP误差判定结果"], mm["比对算法"]), ("error", "ULP误差比对法"))
        self.assertEqual(d["Torch.add.1.forward.output.0"]["绝对误差判定结果"], "error")
        self.assertEqual(d["Torch.add.1.forward.output.0"]["比对算法"], "绝对阈值法")
        self.assertEqual(d["Functional.conv2d.0.backward.output.0"]["比对算法"], "双千指标法")
        self.assertEqual(d["Torch.argmax.0.forward.output.0"]["比对算法"], "二进制一致法")
        self.assertNotIn("Torch.cos.0.forward.output.0", d)
        self.assertIn("1 rows not in the GPU CSV", p.stdout)

    def test_a_csv_without_the_required_columns_is_refused_by_name(self):
        bad = os.path.join(self.dir, "bad.csv")
        with open(bad, "w") as f:
            f.write("API Name,Status\nTorch.add.0.forward.output.0,pass\n")
        p = subprocess.run([BIN, "api_precision_compare", "-npu", bad, "-gpu", bad, "-o",
                            self.dir], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("bad.csv (NPU details): not an acc_check details CSV: the columns "
                      "DEVICE Dtype, 小值域错误占比", p.stderr)

    def test_a_stray_quote_is_refused_naming_file_and_line(self):
        # '"0.5"1' once read as 0.51: a field holding a quote is quoted whole
        # (RFC 4180), so this is a cut or hand-edited file, not a number
        good = os.path.join(self.dir, "good.csv")
        write_csv(good, [{"API Name": "Torch.add.0.forward.output.0",
                          "DEVICE Dtype": "torch.float32"}])
        with open(good, encoding="utf-8") as f:
            text = f.read()
        bad = os.path.join(self.dir, "stray.csv")
        with open(bad, "w", encoding="utf-8", newline="") as f:
            f.write(text + 'Torch.add.1.forward.output.0,torch.float32,[2],"0.5"1' + ", " * 13 + "\r\n")
        p = subprocess.run([BIN, "api_precision_compare", "-npu", bad, "-gpu", good, "-o",
                            self.dir], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn("stray.csv: line 3: a stray '\"'", p.stderr)
        # the same row quoted as RFC 4180 says is read
        with open(bad, "w", encoding="utf-8", newline="") as f:
            f.write(text + 'Torch.add.1.forward.output.0,torch.float32,"[2, 3]","0.5""1"'
                    + ", " * 13 + "\r\n")
        p = subprocess.run([BIN, "api_precision_compare", "-npu", bad, "-gpu", good, "-o",
                            self.dir], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
