"""task "statistics" writes no tensor data, only statistics, and those equal
what numpy computes from the values the script recorded itself."""
import os
import sys
import unittest
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

# Re-run by ctest with MSPROBE_TEST_DEVICE_STATS=1: every tensor takes the
# path of accelerator tensors, statistics computed by torch where the tensor
# lives and only they read (accel_copy.py stats()); no byte is read there, so
# the CRC-32 is 0, "not known".
DEVICE_PATH = os.environ.get("MSPROBE_TEST_DEVICE_STATS") == "1"


def close_stats(test, t, x):
    """mean and norm as documented: float64 on the host, exact to 1e-9; on a
    device, float32 sums per row or piece of a window (float16, bfloat16 and
    float32 tensors): mean within 1e-6 of mean(|x|), norm within 1e-6."""
    windowed = DEVICE_PATH and x.dtype in (np.float16, np.float32)  # bf16: saved as float32
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        mean, norm, scale = x.mean(), np.sqrt((x * x).sum()), np.abs(x).mean()
    if np.isnan(mean):
        test.assertTrue(np.isnan(float(t["mean"])))
    elif np.isinf(mean):
        test.assertEqual(float(t["mean"]), mean)
    elif windowed:
        test.assertLessEqual(abs(float(t["mean"]) - mean), 1e-6 * scale)
    else:
        test.assertTrue(np.isclose(float(t["mean"]), mean, rtol=1e-9, atol=1e-12))
    rtol = 1e-6 if windowed else 1e-9
    test.assertTrue(np.isclose(float(t["norm"]), norm, rtol=rtol, atol=0))

SPECIAL = r"""
import sys, numpy as np, torch
torch.manual_seed(0)
vals = {
    "f32": torch.randn(1000),
    "f32_nan": torch.tensor([1.0, float("nan"), -2.0, 3.0]),
    "f32_inf": torch.tensor([1.0, float("inf"), -2.0, float("-inf"), 5.0]),
    "f32_posinf": torch.tensor([1.0, float("inf"), -2.0]),
    "bf16": torch.randn(333).to(torch.bfloat16),
    "f16": (torch.randn(257) * 100).to(torch.float16),
    "f64": torch.randn(77, dtype=torch.float64),
    # float64, integers and bool share a float64 window on a device: a NaN or
    # Inf there is read again exactly, with its counts
    "f64_nan": torch.tensor([1.0, float("nan"), -2.0], dtype=torch.float64),
    "f64_inf": torch.tensor([1.0, float("inf"), -7.5, float("-inf")], dtype=torch.float64),
    "i64_big": torch.tensor([2 ** 52 + 1, -(2 ** 52) - 3, 5]),
    "i64": torch.randint(-1000, 1000, (500,)),
    "i32": torch.randint(-7, 9, (31,), dtype=torch.int32),
    "u8": torch.randint(0, 255, (64,), dtype=torch.uint8),
    "bool": torch.rand(50) > 0.5,
    "nc": torch.randn(8, 6).t(),
    "big": torch.randn(5000),          # larger than a window of the tests: alone
    "huge": torch.randn(100) * 1e20,   # float32 squares overflow: read again exactly
    "tiny": torch.randn(100) * 1e-25,  # float32 squares underflow: read again exactly
    # the same over whole rows of a window (64 elements in the tests), whose
    # mean of squares is float32, scaled on the host
    "huge_rows": torch.randn(1000) * 1e20,
    "tiny_rows": torch.randn(1000) * 1e-25,
}
order = sorted(vals)
opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
for step in range(2):
    for k in order:
        torch.clone(vals[k])
    opt.step()
np.savez(sys.argv[1], **{k: vals[k].float().numpy() if vals[k].dtype == torch.bfloat16
                         else vals[k].numpy() for k in order})
print(",".join(order))
"""


THREADS = r"""
import sys, threading, torch
N = 300
opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
def work(seed):
    g = torch.Generator().manual_seed(seed)
    for i in range(N):
        torch.clone(torch.randn(64, generator=g))
for step in range(3):
    ts = [threading.Thread(target=work, args=(step * 10 + k,)) for k in range(2)]
    for t in ts:
        t.start()
    for i in range(N):
        torch.clone(torch.full((8,), float(i)))
    for t in ts:
        t.join()
    opt.step()
"""


