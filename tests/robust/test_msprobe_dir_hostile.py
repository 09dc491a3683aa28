"""msprobe's own dump directories (stepN/rankN/dump.json, stack.json,
construct.json, dump_tensor_data/) under hostile input (issue 26, items 2, 3
and 4): every file read is a regular file inside the dump directory (no
symbolic link out of it, no '/' or '..' in a data_name, no FIFO or device),
so nothing outside the dump is ever read, nothing blocks, and a bad data file
is an error naming it rather than a quiet fall-back to statistics;
matching stack.json and construct.json to 100,000 records is quick; the
reader's memory stays a small multiple of dump.json, not twenty times it;
dump.json's records and every JSON file's size are capped (issue 37).

Dumps are written with tests/lib/msprobe_layout.py (torch.save, json)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import openpyxl

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "lib"))
import msprobe_layout as ML  # noqa: E402

BIN = os.environ["MSPROBE_BIN"]
SANITIZED = b"libasan" in subprocess.run(["ldd", BIN], capture_output=True).stdout
REC = "Functional.relu.0.forward"
DATA = "Functional.relu.0.forward.input.0.pt"


def run(*args, timeout=60):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)


class Hostile(unittest.TestCase):
    def setUp(self):
        import torch
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        g = torch.Generator().manual_seed(3)
        x = torch.randn(4, 4, generator=g)
        recs = [(REC, {"input_args": [x], "output": [torch.relu(x)]}),
                ("Functional.gelu.1.forward", {"input_args": [x],
                                               "output": [torch.nn.functional.gelu(x)]})]
        self.bench = ML.write(os.path.join(d, "b"), recs)
        self.cmp = ML.write(os.path.join(d, "c"), recs)
        self.tdir = os.path.join(self.cmp, "dump_tensor_data")
        # outside the dump: a tensor of other values, which must never be read
        self.outside = os.path.join(d, "secret.pt")
        torch.save(torch.full((4, 4), 1e6), self.outside)
        p = self.compare()
        self.assertIn(p.returncode, (0, 1), p.stderr)  # the control: equal dumps compare

    def tearDown(self):
        self.tmp.cleanup()

    def compare(self):
        self.out = os.path.join(self.tmp.name, "out")
        shutil.rmtree(self.out, ignore_errors=True)
        return run("compare", "-b", self.bench, "-c", self.cmp, "-o", self.out)

    def assert_refused(self, named, why):
        """compare says the data file is refused and why, and never compares
        the row as anything read from elsewhere, nor as statistics only."""
        p = self.compare()
        text = p.stdout + p.stderr
        self.assertNotEqual(p.returncode, 0, text)
        if os.path.exists(os.path.join(self.out, "result.xlsx")):
            ws = openpyxl.load_workbook(os.path.join(self.out, "result.xlsx"))["details"]
            hdr = [c.value for c in ws[1]]
            rows = {r[hdr.index("NPU Name")]: r for r in ws.iter_rows(min_row=2, values_only=True)}
            row = rows[REC + ".input.0"]
            text += str(row[hdr.index("Err_message")])
            self.assertIn(row[hdr.index("Cosine")], (None, "N/A"))  # nothing compared on that row
        self.assertIn(named, text)
        self.assertIn(why, text)
        self.assertNotIn("1e+06", text)

    def replace_data(self, how):
        path = os.path.join(self.tdir, DATA)
        os.unlink(path)
        how(path)

    def test_data_file_linked_out_of_the_dump_is_refused(self):
        self.replace_data(lambda p: os.symlink(self.outside, p))
        self.assert_refused(DATA, "symbolic link")

    def test_dangling_link_is_refused_not_read_as_no_data(self):
        self.replace_data(lambda p: os.symlink(os.path.join(self.tmp.name, "gone.pt"), p))
        self.assert_refused(DATA, "symbolic link")

    def test_fifo_data_file_is_refused_without_blocking(self):
        self.replace_data(os.mkfifo)
        self.assert_refused(DATA, "not a regular file")

    def set_data_name(self, name):
        path = os.path.join(self.cmp, "dump.json")
        with open(path) as f:
            doc = json.load(f)
        doc["data"][REC]["input_args"][0]["data_name"] = name
        with open(path, "w") as f:
            json.dump(doc, f)

    def test_data_name_with_dotdot_is_refused(self):
        shutil.copy(self.outside, os.path.join(self.cmp, "secret.pt"))
        self.set_data_name("..")
        self.assert_refused('data_name ".."', "not a plain file name")

    def test_data_name_with_a_slash_is_refused(self):
        self.set_data_name("../../../secret.pt")
        self.assert_refused("../../../secret.pt", "not a plain file name")

    def test_data_dir_linked_elsewhere_is_refused(self):
        other = os.path.join(self.tmp.name, "elsewhere")
        shutil.copytree(self.tdir, other)
        shutil.copy(self.outside, os.path.join(other, DATA))
        shutil.rmtree(self.tdir)
        os.symlink(other, self.tdir)
        self.assert_refused("dump_tensor_data", "refused")

    def test_dump_json_linked_elsewhere_is_refused(self):
        real = os.path.join(self.tmp.name, "real.json")
        shutil.move(os.path.join(self.cmp, "dump.json"), real)
        os.symlink(real, os.path.join(self.cmp, "dump.json"))
        p = run("ls", self.cmp)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("dump.json: a symbolic link: refused", p.stderr)

    def test_stack_json_linked_to_dev_zero_is_refused_at_once(self):
        os.unlink(os.path.join(self.cmp, "stack.json"))
        os.symlink("/dev/zero", os.path.join(self.cmp, "stack.json"))
        p = run("ls", self.cmp, timeout=300)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("stack.json: a symbolic link: refused", p.stderr)

    def test_fifo_stack_and_construct_json_do_not_block(self):
        for name in ("stack.json", "construct.json"):
            with self.subTest(name=name):
                path = os.path.join(self.cmp, name)
                if os.path.lexists(path):
                    os.unlink(path)
                os.mkfifo(path)
                for args in (("ls", self.cmp), ("compare", "-b", self.bench, "-c", self.cmp,
                                                "-o", os.path.join(self.tmp.name, "o"))):
                    p = run(*args, timeout=300)
                    self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                    self.assertIn(name + ": not a regular file", p.stderr)
                os.unlink(path)


class Scale(unittest.TestCase):
    """100,000 records, with stack.json and construct.json naming each one."""

    N = 100_000

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        rdir = os.path.join(cls.tmp.name, "step0", "rank0")
        os.makedirs(rdir)
        t = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3], "Max": 1.5,
             "Min": -1.25, "Mean": 0.125, "Norm": 2.5, "requires_grad": False}
        data = {}
        for i in range(cls.N):
            data["Functional.linear.%d.forward" % i] = {"input_args": [dict(t), dict(t)],
                                                        "input_kwargs": {}, "output": [dict(t)]}
        cls.json = os.path.join(rdir, "dump.json")
        with open(cls.json, "w") as f:
            json.dump({"task": "statistics", "level": "L1", "framework": "pytorch",
                       "dump_data_dir": None, "data": data}, f)
        names = list(data)
        with open(os.path.join(rdir, "stack.json"), "w") as f:
            json.dump({str(i): [[n], ["File \"train.py\", line %d, in forward" % i]]
                       for i, n in enumerate(names)}, f)
        with open(os.path.join(rdir, "construct.json"), "w") as f:
            json.dump({n: "Module.block.%d.Linear.forward.0" % (i % 7) for i, n in enumerate(names)}, f)
        cls.rdir = rdir

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_stack_and_construct_are_matched_to_100k_records(self):
        # quadratic matching took 94 s here; a generous bound is a hang check only
        p = run("ls", self.rdir, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertIn("records=%d" % self.N, lines[0])
        i = lines.index("  Functional.linear.99999.forward  order=99999")
        tail = "\n".join(lines[i:i + 8])
        self.assertIn('File "train.py", line 99999, in forward', tail)
        self.assertIn("Module.block.%d.Linear.forward.0" % (99999 % 7), tail)

    @unittest.skipIf(SANITIZED, "ASan keeps freed memory in quarantine: RSS says nothing")
    def test_reader_memory_is_a_small_multiple_of_dump_json(self):
        size = os.path.getsize(self.json)
        # measured from a small Python of its own: a child's peak RSS counts
        # the image it was forked from, and this one holds torch
        probe = ("import os, sys\n"
                 "pid = os.posix_spawn(sys.argv[1], sys.argv[1:], {}, file_actions=[(os.POSIX_SPAWN_OPEN, 1, '/dev/null', os.O_WRONLY, 0)])\n"
                 "_, st, ru = os.wait4(pid, 0)\n"
                 "print(os.waitstatus_to_exitcode(st), ru.ru_maxrss)\n")
        p = subprocess.run([sys.executable, "-S", "-c", probe, BIN, "ls", self.json],
                           capture_output=True, text=True, timeout=60)
        rc, maxrss = map(int, p.stdout.split())
        self.assertEqual(rc, 0, p.stderr)
        peak = maxrss * 1024
        # the text, the catalogue (about 450 bytes a tensor against some 130
        # of JSON) and the program: was 22-26 times the file
        self.assertLess(peak, 6 * size + (48 << 20), "peak RSS %d for a %d-byte dump.json"
                        % (peak, size))


def peak_rss(*args, env=None):
    """(exit status, stderr, peak RSS in bytes) of msprobe ARGS, measured from
    a small Python of its own (-S, no torch): RUSAGE_CHILDREN there is
    msprobe's alone, not the image of this process it would be forked from."""
    probe = ("import os, resource, subprocess, sys\n"
             "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
             "stderr=subprocess.PIPE, text=True)\n"
             "sys.stderr.write(p.stderr)\n"
             "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    p = subprocess.run([sys.executable, "-S", "-c", probe, BIN, *args], capture_output=True,
                       text=True, timeout=60, env=env)
    rc, maxrss = map(int, p.stdout.split())
    return rc, p.stderr, maxrss * 1024


