"""Report cells are valid UTF-8, cut on character boundaries, with U+FFFD for
invalid bytes: the helper checked against Python's decoder, then compare's
result.xlsx / result.csv and config_check's result.xlsx read back with
openpyxl and a strict UTF-8 decode."""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import unittest
import zipfile

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
import msp_h5dump  # noqa: E402
import numpy as np  # noqa: E402

BIN = os.environ.get("MSPROBE_BIN", "")
CLI = sys.argv.pop(1) if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else None
FFFD = "\ufffd"


def expected(raw, cap=0):
    """Python's decode with replacement (Unicode's maximal subparts), XML's
    forbidden characters replaced too, then cut to cap bytes on a boundary."""
    t = raw.decode("utf-8", errors="replace")
    t = "".join(FFFD if (ord(c) < 0x20 and c not in "\t\n\r") or c in "\ufffe\uffff" else c for c in t)
    if cap:
        t = t.encode()[:cap].decode("utf-8", errors="ignore")
    return t


def openpyxl_strings(path):
    import openpyxl
    wb = openpyxl.load_workbook(path, read_only=True)
    # chart sheets (error_flow) hold no cells
    out = [c for ws in wb.worksheets if hasattr(ws, "iter_rows")
           for row in ws.iter_rows(values_only=True) for c in row if isinstance(c, str)]
    wb.close()
    return out


@unittest.skipUnless(CLI, "needs the utf8_clean_cli driver")
class Helper(unittest.TestCase):
    def clean(self, items):
        data = b"".join(struct.pack("<II", len(s), cap) + s for s, cap in items)
        out = subprocess.run([CLI], input=data, capture_output=True, check=True).stdout
        res, i = [], 0
        while i < len(out):
            (n,) = struct.unpack_from("<I", out, i)
            res.append(out[i + 4:i + 4 + n])
            i += 4 + n
        return res

    def test_random_bytes_match_pythons_decoder(self):
        rng = random.Random(10)
        pieces = [b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80",
                  b"\xff", b"\x80", b"\xe2\x82", b"\x01", b"\xef\xbf\xbe", b"a", b"\t", b"\n"]
        items = []
        for _ in range(3000):
            s = b"".join(rng.choice(pieces) for _ in range(rng.randrange(0, 12)))
            s = s.replace(b"\0", b"")
            items.append((s, rng.choice([0, 0, 1, 2, 3, 5, 8])))
        for (s, cap), got in zip(items, self.clean(items)):
            self.assertEqual(got.decode("utf-8"), expected(s, cap), (s, cap))


