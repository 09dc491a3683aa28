"""merge_result against hostile input: a compare result workbook whose sheet
XML, shared strings or workbook parts are cut, flipped or swapped, and config
files mutated byte by byte. Every run must end with exit status 0 or 2 (never
a signal), say nothing on stdout when it fails, and name the problem on one
stderr line starting with "msprobe:". Deterministic (seeded); under the
ASan+UBSan build this is where a bad read would show."""
import io
import os
import random
import re
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
    global WORK, GOOD, GOOD_SST
    WORK = tempfile.mkdtemp(prefix="msp-merge-hostile-")
    GOOD = os.path.join(WORK, "good.xlsx")
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(HEADER)
    for i in range(6):
        ws.append(["Distributed.all_reduce.%d.forward.output.0" % i, "x &<> \"q\"", 0.99 - i / 100,
                   0.1 * i, 1e-3 * i, "N/A", 1.0, 1.0, "Yes"])
    wb.save(GOOD)
    GOOD_SST = os.path.join(WORK, "good_sst.xlsx")
    with zipfile.ZipFile(GOOD) as z:
        members = [(n, z.read(n)) for n in z.namelist()]
    with open(GOOD_SST, "wb") as f:
        f.write(rezip(shared_strings(members)))


def shared_strings(members, first_item=None):
    """The workbook's inline strings moved to xl/sharedStrings.xml, as
    msprobe's pandas/xlsxwriter workbooks hold them (Debian's openpyxl 3.0
    writes inline strings); first_item replaces the first string item."""
    items = []

    def to_index(m):
        items.append(first_item if first_item and not items else m.group(2))
        return b'%s t="s"><v>%d</v></c>' % (m.group(1), len(items) - 1)

    out = []
    for name, data in members:
        if name.startswith("xl/worksheets/"):
            data = re.sub(rb'(<c r="[A-Z]+[0-9]+") t="inlineStr"><is>(.*?)</is></c>', to_index, data)
        elif name == "[Content_Types].xml":
            data = data.replace(b"</Types>", b'<Override PartName="/xl/sharedStrings.xml" ContentType='
                                b'"application/vnd.openxmlformats-officedocument.spreadsheetml.'
                                b'sharedStrings+xml"/></Types>')
        elif name == "xl/_rels/workbook.xml.rels":
            data = data.replace(b"</Relationships>", b'<Relationship Type="http://schemas.openxml'
                                b'formats.org/officeDocument/2006/relationships/sharedStrings" '
                                b'Target="sharedStrings.xml" Id="rId9"/></Relationships>')
        out.append((name, data))
    sst = (b'<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="%d" '
           b'uniqueCount="%d">' % (len(items), len(items)) +
           b"".join(b"<si>" + i + b"</si>" for i in items) + b"</sst>")
    return out + [("xl/sharedStrings.xml", sst)]


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
        self.mutate(GOOD, random.Random(2705), "m")

    def test_mutated_parts_of_a_workbook_with_shared_strings(self):
        self.mutate(GOOD_SST, random.Random(3901), "s")

    def mutate(self, good, rnd, tag):
        with zipfile.ZipFile(good) as z:
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
            p = run(rezip(mut), CFG, "%s%d" % (tag, k))
            self.check(p, "member %s mutation %d" % (name, how))

    def members(self):
        with zipfile.ZipFile(GOOD) as z:
            return [(n, z.read(n)) for n in z.namelist()]

    def test_a_cut_sheet_is_refused_not_merged_in_part(self):
        # before expat read the sheet, the rows before the cut were merged
        # and the run succeeded
        mut = [(n, d[:d.index(b"<row r=\"5\"") + 30] if n.startswith("xl/worksheets/") else d)
               for n, d in self.members()]
        p = run(rezip(mut), CFG, "cut")
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn(b"xl/worksheets/sheet1.xml: not XML (line ", p.stderr)

    def test_shared_strings_and_a_phonetic_run_read_as_openpyxl_reads_them(self):
        # rich text runs join; a phonetic reading (<rPh>) is not text; the
        # hand-written reader appended it to the name
        rich = (b"<r><t>NPU </t></r><r><rPr><b/></rPr><t>Name</t></r>"
                b"<rPh sb=\"0\" eb=\"1\"><t>\xe3\x83\x87\xe3\x82\xa3</t></rPh>")
        book = rezip(shared_strings(self.members(), rich))
        wb = openpyxl.load_workbook(io.BytesIO(book))
        rows = list(wb.active.iter_rows(values_only=True))
        self.assertEqual(rows[0][0], "NPU Name")  # openpyxl, independently
        p = run(book, CFG, "rph")
        self.assertEqual(p.returncode, 0, p.stderr)
        wb = openpyxl.load_workbook(os.path.join(WORK, "rph-out", "multi_ranks_compare_merge.xlsx"))
        got = list(wb["Cosine"].iter_rows(values_only=True))
        self.assertEqual(got, [("NPU Name", "rank3")] + [(r[0], r[2]) for r in rows[1:]])

    def test_a_document_type_declaration_is_refused(self):
        # a workbook part has none; an entity defined there is never expanded
        mut = [(n, b"<!DOCTYPE worksheet [<!ENTITY e \"Distributed\">]>" + d
                if n.startswith("xl/worksheets/") else d) for n, d in self.members()]
        p = run(rezip(mut), CFG, "dtd")
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn(b"a document type declaration", p.stderr)

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
