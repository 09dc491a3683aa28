"""A statistics dump is small and exact: a record of resnet18's costs at most
200 bytes on disk, and every statistic read back with h5py by the layout
msprobe-dump(5) documents (STATISTICS DUMPS) equals what numpy and zlib
compute from the tensors the training script captured itself; a statistics
dump written before that layout (format_version 2, fixtures/stats_v2) is
still read, and compares equal to today's of the same seeded run."""
import csv
import json
import os
import subprocess
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "")
FIXTURE = os.path.join(dt.SOURCE, "fixtures", "stats_v2")

# resnet18, one step; hooks the script registers itself (not dumped) take
# every module call's inputs (before the call: ReLU works in place) and its
# own parameters, and its outputs, and compute their statistics with numpy
# in float64 and their CRC-32 with zlib, into stats.json.
RESNET = r"""
import json, sys, zlib
import numpy as np, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet18(num_classes=10)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
out, calls = {}, {}

def stats(t):
    a = t.detach().contiguous().numpy()
    x = a.astype(np.float64)
    return dict(dtype=str(t.dtype), shape=list(a.shape), max=float(x.max()), min=float(x.min()),
                mean=float(x.mean()), norm=float(np.sqrt((x * x).sum())),
                nan=int(np.isnan(x).sum()), inf=int(np.isinf(x).sum()), crc=zlib.crc32(a.tobytes()))

def pre(mod, args):
    name = mod._probe_name
    k = calls.get(name, 0)
    calls[name] = k + 1
    rec = out.setdefault("%s.forward.%d" % (name, k), {})
    for i, a in enumerate(args):
        if torch.is_tensor(a):
            rec["input.%d" % i] = stats(a)
    for p, v in mod.named_parameters(recurse=False):
        rec["parameters." + p] = stats(v)
    mod._probe_rec = rec

def post(mod, args, result):
    rs = result if isinstance(result, tuple) else (result,)
    for i, r in enumerate(rs):
        if torch.is_tensor(r):
            mod._probe_rec["output.%d" % i] = stats(r)

for path, mod in m.named_modules():
    mod._probe_name = "Module." + (path + "." if path else "") + type(mod).__name__
    mod.register_forward_pre_hook(pre)
    mod.register_forward_hook(post)
x, y = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))
opt.zero_grad()
torch.nn.functional.cross_entropy(m(x), y).backward()
opt.step()
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
"""


def read_compact(path):
    """(records {name: order}, rows [dict], root attrs), read with h5py as
    msprobe-dump(5), STATISTICS DUMPS, says and nothing else."""
    import h5py
    with h5py.File(path, "r") as f:
        root = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        s = [b.decode() for b in f["strings"][()].tobytes().split(b"\0")[:-1]]
        records = {s[r["name"]]: int(r["order"]) for r in f["records"][()]}
        v = f["values"][()]
        rows = [dict(record=s[r["record"]], role=s[r["role"]], dtype=s[r["dtype"]],
                     shape=[int(d) for d in r["shape"][:r["ndim"]]],
                     max=float(v[r["values"]]["max"]), min=float(v[r["values"]]["min"]),
                     mean=float(v[r["values"]]["mean"]), norm=float(v[r["values"]]["norm"]),
                     nan=int(v[r["values"]]["nan_count"]), inf=int(v[r["values"]]["inf_count"]),
                     crc=int(v[r["values"]]["crc32"]), device=s[r["device"]])
                for r in f["stats"][()]]
        tables = sorted(f)
    return records, rows, root, tables