class Statistics(dt.ShimCase):
    def test_statistics_equal_numpy(self):
        # call sites off: they would give every record a group (checked below)
        c = dt.config("./s", mode="mix", steps="1", task="statistics")
        c["dump"]["common_dump_settings"]["stack"] = False
        cfg = self.write_config(c)
        self.train(["--steps", "2", "--record", "rec"], cfg)
        rec = np.load(self.path("rec", "record.npz"))
        files = dt.dump_files(self.path("s"))
        self.assertEqual(sorted(files), [(1, 0)])
        recs, root = dt.read_dump(files[(1, 0)])
        self.assertEqual(root["task"], "statistics")
        checked = 0
        for name, role, key in (("Functional.conv2d.0.forward", "output.0", "conv1.out"),
                                ("Functional.conv2d.0.forward", "input.1", "conv1.weight"),
                                ("Functional.relu.1.forward", "output.0", "relu2.out"),
                                ("Functional.linear.1.forward", "output.0", "fc2.out"),
                                ("Functional.conv2d.1.backward", "input.0", "conv2.grad_out"),
                                ("Functional.linear.0.backward", "output.1", "fc1.weight.grad"),
                                ("Module.fc1.Linear.forward.0", "output.0", "fc1.out")):
            with self.subTest(record=name, role=role):
                self.assertIn(role, recs[name])
                self.assertIsNone(recs[name][role], "statistics mode wrote tensor data")
                a = rec["step1/" + key]
                t = recs[name]["tattrs"][role]
                x = a.astype(np.float64)
                self.assertEqual(float(t["max"]), x.max())
                self.assertEqual(float(t["min"]), x.min())
                close_stats(self, t, a)
                self.assertEqual(int(t["nan_count"]), int(np.isnan(x).sum()))
                self.assertEqual(int(t["inf_count"]), int(np.isinf(x).sum()))
                self.assertEqual(int(t["crc32"]), 0 if DEVICE_PATH else zlib.crc32(a.tobytes()))
                self.assertEqual(list(t["shape"]), list(a.shape))
                checked += 1
        self.assertEqual(checked, 7)
        # statistics are /stats and /values rows alone, records /records rows, arguments
        # /attrs rows, the APIs' signatures /defaults rows (once a file), their
        # strings in /strings: no dataset besides the tables and no group
        # (~100 us saved a tensor, ~25 us a record; msprobe-dump(5))
        import h5py
        from msp_h5dump import record_attrs, stats_rows
        tables = ["attrs", "defaults", "records", "stats", "strings", "values"]
        with h5py.File(files[(1, 0)], "r") as f:
            datasets = []
            f.visititems(lambda n, o: datasets.append(n) if isinstance(o, h5py.Dataset) else None)
            self.assertEqual(sorted(datasets), tables)
            self.assertEqual(sorted(f), tables)
            # no arguments: only the names of the parameters it was passed (the
            # trainer's fc2, F.linear's inputs 1 and 2)
            self.assertEqual(record_attrs(f).get("Functional.linear.1.forward"),
                             {"param.input.1": "fc2.weight", "param.input.2": "fc2.bias"})
            self.assertIn("Functional.linear.1.forward", {r["record"] for r in stats_rows(f)})
        # with call sites, the records that had no arguments carry their "stack"
        c["dump"]["common_dump_settings"]["stack"] = True
        c["dump"]["common_dump_settings"]["dump_path"] = "./s2"
        self.train(["--steps", "2", "--record", "rec2"], self.write_config(c, name="s2.json"))
        with h5py.File(dt.dump_files(self.path("s2"))[(1, 0)], "r") as f:
            self.assertIn("stack", record_attrs(f)["Functional.linear.1.forward"])

    def test_special_values_and_every_dtype(self):
        # NaN (all four statistics NaN, as torch's), +-Inf, 16-bit floats,
        # integers, bool (as 0/1) and a transposed (non-contiguous) tensor,
        # against numpy over the values the script saved
        cfg = self.write_config(dt.config("./s", mode="api", steps="1", task="statistics",
                                          api_list=[("torch.clone", "forward")]))
        with open(self.path("special.py"), "w") as f:
            f.write(SPECIAL)
        p = self.run_cmd([dt.PYTHON, self.path("special.py"), self.path("vals.npz")], cfg)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        order = p.stdout.strip().split(",")
        vals = np.load(self.path("vals.npz"))
        files = dt.dump_files(self.path("s"))
        recs, _ = dt.read_dump(files[(1, 0)])
        # records are written in call order (the device path holds them back
        # until their statistics are in, and must keep the order)
        import h5py
        from msp_h5dump import stats_rows
        with h5py.File(files[(1, 0)], "r") as f:
            rows = [r["order"] for r in stats_rows(f)]
        self.assertEqual(rows, sorted(rows))
        self.assertEqual(sorted(recs), sorted("Torch.clone.%d.forward" % i
                                              for i in range(len(order))))
        for i, key in enumerate(order):
            with self.subTest(tensor=key):
                t = recs["Torch.clone.%d.forward" % i]["tattrs"]["input.0"]
                x = vals[key].astype(np.float64)
                nan = int(np.isnan(x).sum())
                self.assertEqual(int(t["nan_count"]), nan)
                self.assertEqual(int(t["inf_count"]), int(np.isinf(x).sum()))
                if nan:
                    for k in ("max", "min", "mean", "norm"):
                        self.assertTrue(np.isnan(float(t[k])), k)
                    continue
                self.assertEqual(float(t["max"]), x.max())
                self.assertEqual(float(t["min"]), x.min())
                close_stats(self, t, vals[key])
                if key != "bf16":  # saved as float32 above: not its bytes
                    # tobytes() is C order, the order the dump's bytes are in
                    self.assertEqual(int(t["crc32"]),
                                     0 if DEVICE_PATH else zlib.crc32(vals[key].tobytes()))

    def test_three_threads_calling_at_once(self):
        # Under MSPROBE_TEST_DEVICE_STATS a record waits for its statistics,
        # polled from every thread that records (and the poll lets other
        # threads run): the shim crashed (SIGSEGV) here before it found its
        # queue again by index after each poll. Every record is written, in
        # order, with the main thread's values (i repeated 8 times) intact.
        cfg = self.write_config(dt.config("./s", mode="api", steps="all", task="statistics",
                                          api_list=[("torch.clone", "forward")]))
        with open(self.path("threads.py"), "w") as f:
            f.write(THREADS)
        p = self.run_cmd([dt.PYTHON, self.path("threads.py")], cfg)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        import h5py
        from msp_h5dump import stats_rows
        files = dt.dump_files(self.path("s"))
        self.assertEqual(sorted(files), [(0, 0), (1, 0), (2, 0)])
        for key in sorted(files):
            with h5py.File(files[key], "r") as f:
                idx = stats_rows(f)
            self.assertEqual(len(idx), 900 * 2)  # 3 threads x 300 calls, input and output
            order = [r["order"] for r in idx]
            self.assertEqual(order, sorted(order))
            consts = sorted({float(r["max"]) for r in idx
                             if int(r["shape"][0]) == 8 and r["max"] == r["min"]})
            self.assertEqual(consts, [float(i) for i in range(300)])
            for r in idx:
                if int(r["shape"][0]) == 8 and r["max"] == r["min"]:
                    self.assertEqual(float(r["mean"]), float(r["max"]))
                    self.assertTrue(np.isclose(float(r["norm"]), np.sqrt(8) * float(r["max"])))


