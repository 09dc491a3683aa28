"""Producer links (msprobe-dump(5)): each forward input names the earlier
record whose output it is, as a dataset attribute and an /index column,
checked with h5py on small real calls of torch.nn.functional and torch.nn."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

API = r"""
import torch, torch.nn.functional as F
torch.manual_seed(0)
w1, w2 = torch.randn(8, 4), torch.randn(3, 8)
x = torch.randn(5, 4)
with torch.no_grad():
    h = F.linear(x, w1)          # Functional.linear.0
    a = F.relu(h)                # Functional.relu.0      input.0 <- linear.0
    y = F.linear(a, w2)          # Functional.linear.1    input.0 <- relu.0
    a.fill_(2.0)                 # not wrapped (fills from nothing never are)
    z = F.linear(a, w2)          # Functional.linear.2    same object: <- relu.0
    d = y.detach()               # another object, same storage and version
    s = F.softmax(d, dim=1)      # Functional.softmax.0   input.0 <- linear.1
    e = z.detach()
    e.fill_(1.0)                 # moves the version counter z and e share
    t = F.softmax(e, dim=1)      # Functional.softmax.1   no producer
    u = F.softmax(z, dim=1)      # Functional.softmax.2   same object: <- linear.2
    v = torch.cat([h, a], 1)     # Torch.cat.0            input.0.0 <- linear.0, input.0.1 <- relu.0
"""

MIX = r"""
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
    def forward(self, x):
        return F.relu(self.fc(x))
net = Net()
x = torch.randn(2, 4, requires_grad=True)
out = torch.sigmoid(net(x))
out.sum().backward()
"""


def index_rows(path):
    import h5py
    with h5py.File(path, "r") as f:
        idx = f["index"][()]
        return {(r["record"].decode(), r["role"].decode()): r["producer"].decode() for r in idx}


class Links(dt.ShimCase):
    def dump(self, script, mode):
        # one step on purpose: "manual" keeps the exit's "whole run was step 0" hint quiet
        cfg = self.write_config(dt.config("./d", mode=mode, steps="all", trigger="manual"))
        p = self.run_cmd([dt.PYTHON, "-c", script], cfg)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        path = dt.dump_files(self.path("d"))[(0, 0)]
        recs, _ = dt.read_dump(path)
        links = {(n, role): a["producer"] for n, r in recs.items()
                 for role, a in r["tattrs"].items() if "producer" in a}
        return recs, links, index_rows(path)

    def test_api_inputs_name_the_record_whose_output_they_are(self):
        recs, links, index = self.dump(API, "api")
        self.assertEqual(links, {
            ("Functional.relu.0.forward", "input.0"): "Functional.linear.0.forward/output.0",
            ("Functional.linear.1.forward", "input.0"): "Functional.relu.0.forward/output.0",
            ("Functional.linear.2.forward", "input.0"): "Functional.relu.0.forward/output.0",
            ("Functional.softmax.0.forward", "input.0"): "Functional.linear.1.forward/output.0",
            ("Functional.softmax.2.forward", "input.0"): "Functional.linear.2.forward/output.0",
            ("Torch.cat.0.forward", "input.0.0"): "Functional.linear.0.forward/output.0",
            ("Torch.cat.0.forward", "input.0.1"): "Functional.relu.0.forward/output.0",
        })
        # each link is true to the values: the input is its producer's output...
        for (rec, role), prod in links.items():
            prec, prole = prod.split("/")
            if (rec, role) in (("Functional.linear.2.forward", "input.0"),
                               ("Torch.cat.0.forward", "input.0.1"),
                               ("Functional.softmax.2.forward", "input.0")):
                continue
            dt.assert_same(self, recs[rec][role], recs[prec][prole], rec + " " + role)
        # ...except where an op msprobe does not see changed it in between
        # (a.fill_(2); e.fill_(1) through another object on z's storage): the
        # link stays, so a reader can see that gap
        relu_out = recs["Functional.relu.0.forward"]["output.0"]
        dt.assert_same(self, recs["Functional.linear.2.forward"]["input.0"],
                       np.full_like(relu_out, 2), "input changed in place after its producer")
        z_out = recs["Functional.linear.2.forward"]["output.0"]
        dt.assert_same(self, recs["Functional.softmax.2.forward"]["input.0"],
                       np.ones_like(z_out), "input changed through another view after its producer")
        # the /index column says the same; "" where unknown, outputs included
        self.assertEqual({k: v for k, v in index.items() if v}, links)
        self.assertEqual(index[("Functional.softmax.1.forward", "input.0")], "")
        self.assertEqual(index[("Functional.linear.0.forward", "input.0")], "")

    def test_mix_mode_links_to_the_wrapper_that_finished_last(self):
        recs, links, _ = self.dump(MIX, "mix")
        # the script's own input was no record's output, and backward records
        # carry no producer: these are all the links there are
        self.assertEqual(links, {
            ("Functional.relu.0.forward", "input.0"): "Module.fc.Linear.forward.0/output.0",
            ("Torch.sigmoid.0.forward", "input.0"): "Module.Net.forward.0/output.0",
            ("Tensor.sum.0.forward", "input.0"): "Torch.sigmoid.0.forward/output.0",
            # backward() makes the seed gradient with torch.ones_like(loss)
            ("Torch.ones_like.0.forward", "input.0"): "Tensor.sum.0.forward/output.0",
        })
        self.assertIn("Module.fc.Linear.backward.0", recs)


if __name__ == "__main__":
    unittest.main()