class Reports(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def compare_alike(self, recs):
        """Two dumps of recs compared with --csv: the output directory."""
        b, c = os.path.join(self.d, "b.h5"), os.path.join(self.d, "c.h5")
        msp_h5dump.write_dump(b, recs)
        msp_h5dump.write_dump(c, recs)
        out = os.path.join(self.d, "out")
        r = subprocess.run([BIN, "compare", "-b", b, "-c", c, "-o", out, "--csv"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return out

    def test_compare_reports_with_invalid_and_overlong_names(self):
        bad = b"Functional.relu\xff\xfe.0.forward"
        long_name = "Functional.x" + "\u00e9" * 20000 + ".0.forward"
        recs = [(bad, 0, {"output.0": np.arange(4, dtype=np.float32)}),
                (long_name, 1, {"output.0": np.arange(3, dtype=np.float32)})]
        out = self.compare_alike(recs)
        cells = openpyxl_strings(os.path.join(out, "result.xlsx"))  # raises on invalid XML
        self.assertTrue(any(x.startswith("Functional.relu" + FFFD + FFFD + ".0.forward") for x in cells))
        # 12 ASCII bytes then 2-byte characters: 16377 of them fit in 32767 bytes.
        longest = max(cells, key=len)
        self.assertEqual(longest, "Functional.x" + "\u00e9" * 16377)
        with open(os.path.join(out, "result.csv"), "rb") as f:
            text = f.read().decode("utf-8")  # strict
        self.assertIn("Functional.relu" + FFFD + FFFD + ".0.forward", text)
        self.assertIn(long_name, text)  # csv has no cell cap: nothing cut

    def test_plain_ascii_names_at_the_edges(self):
        # Printable ASCII is written without cleaning or escaping, in one pass
        # (rep_sheet.c): what borders on that must still be cut, escaped or
        # cleaned. Each name is checked against its own expected text.
        long_ascii = "Functional." + "a" * 40000 + ".0.forward"
        names = [long_ascii, "Functional.a&b<c>d\"e'f.0.forward", "Functional.t\tab.0.forward",
                 "Functional.d\x7fel.0.forward", "Functional.tail.0.forward ", "Functional.c\x01tl.0.forward",
                 "Functional.x" + "a" * 32755 + "\u00e9.0.forward", "Functional.a,b.0.forward",
                 "Functional.a\"b.0.forward"]
        recs = [(n, i, {"output.0": np.arange(4 + i, dtype=np.float32)}) for i, n in enumerate(names)]
        out = self.compare_alike(recs)
        # result.csv has no cap: every name whole, cleaned, quoted where it must be
        import csv
        with open(os.path.join(out, "result.csv"), newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))[1:]
        self.assertEqual([row[:2] for row in rows], [[expected((n + ".output.0").encode())] * 2 for n in names])
        with open(os.path.join(out, "result.csv"), "rb") as fh:
            raw = fh.read()
        # RFC 4180: a field with a quote is quoted and its quote doubled
        self.assertIn(b'\r\n"Functional.a""b.0.forward.output.0","Functional.a""b.0.forward.output.0",', raw)
        import openpyxl
        wb = openpyxl.load_workbook(os.path.join(out, "result.xlsx"), read_only=True)  # raises on invalid XML
        # the details' NPU Name and Bench Name, and the summary's Name (the
        # rows rep_sheet.c writes), in record order
        det = [row[:2] for row in wb["details"].iter_rows(min_row=2, values_only=True)]
        summ = [row[2] for row in wb["summary"].iter_rows(min_row=2, values_only=True)]
        wb.close()
        self.assertEqual(det, [(expected((n + ".output.0").encode(), 32767),) * 2 for n in names])
        self.assertEqual(summ, [expected(n.encode(), 32767) for n in names])
        # the cut ASCII name is exactly the cap, and the one whose cap falls
        # inside its 2-byte character stops before it
        self.assertEqual(det[0][0], "Functional." + "a" * (32767 - 11))
        self.assertEqual(det[6][0], "Functional.x" + "a" * 32755)

    def test_config_check_report_with_invalid_env_values(self):
        raw = {"OMP_SURROGATE": b"a\xed\xa0\x80b", "OMP_CTRL": b"x\x01y\xef\xbf\xbez", "OMP_LATIN1": b"caf\xe9",
               "OMP_LONG": b"x" + "\u00fc".encode() * 20000}
        manifest = {"format": "msprobe-config-check", "format_version": 1, "tool": "msprobe", "tool_version": "x",
                    "kind": "static", "host": "h", "time": "2026-01-01T00:00:00Z", "rank": 0, "world_size": 1}
        packs = []
        for side in (b"", b"2"):
            body = b",".join(json.dumps(k).encode() + b':"' + v + side + b'"' for k, v in raw.items())
            p = os.path.join(self.d, "p%d.zip" % len(packs))
            with zipfile.ZipFile(p, "w") as z:
                z.writestr("manifest.json", json.dumps(manifest))
                z.writestr("env.json", b'{"salt":"none","hashed_keys":[],"vars":{' + body + b"}}")
            packs.append(p)
        out = os.path.join(self.d, "cc")
        r = subprocess.run([BIN, "config_check", "-c", packs[0], packs[1], "-o", out], capture_output=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        cells = openpyxl_strings(os.path.join(out, "result.xlsx"))
        for k, v in raw.items():
            for side in (b"", b"2"):
                self.assertIn(expected(v + side, 32000), cells, k)


if __name__ == "__main__":
    unittest.main()
