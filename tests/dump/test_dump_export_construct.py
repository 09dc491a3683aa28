"""msprobe export writes construct.json as msprobe does: {} at L1, and at
mix each record mapped to the module record it ran inside, or null. The run
is tests/compare/msprobe_seeded_model.py dumped under the real preload shim;
the truth is msprobe 26's own construct.json of the same seeded run
(fixtures/msprobe/v26 at L1, fixtures/msprobe/v26_mix at mix, see
fixtures/msprobe/README.md). With MSPROBE_UPSTREAM_PY naming a directory that
holds msprobe's python/msprobe (and the stand-ins the README lists), its
graph builder (graph_visualize) is run on the export too."""
import glob
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

MODEL = os.path.join(dt.SOURCE, "tests", "compare", "msprobe_seeded_model.py")
FIX = os.path.join(dt.SOURCE, "fixtures", "msprobe")
BIN = os.environ.get("MSPROBE_BIN", "msprobe")
ROOT = "Module.Net.forward.0"  # the model itself: msprobe's start(model) does not record it


def load_construct(fixture):
    (path,) = glob.glob(os.path.join(FIX, fixture, "step0", "*", "construct.json"))
    with open(path) as f:
        return json.load(f)


def backward_of(name):
    """msprobe's backward name of a forward record: "X.forward" -> "X.backward",
    "Module.P.C.forward.N" -> "Module.P.C.backward.N"."""
    if name.endswith(".forward"):
        return name[:-len("forward")] + "backward"
    head, n = name.rsplit(".", 1)
    return head[:-len("forward")] + "backward." + n


class ExportConstruct(dt.ShimCase):
    def dump_and_export(self, level, task="tensor"):
        out = self.path("dump_" + level + task)
        cfg = {"task": task, "dump_path": out, "rank": [], "step": [0], "level": level,
               task: {"scope": [], "list": [], "data_mode": ["all"]}}
        p = self.run_cmd([dt.PYTHON, MODEL], self.write_config(cfg, name=level + task + ".json"))
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual(p.stdout.split()[-1], "1.13963532")
        exp = self.path("export_" + level + task)
        p = subprocess.run([BIN, "export", "-o", exp, out], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        rank = os.path.join(exp, "step0", "rank0")
        with open(os.path.join(rank, "construct.json")) as f:
            construct = json.load(f)
        with open(os.path.join(rank, "dump.json")) as f:
            data = json.load(f)["data"]
        return construct, data, rank

    def test_l1_construct_is_empty_as_msprobe_writes_it(self):
        construct, data, _ = self.dump_and_export("L1")
        self.assertGreater(len(data), 20)
        self.assertEqual(construct, load_construct("v26"))
        self.assertEqual(construct, load_construct("v833"))
        self.assertEqual(construct, {})

    def check_mix(self, construct, data):
        theirs = load_construct("v26_mix")
        # every record of the export has its entry, and nothing else does
        self.assertEqual(set(construct), set(data))
        self.assertIn(ROOT, construct)
        self.assertIsNone(construct[ROOT])
        # forward records: msprobe's parent, but where msprobe's is null
        # because it does not record the model it was given, ours is that model
        forward = [k for k in theirs if ".forward" in k]
        self.assertGreater(len(forward), 15)
        for name in forward:
            if name.startswith("Tensor.add_."):  # SGD's calls: one Optimizer record of ours
                continue
            with self.subTest(record=name):
                self.assertIn(name, construct)
                want = theirs[name]
                got = construct[name]
                if want is None and got == ROOT:
                    got = None
                self.assertEqual(got, want)
        # the modules msprobe hangs under nothing hang under the model here
        self.assertEqual(construct["Module.emb.Embedding.forward.0"], ROOT)
        self.assertEqual(construct["Functional.linear.1.forward"], "Module.head.Linear.forward.0")
        # backward records: msprobe 26 on torch 1.13 records no module backward
        # and writes null; its graph builder then takes the backward record of
        # the forward's parent (GraphBuilder._handle_backward_upnode_missing),
        # which is what the export writes when the dump holds that record
        checked = 0
        for name, got in construct.items():
            if ".backward" not in name:
                continue
            fwd = name.replace(".backward", ".forward")
            parent = construct.get(fwd)
            want = backward_of(parent) if parent else None
            if want not in construct:
                want = None
            self.assertEqual(got, want, name)
            checked += got is not None
        self.assertGreater(checked, 10)
        self.assertEqual(construct["Functional.linear.0.backward"],
                         "Module.proj.Linear.backward.0")
        self.assertIsNone(construct["Functional.cross_entropy.0.backward"])

    def test_mix_construct_names_each_parent_as_msprobe_does(self):
        construct, data, rank = self.dump_and_export("mix")
        self.check_mix(construct, data)
        self.graph_visualize(rank)

    def test_l0_construct_holds_the_modules_tree(self):
        # msprobe's module tree (its module_node) is the same at L0 and mix
        construct, data, _ = self.dump_and_export("L0")
        theirs = {k: v for k, v in load_construct("v26_mix").items() if k.startswith("Module.")}
        self.assertEqual(set(construct), set(data))
        self.assertTrue(all(k.startswith("Module.") for k in construct), sorted(construct))
        for name, want in theirs.items():
            got = construct[name]
            self.assertEqual(None if got == ROOT else got, want, name)
        self.assertEqual(construct["Module.proj.Linear.backward.0"], "Module.Net.backward.0")

    def test_mix_statistics_dump_gives_the_same_construct(self):
        # statistics records carry no parent attribute: the modules' order ranges say it
        tensor, _, _ = self.dump_and_export("mix")
        stats, data, _ = self.dump_and_export("mix", task="statistics")
        self.assertEqual(stats, tensor)
        self.check_mix(stats, data)

    def graph_visualize(self, rank):
        up = os.environ.get("MSPROBE_UPSTREAM_PY")
        if not up:
            return
        code = ("import sys, os, concurrent.futures; sys.path[:0] = sys.argv[2].split(':');"
                "from msprobe.visualization.builder.graph_builder import GraphBuilder as G;"
                "d = sys.argv[1];"
                "g = G.build(*(os.path.join(d, n) for n in "
                "('construct.json', 'dump.json', 'stack.json')));"
                "print(' '.join(n.id for n in g.root.subnodes))")
        p = subprocess.run([dt.PYTHON, "-c", code, rank, up], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertIn(ROOT, p.stdout.split())


if __name__ == "__main__":
    unittest.main()
