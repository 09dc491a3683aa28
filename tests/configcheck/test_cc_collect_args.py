"""The in-process collector records what the script's argparse parsed (as the
script last saw it) and the function of each seed call, so config_check can
compare named hyperparameters and group seeds by call site. Real runs under
the real preload shim; packs read back with zipfile/json, reports with openpyxl."""
import os
import tempfile
import unittest

from cc_testlib import PRELOAD, msprobe, read_member, run_under_shim, sheet_rows

SCRIPT = r'''
import argparse, torch
def seed_everything(s):
    torch.manual_seed(s)
def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lr", "--learning_rate", dest="lr", type=float, default=0.1)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--api-token", default="")
    p.add_argument("--out", default=".")
    args = p.parse_args()
    args.batch = args.batch * 2          # adjusted after parsing: the run trains with 8
    seed_everything(3)
    net = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    net(torch.ones(args.batch, 3)).sum().backward()
    opt.step()
main()
'''


@unittest.skipUnless(PRELOAD and os.path.exists(PRELOAD), "the dump shim (msprobe_preload) is not built")
class CollectorRecordsParsedArguments(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.script = os.path.join(self.d, "train_args.py")
        with open(self.script, "w") as f:
            f.write(SCRIPT)

    def tearDown(self):
        self.tmp.cleanup()

    def run_pack(self, name, *argv):
        z = os.path.join(self.d, name)
        r = run_under_shim([self.script] + list(argv), z, self.d)
        self.assertEqual(r.returncode, 0, r.stderr)
        return z

    def test_namespace_as_the_script_left_it_with_secrets_hidden(self):
        z = self.run_pack("a.zip", "--lr", "1e-3", "--api-token", "tok-abc123", "--out", "/tmp/a")
        hyper = read_member(z, "hyperparameters.json")
        self.assertEqual(hyper["namespaces"], [{"lr": 0.001, "batch": 8, "api_token": "<secret: not stored>",
                                                "out": "/tmp/a"}])
        calls = read_member(z, "random.json")["calls"]
        seeds = [c for c in calls if c["api"] == "torch.manual_seed"]
        self.assertEqual([(c["function"], c["value"]) for c in seeds], [("seed_everything", "3")])
        with zipfile_text(z) as text:
            self.assertNotIn("tok-abc123", text)

    def test_spellings_of_one_option_pass_and_a_value_difference_fails(self):
        a = self.run_pack("a.zip", "--lr", "1e-3", "--out", "/tmp/a")
        b = self.run_pack("b.zip", "--learning_rate", "0.001", "--out", "/tmp/b")
        c = self.run_pack("c.zip", "--lr", "0.002", "--out", "/tmp/a")
        res = msprobe("config_check", "-c", a, b, "-o", os.path.join(self.d, "ab"))
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        res = msprobe("config_check", "-c", a, c, "-o", os.path.join(self.d, "ac"))
        self.assertEqual(res.returncode, 1, res.stdout + res.stderr)
        rows = {r["name"]: r for r in sheet_rows(os.path.join(self.d, "ac", "result.xlsx"), "hyperparameters")}
        self.assertIs(rows["namespaces[0].learning_rate"]["equal"], False)
        self.assertEqual((rows["namespaces[0].learning_rate"]["bench_value"],
                          rows["namespaces[0].learning_rate"]["cmp_value"]), ("0.001", "0.002"))


class zipfile_text:
    """Every member of a pack as one string (to search for a secret in clear)."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        import zipfile
        with zipfile.ZipFile(self.path) as z:
            return "".join(z.read(n).decode("utf-8", "replace") for n in z.namelist())

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    unittest.main()
