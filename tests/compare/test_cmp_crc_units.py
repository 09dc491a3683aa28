"""Compare checks each tensor's bytes against the CRC-32 its file stores,
computing the CRC as it compares, a unit at a time, and joining the units'
CRCs with zlib's crc32_combine (issue 42). A tensor of one unit (every small
tensor) needs no join: its CRC is its unit's. zlib's combine, about 800
instructions, was called twice for every small tensor, a fortieth of
compare's work on small packed tensors.

msprobe-gen's dumps (bf16 against float32) of small packed tensors and of
large ones (several units each), compared by cmp_dump_metrics with a library
preloaded (fmt_zlib_count.c) that logs each crc32_combine call:
  - small tensors: no call (5a110a0 made two a tensor); large: some;
  - every stored CRC passes: no row says its data fails the check;
  - one byte changed in the last bytes of one compare-side tensor, small and
    large: that row, and only that row, says "NPU tensor data fails its
    CRC-32 check (file says X, data read Y)" with X the CRC h5py reads from
    /index and Y zlib.crc32 of the changed bytes."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zlib

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
from msp_build import GEN, sanitized_build  # noqa: E402

METRICS = os.environ.get("CMP_DUMP_METRICS", "")
COUNTER = None  # fmt_zlib_count's path, from the command line
FAILS = "NPU tensor data fails its CRC-32 check (file says %08x, data read %08x)"


class CrcUnits(unittest.TestCase):
    def setUp(self):
        if not os.access(GEN, os.X_OK):
            self.skipTest("no msprobe-gen (MSPROBE_BENCH=OFF)")
        self.work = tempfile.mkdtemp(prefix="msp-crc-units-")
        self.addCleanup(shutil.rmtree, self.work, True)

    def gen(self, name, layers, numel, pack):
        out = os.path.join(self.work, name)
        subprocess.run([GEN, "--out", out, "--steps", "1", "--ranks", "1", "--layers",
                        str(layers), "--numel", str(numel), "--dtype", "bf16", "--seed", "3",
                        "--pack-kib", str(pack)], check=True, stdout=subprocess.DEVNULL)
        return [os.path.join(out, side, "step0", "rank0", "dump.h5") for side in ("bench", "npu")]

    def compare(self, bench, npu):
        """(rows by npu_name, crc32_combine calls)"""
        log = os.path.join(self.work, "zlib.log")
        if os.path.exists(log):
            os.unlink(log)
        env = dict(os.environ, MSP_ZLIB_COUNT_LOG=log)
        if COUNTER and not sanitized_build():
            env["LD_PRELOAD"] = COUNTER
        p = subprocess.run([METRICS, bench, npu], capture_output=True, text=True, timeout=600,
                           env=env)
        self.assertEqual(p.returncode, 0, p.stdout[-500:] + p.stderr)
        rows = {}
        for line in p.stdout.splitlines():
            r = json.loads(line)
            if "npu_name" in r:
                rows[r["npu_name"]] = r
        calls = None
        if "LD_PRELOAD" in env:
            calls = 0
            if os.path.exists(log):
                with open(log) as f:
                    calls = sum(1 for line in f if line.split()[0] == "crc32_combine")
        return rows, calls

    def flip_last_bytes(self, path):
        """one byte near the end of the largest tensor with data changed:
        (its row's name, the CRC /index stores, zlib's CRC of the new bytes)"""
        with h5py.File(path, "r") as f:
            rows = [r for r in f["index"][()] if r["has_data"] and r["nbytes"] > 0]
        r = max(rows, key=lambda r: (int(r["nbytes"]), -int(r["offset"])))
        at, n = int(r["offset"]), int(r["nbytes"])
        with open(path, "r+b") as fh:
            fh.seek(at)
            data = bytearray(fh.read(n))
            data[n - 3] ^= 0x10
            fh.seek(at)
            fh.write(data)
        name = "%s.%s" % (r["record"].decode(), r["role"].decode())
        return name, int(r["crc32"]), zlib.crc32(bytes(data))

    def check(self, bench, npu, tensors, small):
        rows, calls = self.compare(bench, npu)
        self.assertEqual(len(rows), tensors)
        if calls is not None:
            if small:
                self.assertEqual(calls, 0)
            else:
                self.assertGreater(calls, 0)
        for name, r in rows.items():
            self.assertNotIn("CRC-32", r["err_message"] or "", name)
        name, stored, now = self.flip_last_bytes(npu)
        self.assertNotEqual(stored, now)
        rows, _ = self.compare(bench, npu)
        for other, r in rows.items():
            if other != name:
                self.assertNotIn("CRC-32", r["err_message"] or "", other)
        self.assertIn(FAILS % (stored, now), rows[name]["err_message"])

    def test_small_packed_tensors(self):
        bench, npu = self.gen("small", 30, 1024, 64)
        with h5py.File(npu, "r") as f:
            self.assertIn("packed", f)
            tensors = sum(1 for r in f["index"][()] if r["has_data"])
        self.check(bench, npu, tensors, True)

    def test_large_tensors_of_several_units(self):
        bench, npu = self.gen("large", 2, 3_000_000, 0)  # 12 MB float32 against 6 MB bf16
        with h5py.File(npu, "r") as f:
            tensors = sum(1 for r in f["index"][()] if r["has_data"])
        self.check(bench, npu, tensors, False)


if __name__ == "__main__":
    COUNTER = sys.argv.pop(1)
    unittest.main()
