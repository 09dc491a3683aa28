"""The reader helper inflates a statistics dump's tables itself (issue 42).
A statistics file's catalogue is four deflated tables (msprobe-dump(5),
STATISTICS DUMPS), about 1 MB for 5,000 records; libhdf5 inflated them
through zlib, a sixth of the helper's CPU time. The helper now reads each
chunk as stored and inflates it with ISA-L, three times as fast, and
converts the rows as libhdf5 would; a table stored any other way (here:
shuffled, then deflated, as h5py writes it when asked) still goes through
libhdf5 and zlib.

A library preloaded into the helper (fmt_zlib_count.c, through a wrapper
named by MSPROBE_CATALOGUE_HELPER, which logs each start) logs every call
to zlib's inflate() in a helper process. `msprobe ls` of msprobe's own file must make none, in a
server's children and in a helper per file; of the rewritten file, some
(so that the count is known to work). Both listings must say what h5py
reads in the tables: every record, role, dtype, shape and statistic."""
import os
import re
import shutil
import sys
import unittest

import h5py

from msp_build import sanitized_build, statistics_dump
from msp_h5dump import stats_rows

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fmt_counted import ls_counted  # noqa: E402

COUNTER = None  # fmt_zlib_count's path, from the command line

ROW = re.compile(r"^    (\S+)\s+(\S+)\s+\[([0-9, ]*)\]\s+max=(\S+)\s+min=(\S+)\s+mean=(\S+)\s+"
                 r"norm=(\S+)\s+nan=(\d+) inf=(\d+)")
RECORD = re.compile(r"^  (\S+)  order=(-?\d+)")


def listed(text):
    """(record, role, order, dtype, shape, max, min, mean, norm, nan, inf) of
    each tensor line of `msprobe ls`"""
    out, record, order = [], None, None
    for line in text.splitlines():
        m = RECORD.match(line)
        if m:
            record, order = m.group(1), int(m.group(2))
            continue
        m = ROW.match(line)
        if m:
            shape = tuple(int(x) for x in m.group(3).replace(" ", "").split(",") if x)
            out.append((record, m.group(1), order, m.group(2), shape) +
                       tuple(float(m.group(k)) for k in range(4, 8)) +
                       (int(m.group(8)), int(m.group(9))))
    return out


def rewrite_shuffled(src, dst):
    """dst: src with each non-empty table stored shuffled, then deflated
    (two filters: libhdf5's own pipeline reads it)"""
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        for name in ("strings", "records", "stats", "values"):
            data = f[name][()]
            del f[name]
            f.create_dataset(name, data=data, chunks=(min(len(data), 4096),), shuffle=True,
                             compression="gzip", compression_opts=1)


class TablesInflatedByTheHelper(unittest.TestCase):
    def setUp(self):
        if sanitized_build():
            self.skipTest("a preloaded library cannot come before AddressSanitizer's runtime")
        # 2,500 layers: 5,000 records; /strings in two chunks, the second part-filled
        self.work, self.ours = statistics_dump(self, "msp-tables-inflate-")
        self.shuffled = os.path.join(self.work, "shuffled.h5")
        rewrite_shuffled(self.ours, self.shuffled)

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def ls(self, path, server):
        """`msprobe ls path` through the counting helper: its output and the
        (helpers started, inflate calls in them) that the log says"""
        out, lines = ls_counted(self, self.work, COUNTER, "MSP_ZLIB_COUNT_LOG", path, server)
        words = [w[0] for w in lines]
        return out, (words.count("start"), words.count("inflate"))

    def expected(self, path):
        with h5py.File(path, "r") as f:
            rows = stats_rows(f)
        return [(r["record"], r["role"], r["order"], r["dtype"], r["shape"], r["max"], r["min"],
                 r["mean"], r["norm"], r["nan_count"], r["inf_count"]) for r in rows]

    def assert_lists(self, text, want):
        got = listed(text)
        self.assertEqual(len(got), 12500)
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertEqual(g[:5], w[:5])
            self.assertEqual(g[9:], w[9:])
            for a, b in zip(g[5:9], w[5:9]):  # ls prints six significant digits
                self.assertLessEqual(abs(a - b), 1e-5 * max(abs(b), 1e-30), (g, w))

    def test_msprobes_tables_are_not_inflated_by_zlib(self):
        want = self.expected(self.ours)
        for server in (True, False):
            text, (procs, inflates) = self.ls(self.ours, server)
            self.assertGreaterEqual(procs, 1)
            self.assertEqual(inflates, 0, "server" if server else "helper per file")
            self.assert_lists(text, want)

    def test_tables_stored_otherwise_are_read_by_libhdf5(self):
        self.assertEqual(self.expected(self.shuffled), self.expected(self.ours))
        ours, _ = self.ls(self.ours, True)
        text, (procs, inflates) = self.ls(self.shuffled, True)
        self.assertGreater(inflates, 0)
        self.assert_lists(text, self.expected(self.ours))
        # the very same listing, but for the path in its header line
        self.assertEqual(text.split("\n", 1)[1], ours.split("\n", 1)[1])


if __name__ == "__main__":
    COUNTER = sys.argv.pop(1)
    unittest.main()