class Caps(unittest.TestCase):
    """A dump.json of too many records, or a JSON file of the dump over its
    size cap, is refused at once, with an error naming the file, the count
    and the limit, before the reader spends memory on it (issue 37, item 3:
    1,000,000 records took compare 588 s and 7.35 GB). The limits are
    documented in msprobe-dump(5); the environment variables there raise
    them."""

    MAX_RECORDS = 200_000   # msprobe-dump(5)
    MAX_MB = 1024           # msprobe-dump(5)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.rdir = os.path.join(self.tmp.name, "step0", "rank0")
        os.makedirs(self.rdir)
        self.json = os.path.join(self.rdir, "dump.json")

    def tearDown(self):
        self.tmp.cleanup()

    def write_records(self, n):
        # the smallest records there are: the text, not the records, is what
        # the reader may hold before it refuses
        with open(self.json, "w") as f:
            f.write('{"task": "statistics", "level": "L1", "framework": "pytorch", "data": {')
            f.write(",".join('"Torch.add.%d.forward": {}' % i for i in range(n)))
            f.write("}}")
        return os.path.getsize(self.json)

    def env(self, **kv):
        e = dict(os.environ)
        e.update({k: str(v) for k, v in kv.items()})
        return e

    def test_more_records_than_the_cap_are_refused_at_once_naming_count_and_limit(self):
        n = self.MAX_RECORDS + 1
        size = self.write_records(n)
        rc, err, peak = peak_rss("ls", self.json)
        self.assertEqual(rc, 2, err)
        for want in (self.json, "%d records" % n, "more than the %d" % self.MAX_RECORDS,
                     "MSPROBE_DUMP_JSON_MAX_RECORDS"):
            self.assertIn(want, err)
        # the text and the program, no catalogue: building the 200,001 records
        # first took 36 MB here against 13 (ASan's quarantine and shadow: no measure)
        if not SANITIZED:
            self.assertLess(peak, 2 * size + (16 << 20), "peak RSS %d for a %d-byte dump.json"
                            % (peak, size))
        p = run("compare", "-b", self.rdir, "-c", self.rdir, "-o",
                os.path.join(self.tmp.name, "out"))
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("%d records" % n, p.stderr)

    def test_the_record_cap_is_raised_and_lowered_by_its_variable(self):
        n = self.MAX_RECORDS + 1
        self.write_records(n)
        p = subprocess.run([BIN, "ls", self.json], capture_output=True, text=True, timeout=60,
                           env=self.env(MSPROBE_DUMP_JSON_MAX_RECORDS=n))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("records=%d" % n, p.stdout)
        self.write_records(11)
        p = subprocess.run([BIN, "ls", self.json], capture_output=True, text=True, timeout=60,
                           env=self.env(MSPROBE_DUMP_JSON_MAX_RECORDS=10))
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("11 records in \"data\", more than the 10", p.stderr)

    def test_json_files_over_the_size_cap_are_refused_before_they_are_read(self):
        self.write_records(3)
        over = (self.MAX_MB << 20) + 1
        for name in ("dump.json", "stack.json", "construct.json"):
            with self.subTest(file=name):
                path = os.path.join(self.rdir, name)
                with open(path, "ab") as f:  # sparse: no disk, 1 GiB + 1 byte of size
                    f.truncate(over)
                try:
                    rc, err, peak = peak_rss("ls", self.rdir)
                finally:
                    os.unlink(path)
                    self.write_records(3)
                self.assertEqual(rc, 2, err)
                self.assertIn("file %s: %d bytes, more than the %d MiB" % (path, over, self.MAX_MB),
                              err)
                self.assertIn("MSPROBE_DUMP_JSON_MAX_MB", err)
                if not SANITIZED:  # a 1 GiB read would show whatever ASan adds
                    self.assertLess(peak, 64 << 20, "peak RSS %d: the file was read" % peak)
        # a lower cap refuses a small file the same way
        size = self.write_records(100_000)
        p = subprocess.run([BIN, "ls", self.json], capture_output=True, text=True, timeout=60,
                           env=self.env(MSPROBE_DUMP_JSON_MAX_MB=1))
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("%d bytes, more than the 1 MiB" % size, p.stderr)


if __name__ == "__main__":
    unittest.main()
