"""merge_result against hostile input: a compare result workbook whose sheet
XML, shared strings or workbook parts are cut, flipped or swapped, and config
files mutated byte by byte. Every run must end with exit status 0 or 2 (never
a signal), say nothing on stdout when it fails, and name the problem on one
stderr line starting with "msprobe:". Deterministic (seeded); under the
ASan+UBSan build this is where a bad read would show."""
import os
import random
import shutil
import subprocess
import tempfile
import unittest
import zipfile

import openpyxl

BIN = os.environ.get("MSPROBE_BIN", "msprobe")
HEADER = ["NPU Name", "Bench Name", "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr",
          "One Thousandth Err Ratio", "Five Thousandths Err Ratio", "Accuracy Reached or Not"]
CFG = b"api:\n  - Distributed.all_reduce\ncompare_index: [Cosine, 'MaxAbsErr']\n"


def setUpModule():
    global WORK, GOOD
    WORK = tempfile.mkdtemp(prefix="msp-merge-hostile-")
    GOOD = os.path.join(WORK, "good.xlsx")
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(HEADER)
    for i in range(6):
        ws.append(["Distributed.all_reduce.%d.forward.output.0" % i, "x &<> \"q\"", 0.99 - i / 100,
                   0.1 * i, 1e-3 * i, "N/A", 1.0, 1.0, "Yes"])
    wb.save(GOOD)


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


def run(book_bytes, cfg_bytes, tag):
    d = os.path.join(WORK, tag)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "compare_result_rank3-rank3_20250101120000.xlsx"), "wb") as f:
        f.write(book_bytes)
    cfg = os.path.join(WORK, tag + ".yaml")
    with open(cfg, "wb") as f:
        f.write(cfg_bytes)
    return subprocess.run([BIN, "merge_result", "-i", d, "-o", os.path.join(WORK, tag + "-out"),
                           "-config", cfg], capture_output=True, timeout=60)


def rezip(members):
    path = os.path.join(WORK, "tmp.xlsx")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            z.writestr(name, data)
    with open(path, "rb") as f:
        return f.read()


class Hostile(unittest.TestCase):
    def check(self, p, what):
        self.assertIn(p.returncode, (0, 2), (what, p.returncode, p.stderr[-500:]))
        if p.returncode:
            self.assertEqual(p.stdout, b"", what)
            lines = p.stderr.decode("utf-8", "replace").splitlines()
            self.assertEqual(len(lines), 1, (what, p.stderr))
            self.assertTrue(lines[0].startswith("msprobe: "), (what, p.stderr))

    def test_the_untouched_workbook_merges(self):
        with open(GOOD, "rb") as f:
            p = run(f.read(), CFG, "good")
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_mutated_parts_of_the_workbook(self):
        rnd = random.Random(2705)
        with zipfile.ZipFile(GOOD) as z:
            members = [(n, z.read(n)) for n in z.namelist()]
        targets = [i for i, (n, _) in enumerate(members)
                   if n.startswith("xl/worksheets/") or n in ("xl/sharedStrings.xml",
                                                              "xl/workbook.xml",
                                                              "xl/_rels/workbook.xml.rels")]
        self.assertTrue(targets)
        for k in range(160):
            mut = list(members)
            i = rnd.choice(targets)
            name, data = mut[i]
            data = bytearray(data)
            how = rnd.randrange(5)
            if how == 0:  # cut short
                data = data[:rnd.randrange(len(data))]
            elif how == 1:  # flip bytes
                for _ in range(rnd.randrange(1, 20)):
                    data[rnd.randrange(len(data))] = rnd.randrange(256)
            elif how == 2:  # a large shared-string index, a far column
                data = data.replace(b"<v>0</v>", b"<v>99999999999</v>", 1).replace(
                    b'r="A', b'r="XFZZ', 1)
            elif how == 3:  # tags that never close
                data = data.replace(b"</c>", b"", rnd.randrange(1, 4)).replace(b"</row>", b"", 1)
            else:  # entities out of range
                data = data.replace(b"Distributed", b"&#x110000;&#99999999;&amp", 1)
            mut[i] = (name, bytes(data))
            p = run(rezip(mut), CFG, "m%d" % k)
            self.check(p, "member %s mutation %d" % (name, how))

    def test_not_a_zip_at_all(self):
        for k, data in enumerate([b"", b"PK\x03\x04", os.urandom(300), b"<xml/>" * 50]):
            self.check(run(data, CFG, "nz%d" % k), "not a zip %d" % k)

    def test_mutated_configs(self):
        rnd = random.Random(27)
        with open(GOOD, "rb") as f:
            book = f.read()
        for k in range(120):
            cfg = bytearray(CFG)
            for _ in range(rnd.randrange(1, 6)):
                op = rnd.randrange(3)
                at = rnd.randrange(len(cfg) + 1)
                if op == 0 and cfg:
                    del cfg[min(at, len(cfg) - 1)]
                elif op == 1:
                    cfg[at:at] = bytes([rnd.choice(b"-:[]'\"#,\n \t\x00\xff")])
                else:
                    cfg[at:at] = b"x" * rnd.randrange(1, 5000)
            self.check(run(book, bytes(cfg), "c%d" % k), "config %r" % bytes(cfg[:80]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
