"""acc_check on dumps Huawei's msprobe wrote itself (fixtures/msprobe: 26 and
8.3.3, one seeded training step of tests/compare/msprobe_seeded_model.py),
and on dumps written in its layout by tests/lib/msprobe_layout.py.

msprobe records an API's backward with a hook on the grad_fn of the API's
first output: its output.K is what that node hands on (cross_entropy's
NllLoss: the gradient of its inner log_softmax; linear's addmm: bias, input,
weight.t(); layer_norm: input, weight, bias). Each such output is checked
here against the gradient numpy computes from the record's own tensors
(torch.load of msprobe's .pt files) with the formula of that node, and the
details row's largest absolute error against numpy's: never against what
msprobe-c wrote. msprobe writes a bool argument as {"type": "bool",
"value": false} and a string as {"type": "str", "value": "sum"}; a record
with either must replay. msprobe's command-line options (run_ut, -j,
-csv_path, -save_error_data) are checked on its own dumps too."""
import csv
import glob
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("MSPROBE_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
BIN = os.environ.get("MSPROBE_BIN", "msprobe")
FIX = os.path.join(ROOT, "fixtures", "msprobe")
DUMPS = {"26": "v26/step0/proc4401", "8.3.3": "v833/step0/rank"}


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def acc_check(work, dump, *args):
    out = tempfile.mkdtemp(dir=work)
    p = subprocess.run([BIN, "acc_check", "-api_info", dump, "-o", out, "-n", "2", *args],
                       capture_output=True, text=True, timeout=600)
    res = glob.glob(os.path.join(out, "accuracy_checking_result_*.csv"))
    det = glob.glob(os.path.join(out, "accuracy_checking_details_*.csv"))
    return p, read_csv(res[0]) if res else [], read_csv(det[0]) if det else []


class Record:
    """A record's tensors from msprobe's own dump.json and .pt files."""

    def __init__(self, rank_dir):
        import torch
        self.torch = torch
        self.dir = rank_dir
        with open(os.path.join(rank_dir, "dump.json")) as f:
            self.data = json.load(f)["data"]

    def t(self, rec, key, i):
        e = self.data[rec][key][i]
        x = self.torch.load(os.path.join(self.dir, "dump_tensor_data", e["data_name"]))
        return x.numpy().astype(np.float64) if x.is_floating_point() else x.numpy()


def node_grads(r):
    """{details row: (recorded float32 output, numpy float64 gradient)} for the
    backward records whose node's gradient numpy computes here."""
    out = {}
    # cross_entropy = nll_loss(log_softmax(z)): NllLoss hands on, for the mean
    # over N rows, -g/N at each row's target and 0 elsewhere
    ce = "Functional.cross_entropy.0"
    z, y = r.t(ce + ".forward", "input_args", 0), r.t(ce + ".forward", "input_args", 1)
    g = r.t(ce + ".backward", "input", 0)
    b = np.zeros_like(z)
    b[np.arange(len(y)), y] = -float(g) / len(y)
    out[ce + ".backward.output.0"] = (r.t(ce + ".backward", "output", 0), b)
    # linear on a 2-d input: addmm(bias, x, W.t()) hands on bias, x, W.t()
    ln = "Functional.linear.1"
    x, w = r.t(ln + ".forward", "input_args", 0), r.t(ln + ".forward", "input_args", 1)
    g = r.t(ln + ".backward", "input", 0)
    for k, want in enumerate((g.sum(0), g @ w, x.T @ g)):
        out["%s.backward.output.%d" % (ln, k)] = (r.t(ln + ".backward", "output", k), want)
    # linear on a 3-d input: the view after addmm hands on the gradient reshaped
    ln = "Functional.linear.0"
    g = r.t(ln + ".backward", "input", 0)
    out[ln + ".backward.output.0"] = (r.t(ln + ".backward", "output", 0), g.reshape(-1, g.shape[-1]))
    # layer_norm hands on input, weight, bias
    lnm = "Functional.layer_norm.0"
    x = r.t(lnm + ".forward", "input_args", 0)
    w = r.t(lnm + ".forward", "input_args", 2)
    eps = float(r.data[lnm + ".forward"]["input_args"][4]["value"])
    g = r.t(lnm + ".backward", "input", 0)
    mu = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    xh = (x - mu) * rstd
    gw = g * w
    n = x.shape[-1]
    dx = rstd / n * (n * gw - gw.sum(-1, keepdims=True) - xh * (gw * xh).sum(-1, keepdims=True))
    for k, want in enumerate((dx, (g * xh).sum((0, 1)), g.sum((0, 1)))):
        out["%s.backward.output.%d" % (lnm, k)] = (r.t(lnm + ".backward", "output", k), want)
    # embedding hands on the weight's gradient: each looked-up row's sum
    em = "Functional.embedding.0"
    ids = r.t(em + ".forward", "input_args", 0)
    wt = r.t(em + ".forward", "input_args", 1)
    g = r.t(em + ".backward", "input", 0)
    b = np.zeros_like(wt)
    np.add.at(b, ids.reshape(-1), g.reshape(-1, wt.shape[1]))
    out[em + ".backward.output.0"] = (r.t(em + ".backward", "output", 0), b)
    return out


def cosine(d, b):
    """msprobe's cosine: each side scaled by its largest magnitude."""
    d, b = d.ravel() / np.abs(d).max(), b.ravel() / np.abs(b).max()
    return float(np.dot(d, b) / (np.linalg.norm(d) * np.linalg.norm(b)))


def setUpModule():
    global WORK
    WORK = tempfile.mkdtemp(prefix="msp-acc-ms-")


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


class MsprobesOwnDump(unittest.TestCase):
    def test_backward_records_are_judged_on_the_gradients_msprobe_recorded(self):
        for version, rel in DUMPS.items():
            rd = os.path.join(FIX, rel)
            p, res, det = acc_check(WORK, os.path.join(rd, "dump.json"))
            with self.subTest(msprobe=version):
                # the same run our own dump passes: every output passes here too
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertIn("0 warning, 0 error", p.stdout)
                self.assertNotIn("SKIP", {r["Forward Test Success"] for r in res} |
                                 {r["Backward Test Success"] for r in res}, res)
            rows = {r["API Name"]: r for r in det}
            for name, (d, b) in node_grads(Record(rd)).items():
                with self.subTest(msprobe=version, row=name):
                    row = rows[name]
                    self.assertEqual(row["Status"], "pass", row)
                    self.assertEqual(row["Shape"].replace(" ", ""),
                                     str(tuple(d.shape)).replace(" ", ""))
                    want = np.abs(d - b).max()
                    got = float(row["最大绝对误差"])
                    self.assertLess(want, 1e-6)  # numpy's gradient is msprobe's, to float32
                    self.assertTrue(abs(got - want) <= 1e-12 + 1e-6 * want, (got, want))
                    if d.size > 1 and np.abs(b).max() > 0:
                        self.assertAlmostEqual(float(row["余弦相似度"]), cosine(d, b), places=9)

    def test_the_cross_entropy_gradient_is_not_the_logits_gradient(self):
        # what made the false error: the logits' gradient, softmax(z) - onehot,
        # against msprobe's log_softmax gradient has cosine ~0.8
        r = Record(os.path.join(FIX, DUMPS["26"]))
        ce = "Functional.cross_entropy.0"
        z, y = r.t(ce + ".forward", "input_args", 0), r.t(ce + ".forward", "input_args", 1)
        sm = np.exp(z - z.max(1, keepdims=True))
        sm /= sm.sum(1, keepdims=True)
        logits = sm.copy()
        logits[np.arange(len(y)), y] -= 1
        logits /= len(y)
        self.assertLess(cosine(r.t(ce + ".backward", "output", 0), logits), 0.9)


class MsprobesArguments(unittest.TestCase):
    def test_a_bool_argument_as_msprobe_writes_it_is_replayed(self):
        import torch
        import msprobe_layout
        torch.manual_seed(5)
        x = torch.randn(6, 7)
        y = torch.relu(x)
        rd = msprobe_layout.write(os.path.join(WORK, "bools"), [
            ("Functional.relu.0.forward", {"input_args": [x], "input_kwargs": {"inplace": False},
                                           "output": [y]}),
            ("Functional.relu.1.forward", {"input_args": [x, False], "output": [y]}),
            # a bool kernel-off switch msprobe passes positionally, and a None
            ("Functional.embedding.0.forward", {
                "input_args": [torch.tensor([[1, 2], [0, 2]]), x[:3], None, None, 2.0, False,
                               False],
                "output": [x[:3][torch.tensor([[1, 2], [0, 2]])]]}),
        ], task="tensor", level="api")
        with open(os.path.join(rd, "dump.json")) as f:
            text = f.read()
        self.assertIn('"value": false', text)  # the layout under test
        p, res, det = acc_check(WORK, rd)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        got = {r["API name"]: r["Forward Test Success"] for r in res}
        self.assertEqual(got, {"Functional.relu.0": "pass", "Functional.relu.1": "pass",
                               "Functional.embedding.0": "pass"})
        rows = {r["API Name"]: r for r in det}
        want = np.maximum(x.double().numpy(), 0.0)
        for n in ("Functional.relu.0", "Functional.relu.1"):
            row = rows[n + ".forward.output.0"]
            # binary consistency: relu's float32 output equals the benchmark
            self.assertEqual(float(row["二进制一致错误率"]),
                             float(np.mean(want.astype(np.float32) != y.numpy())))

    def test_cross_entropy_with_msprobes_reduction_and_ignore_index(self):
        # msprobe writes reduction as {"type": "str", "value": "sum"}; the
        # backward record holds NllLoss's gradient: -g at each row's target,
        # 0 on the rows whose target is ignore_index, no 1/N for "sum"
        import torch
        import msprobe_layout
        torch.manual_seed(3)
        z = torch.randn(5, 4)
        y = torch.tensor([0, 1, 3, 1, 2])
        zz = z.double().numpy()
        lsm = zz - zz.max(1, keepdims=True)
        lsm = lsm - np.log(np.exp(lsm).sum(1, keepdims=True))
        keep = y.numpy() != 1
        loss = -lsm[np.arange(5), y.numpy()][keep].sum()
        g = 0.5
        b = np.zeros((5, 4))
        b[np.arange(5)[keep], y.numpy()[keep]] = -g
        rd = msprobe_layout.write(os.path.join(WORK, "ce-sum"), [
            ("Functional.cross_entropy.0.forward", {
                "input_args": [z.clone().requires_grad_(True), y],
                "input_kwargs": {"reduction": "sum", "ignore_index": 1},
                "output": [torch.tensor(loss, dtype=torch.float32)]}),
            ("Functional.cross_entropy.0.backward", {
                "input": [torch.tensor(g)], "output": [torch.from_numpy(b).float()]}),
        ], task="tensor", level="api")
        with open(os.path.join(rd, "dump.json")) as f:
            self.assertIn('"value": "sum"', f.read())  # the layout under test
        p, res, det = acc_check(WORK, rd)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual([(r["Forward Test Success"], r["Backward Test Success"]) for r in res],
                         [("pass", "pass")])
        rows = {r["API Name"]: r for r in det}
        fw = rows["Functional.cross_entropy.0.forward.output.0"]
        self.assertAlmostEqual(float(fw["最大绝对误差"]), abs(float(np.float32(loss)) - loss),
                               delta=1e-12)
        bw = rows["Functional.cross_entropy.0.backward.output.0"]
        # -0.5 and 0 are exact in float32: no error at all
        self.assertEqual(float(bw["最大绝对误差"]), 0.0)
        self.assertEqual(float(bw["余弦相似度"]), 1.0)


class MsprobesOptions(unittest.TestCase):
    """msprobe's own command lines, as its docs give them (26's acc_check,
    8.x's run_ut and multi_run_ut): -api_info, -o, -j, -csv_path."""

    def setUp(self):
        self.dump = os.path.join(FIX, DUMPS["26"], "dump.json")

    def run_cli(self, *args, cwd=None):
        return subprocess.run([BIN, "-f", "pytorch", *args], capture_output=True, text=True,
                              timeout=600, cwd=cwd)

    def test_run_ut_and_multi_run_ut_are_acc_check(self):
        # -d: msprobe's device ids once -api_info names the dump
        for cmd, extra in (("run_ut", ["-j", "-d", "0"]), ("multi_run_ut", ["-n", "2", "-d", "0", "1"])):
            out = tempfile.mkdtemp(dir=WORK)
            p = self.run_cli(cmd, "-api_info", self.dump, "-o", out, *extra)
            with self.subTest(cmd=cmd):
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                res = read_csv(glob.glob(os.path.join(out, "accuracy_checking_result_*.csv"))[0])
                # one row per API of msprobe's dump.json, in its order
                with open(self.dump) as f:
                    apis = []
                    for k in json.load(f)["data"]:
                        a = k.rsplit(".", 1)[0]
                        if a not in apis:
                            apis.append(a)
                self.assertEqual([r["API name"] for r in res], apis)

    def test_api_info_and_a_dump_path_in_d_is_a_usage_error(self):
        p = self.run_cli("run_ut", "-api_info", self.dump, "-d", self.dump)
        self.assertEqual((p.returncode, p.stdout), (2, ""))
        self.assertIn("both name a dump", p.stderr)

    def test_csv_path_continues_an_interrupted_check(self):
        out = tempfile.mkdtemp(dir=WORK)
        p = self.run_cli("acc_check", "-api_info", self.dump, "-o", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        rpath = glob.glob(os.path.join(out, "accuracy_checking_result_*.csv"))[0]
        dpath = glob.glob(os.path.join(out, "accuracy_checking_details_*.csv"))[0]
        full_res, full_det = read_csv(rpath), read_csv(dpath)
        # interrupted after 4 APIs: the rows msprobe had written by then, one
        # marked error by hand so that the continued check must keep it
        head = full_res[:4]
        head[1] = dict(head[1], **{"Forward Test Success": "error"})
        kept = {r["API name"] for r in head}
        det_head = [r for r in full_det if r["API Name"].rsplit(".", 3)[0] in kept]
        for path, rows in ((rpath, head), (dpath, det_head)):
            with open(path, "w", newline="", encoding="utf-8") as f:
                w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
                w.writeheader()
                w.writerows(rows)
        other = tempfile.mkdtemp(dir=WORK)
        p = self.run_cli("acc_check", "-api_info", self.dump, "-o", other, "-csv_path", rpath)
        # the earlier error still fails the check; nothing is written to -o
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(os.listdir(other), [])
        self.assertIn("4 APIs of %s were checked before" % rpath, p.stdout)
        res, det = read_csv(rpath), read_csv(dpath)
        # the earlier rows as they were, then every other API once, in order
        self.assertEqual(res[:4], head)
        self.assertEqual([r["API name"] for r in res], [r["API name"] for r in full_res])
        self.assertEqual(res[4:], full_res[4:])
        self.assertEqual([r["API Name"] for r in det],
                         [r["API Name"] for r in det_head] +
                         [r["API Name"] for r in full_det if r not in det_head])
        # again: nothing left to check, nothing added
        p = self.run_cli("acc_check", "-api_info", self.dump, "--result_csv_path", rpath)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(read_csv(rpath), res)

    def test_save_error_data_saves_what_msprobe_saves_of_each_failed_api(self):
        import torch
        import msprobe_layout
        torch.manual_seed(7)
        x, y, g = torch.randn(5, 4), torch.randn(5, 4), torch.randn(5, 4)
        w = torch.randn(3, 4)
        bad = x * y * (1 + 2 ** -18)  # past mul's absolute threshold (rtol 2^-20)
        # as msprobe records them: x and y took a gradient in the run
        xg, yg = x.clone().requires_grad_(True), y.clone().requires_grad_(True)
        rd = msprobe_layout.write(os.path.join(WORK, "errdata"), [
            ("Torch.mul.0.forward", {"input_args": [xg, yg], "output": [bad]}),
            ("Functional.linear.0.forward", {"input_args": [x, w],
                                             "output": [torch.nn.functional.linear(x, w)]}),
            # MulBackward0 hands on the gradients of self and other
            ("Torch.mul.0.backward", {"input": [g], "output": [g * y, g * x]}),
        ], task="tensor", level="api")
        cwd = tempfile.mkdtemp(dir=WORK)
        p = self.run_cli("acc_check", "-api_info", os.path.join(rd, "dump.json"), "-o", "out",
                         "-save_error_data", cwd=cwd)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        stamp = glob.glob(os.path.join(cwd, "out", "accuracy_checking_result_*.csv"))[0][-18:-4]
        errdir = os.path.join(cwd, "ut_error_data" + stamp)  # msprobe's ./ut_error_data{time}
        self.assertIn("error data: ./ut_error_data%s (9 files)" % stamp, p.stdout)
        f64 = lambda t: t.detach().double().numpy()
        want = {  # the failed API only, forward and backward; linear passed
            "Torch.mul.0.forward.input.0.pt": x.detach().numpy(),
            "Torch.mul.0.forward.input.1.pt": y.detach().numpy(),
            "Torch.mul.0.forward.output.device.0.pt": bad.numpy(),
            "Torch.mul.0.forward.output.bench.0.pt": f64(x) * f64(y),
            "Torch.mul.0.backward.input.0.pt": g.numpy(),
            "Torch.mul.0.backward.output.device.0.pt": (g * y).detach().numpy(),
            "Torch.mul.0.backward.output.device.1.pt": (g * x).detach().numpy(),
            "Torch.mul.0.backward.output.bench.0.pt": f64(g) * f64(y),
            "Torch.mul.0.backward.output.bench.1.pt": f64(g) * f64(x),
        }
        got = sorted(os.listdir(errdir))
        self.assertEqual(got, sorted(want))
        for name, arr in want.items():
            with self.subTest(file=name):
                t = torch.load(os.path.join(errdir, name))
                self.assertEqual(t.dtype, torch.float64 if ".bench." in name else torch.float32)
                # float32 products are exact in float64: the benchmark is equal
                np.testing.assert_array_equal(t.numpy(), arr)

    def test_csv_path_must_be_an_acc_check_result_with_its_details(self):
        bad = os.path.join(WORK, "results.csv")
        with open(bad, "w") as f:
            f.write("API name,Forward Test Success,Backward Test Success,Message\n")
        p = self.run_cli("acc_check", "-api_info", self.dump, "-csv_path", bad)
        self.assertEqual((p.returncode, p.stdout), (2, ""))
        self.assertIn("accuracy_checking_result_YYYYmmddHHMMSS.csv", p.stderr)
        lone = os.path.join(tempfile.mkdtemp(dir=WORK), "accuracy_checking_result_20261203120000.csv")
        shutil.copy(bad, lone)
        p = self.run_cli("acc_check", "-api_info", self.dump, "-csv_path", lone)
        self.assertEqual((p.returncode, p.stdout), (2, ""))
        self.assertIn("accuracy_checking_details_20261203120000.csv", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