LAUNCHES = r"""
import sys, torch, torchvision
from torch.profiler import profile, ProfilerActivity
torch.manual_seed(0)
m = torchvision.models.resnet18(num_classes=10)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x, y = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))
for step in range(2):
    if step == 1:
        prof = profile(activities=[ProfilerActivity.CPU])
        prof.__enter__()
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(x), y).backward()
    opt.step()
prof.__exit__(None, None, None)
counts = {}
for e in prof.events():
    counts[e.name] = counts.get(e.name, 0) + 1
for k in ("aten::aminmax", "aten::var_mean", "aten::cat", "aten::isnan", "aten::as_strided",
          "aten::reshape", "aten::sqrt", "aten::mul", "aten::lift_fresh"):
    print(k, counts.get(k, 0))
"""


class FewLaunches(dt.ShimCase):  # run by the device-path configuration only (below)
    def test_statistics_of_many_tensors_in_few_reductions(self):
        # Device statistics are reduced a window at a time, not a tensor at a
        # time (about ten launches each: aminmax, sum, norm, isnan, isinf...):
        # with a window of 64 MiB, one step of resnet18 (~700 tensors) takes a
        # handful of aminmax and var_mean, no isnan, and a copy (cat) per call
        # that writes into what it is given (batch norm, ReLU(inplace=True),
        # +=): the other calls' tensors wait for those copies (about 80 for
        # ~45 such calls a step, where each call's inputs and outputs took one
        # each before: ~590). The integers (each BatchNorm's num_batches_tracked
        # and its add_(1), the labels) wait in their float64 window, copied when
        # an add_ writes one: about 96 cats a step in all, 116 when they were
        # copied at each call. Counted by torch's profiler in the training
        # process itself; torch.stack counts as a cat too.
        cfg = self.write_config(dt.config("./s", mode="api", steps="1", task="statistics"))
        with open(self.path("launches.py"), "w") as f:
            f.write(LAUNCHES)
        p = self.run_cmd([dt.PYTHON, self.path("launches.py")], cfg,
                         env_extra={"MSPROBE_DEVICE_STATS_MB": "64"})
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        n = {ln.split()[0]: int(ln.split()[1]) for ln in p.stdout.splitlines() if ln.startswith("aten::")}
        import h5py
        from msp_h5dump import stats_rows
        files = dt.dump_files(self.path("s"))
        with h5py.File(files[(1, 0)], "r") as f:
            idx = stats_rows(f)
        tensors = sum(1 for r in idx if r["role"])
        self.assertGreater(tensors, 500)
        # the copies flatten what is not already one-dimensional: about 40%
        # of the tensors (batch norm's weights, biases and running stats, their
        # grads and momenta) go into cat as they are, without a reshape each
        # (545 a step before, 299 now)
        not_1d = sum(1 for r in idx if r["role"] and len(r["shape"]) != 1)
        self.assertLess(not_1d, tensors * 3 // 4)
        self.assertLessEqual(n["aten::reshape"], not_1d, n)
        # a window's reduction launches what must run on the device: sums
        # from means and the roots of sums of squares are the host's, in
        # float64 (resnet18 and SGD call neither mul nor sqrt themselves; the
        # pieces' squares are the one mul a window)
        self.assertEqual(n["aten::sqrt"], 0, n)
        self.assertLessEqual(n["aten::mul"], n["aten::var_mean"], n)
        # the rows and pieces of a window reach torch as a buffer of int64s,
        # not as lists parsed by torch.tensor (which lifts each: lift_fresh)
        self.assertEqual(n["aten::lift_fresh"], 0, n)
        # resnet18 at 32x32, batch 2: ~70 M float elements a step (weights, their
        # gradients, momentum...), 16 M a window
        # integer tensors (the labels, every BatchNorm's num_batches_tracked
        # before and after its add_(1): 41 a step) go to a float64 window
        # too: no tensor is reduced alone (about ten launches each)
        self.assertLessEqual(n["aten::aminmax"], 20, n)
        self.assertLessEqual(n["aten::var_mean"], 20, n)
        self.assertEqual(n["aten::isnan"], 0, n)
        self.assertLessEqual(n["aten::cat"], tensors // 6, n)
        # a tensor's shape, device and address are read without DLPack, whose
        # export made a view (as_strided) of each: ~1070 a step before, ~380
        # now (the flat views the copies take, and the model's own 7)
        self.assertLessEqual(n["aten::as_strided"], tensors // 3, n)


if not DEVICE_PATH:
    del FewLaunches

if __name__ == "__main__":
    unittest.main()
