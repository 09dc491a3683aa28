"""msprobe-gen: the planted error sits where asked (checked with h5py and numpy),
later forward ops inherit it, and compare names the planted op as root cause."""
import os
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cmp_h5 as H  # noqa: E402

GEN = os.environ.get("MSPROBE_GEN") or os.path.join(
    os.environ.get("MSPROBE_BUILD_DIR", "build"), "bench", "compare", "msprobe-gen")
APIS = ["Functional.linear", "Torch.mul", "Tensor.mul", "Functional.gelu"]


def values(ds):
    if ds.attrs["dtype"] == "torch.bfloat16":
        raw = np.empty(ds.shape, dtype=np.uint16)
        ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=H.bf16_type())
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return ds[...].astype(np.float64)


class GeneratorCase(unittest.TestCase):
    def test_planted_error_and_root_cause(self):
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([GEN, "--out", d, "--steps", "1", "--ranks", "2", "--layers", "6",
                            "--numel", "1000", "--dtype", "bf16", "--plant", "3", "--plant-rank", "1",
                            "--magnitude", "0.2", "--seed", "3"], check=True)
            calls = {}
            fwd = []
            for k in range(6):
                a = APIS[k % 4]
                fwd.append(f"{a}.{calls.get(a, 0)}.forward")
                calls[a] = calls.get(a, 0) + 1
            for rank in (0, 1):
                with h5py.File(os.path.join(d, "bench", "step0", f"rank{rank}", "dump.h5")) as b, \
                        h5py.File(os.path.join(d, "npu", "step0", f"rank{rank}", "dump.h5")) as n:
                    self.assertEqual(b["Functional.linear.0.forward/output.0"].attrs["dtype"], "torch.float32")
                    for k, name in enumerate(fwd):
                        bo, no = values(b[name]["output.0"]), values(n[name]["output.0"])
                        # bf16 storage alone is within one rounding (2^-8 relative)
                        within = np.all(np.abs(no - bo) <= 2.0 ** -8 * np.abs(bo) + 1e-12)
                        self.assertEqual(within, not (rank == 1 and k >= 3), f"rank {rank} {name}")
                        self.assertTrue(np.array_equal(values(b[name]["input.0"]),
                                                       values(b[fwd[k - 1]]["output.0"])) if k else True)
                    self.assertIn("Functional.linear.0.backward", b)
            rows, s, _ = H.run_driver(os.path.join(d, "bench"), os.path.join(d, "npu"))
            self.assertEqual(s["root_record"], fwd[3])
            root = next(r for r in s["records"] if r["is_root_cause"])
            self.assertEqual((root["step"], root["rank"]), (0, 1))
            causes = [r["cause"] for r in s["records"] if r["rank"] == 1 and r["name"].endswith("forward")]
            self.assertEqual(causes, ["none"] * 3 + ["introduced"] + ["inherited"] * 2)


if __name__ == "__main__":
    unittest.main()