class CompactStatistics(dt.ShimCase):
    def compare(self, bench, cmp):
        """The rows of result.csv of msprobe compare -b bench -c cmp."""
        out = self.path("cmp%d" % len(os.listdir(self.dir)))
        p = subprocess.run([BIN, "compare", "-b", bench, "-c", cmp, "-o", out, "--csv"],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(os.path.join(out, "result.csv"), newline="") as f:
            return list(csv.DictReader(f))

    def test_resnet18_records_small_and_every_statistic_exact(self):
        cfg = self.write_config(dt.config("./s", mode="module", steps="0", task="statistics"))
        with open(self.path("resnet.py"), "w") as f:
            f.write(RESNET)
        p = self.run_cmd([dt.PYTHON, self.path("resnet.py"), self.path("stats.json")], cfg)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        with open(self.path("stats.json")) as f:
            want = json.load(f)
        path = dt.dump_files(self.path("s"))[(0, 0)]
        records, rows, root, tables = read_compact(path)
        self.assertEqual((root["format_version"], root["task"]), (3, "statistics"))
        self.assertEqual(tables, ["attrs", "records", "stats", "strings", "values"])
        per_record = os.path.getsize(path) / len(records)
        self.assertGreater(len(records), 100)
        self.assertLessEqual(per_record, 200, "%d bytes, %d records: %.0f bytes a record"
                             % (os.path.getsize(path), len(records), per_record))
        self.assertEqual(set(r["record"] for r in rows) - set(records), set())
        checked = 0
        for r in rows:
            if ".forward." not in r["record"]:
                continue  # backward and optimizer records: no hook of the script's sees them
            with self.subTest(record=r["record"], role=r["role"]):
                w = want[r["record"]][r["role"]]
                self.assertEqual((r["dtype"], r["shape"], r["device"]), (w["dtype"], w["shape"], "cpu"))
                self.assertEqual((r["max"], r["min"], r["nan"], r["inf"], r["crc"]),
                                 (w["max"], w["min"], w["nan"], w["inf"], w["crc"]))
                self.assertTrue(np.isclose(r["mean"], w["mean"], rtol=1e-9, atol=1e-12))
                self.assertTrue(np.isclose(r["norm"], w["norm"], rtol=1e-9, atol=0))
                checked += 1
        # every tensor of every forward call the script saw, and no other
        self.assertEqual(checked, sum(len(v) for v in want.values()))
        self.assertGreater(checked, 200)

    def test_statistics_dump_of_the_older_layout_still_read(self):
        # fixtures/stats_v2: examples/train.py --steps 1 under msprobe before
        # the compact layout, with this very configuration
        settings = {"dump_mode": "mix", "dump_path": "./s", "dump_iter": "0",
                    "task": "statistics", "stack": False}
        cfg = self.write_config({"dump": {"common_dump_settings": settings, "api_list": []}})
        self.train(["--steps", "1"], cfg)
        import h5py
        old = os.path.join(FIXTURE, "step0", "rank0", "dump.h5")
        with h5py.File(old, "r") as f:
            self.assertEqual(int(f.attrs["format_version"]), 2)
            idx = {(r["record"].decode(), r["role"].decode()): r for r in f["index"][()]
                   if r["role"]}
        records, rows, root, _ = read_compact(dt.dump_files(self.path("s"))[(0, 0)])
        self.assertEqual(root["format_version"], 3)
        self.assertEqual(sorted((r["record"], r["role"]) for r in rows), sorted(idx))
        got = self.compare(FIXTURE, self.path("s"))
        # the rows the old file gives compared with itself, no fewer, no more
        self.assertEqual([g["NPU Name"] for g in got],
                         [g["NPU Name"] for g in self.compare(FIXTURE, FIXTURE)])
        self.assertGreater(len(got), 100)
        by_name = {rec + "." + role: (rec, role) for rec, role in idx}
        for g in got:
            name = g["Bench Name"]
            self.assertEqual(g["NPU Name"], name)
            key = by_name[name]
            with self.subTest(tensor=name):
                for col, field in (("max", "max"), ("min", "min"), ("mean", "mean"),
                                   ("l2norm", "norm")):
                    self.assertEqual(float(g["Bench " + col]), float(idx[key][field]))
                    self.assertEqual(float(g["NPU " + col]), float(idx[key][field]))

    def test_tables_that_lie_are_refused(self):
        # every number checked against the table it points into, and what the
        # tables say checked against itself, naming the file and the table
        import h5py
        cfg = self.write_config(dt.config("./s", mode="api", steps="0", task="statistics"))
        self.train(["--steps", "1"], cfg)
        good = dt.dump_files(self.path("s"))[(0, 0)]

        def rewrite(name, fn):
            def mutate(f):
                rows = f[name][()]
                rows = fn(rows)
                del f[name]
                f.create_dataset(name, data=rows)
            return mutate

        def role_out_of_range(rows):
            rows[0]["role"] = 10 ** 6
            return rows

        def record_unlisted(rows):
            rows[0]["record"] = 0  # the empty string: no record's name
            return rows

        def values_out_of_range(rows):
            rows[0]["values"] = 10 ** 6
            return rows

        def ndim_too_wide(rows):
            rows[0]["ndim"] = rows.dtype["shape"].shape[0] + 1
            return rows

        def name_under_two_numbers(f):
            # the first record's name again, as a new string of /strings,
            # named by a second /records row: one name, two string numbers
            strs, rows = f["strings"][()], f["records"][()]
            pieces = strs.tobytes().split(b"\0")[:-1]
            again = np.frombuffer(pieces[rows[0]["name"]] + b"\0", np.uint8)
            extra = rows[:1].copy()
            extra["name"] = len(pieces)
            extra["order"] = rows["order"].max() + 1
            for name, data in (("strings", np.concatenate([strs, again])),
                               ("records", np.concatenate([rows, extra]))):
                del f[name]
                f.create_dataset(name, data=data)

        cases = [
            ("stats", role_out_of_range, "/strings does not have"),
            ("stats", record_unlisted, "names a record /records does not list"),
            ("stats", lambda r: np.concatenate([r, r[:1]]), "has two rows"),
            ("stats", ndim_too_wide, "wider than the table's shape column"),
            ("stats", values_out_of_range, "names a row /values does not have"),
            ("records", lambda r: np.concatenate([r, r[:1]]), "is listed twice"),
            (None, name_under_two_numbers, "is listed twice"),
            ("strings", lambda r: r[:-1], "does not end with a NUL"),
        ]
        for name, fn, needle in cases:
            with self.subTest(table=name, needle=needle):
                bad = self.path("bad.h5")
                with open(good, "rb") as src, open(bad, "wb") as dst:
                    dst.write(src.read())
                with h5py.File(bad, "r+") as f:
                    (rewrite(name, fn) if name else fn)(f)
                p = subprocess.run([BIN, "ls", bad], capture_output=True, text=True, timeout=120)
                self.assertNotEqual(p.returncode, 0, p.stdout[-500:])
                self.assertIn(needle, p.stderr)
                self.assertIn(bad, p.stderr)
        p = subprocess.run([BIN, "ls", good], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)


if __name__ == "__main__":
    unittest.main()
