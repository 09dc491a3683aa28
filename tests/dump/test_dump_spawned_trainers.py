"""Training in spawned processes is never silent (issue 26, item 12):
pytorch/examples' mnist_hogwild trains in mp.Process children started with
spawn, which by the process rule write nothing; the parent says so in one
line at exit (how many, their steps, how to include them), not the
step_trigger advice, which only a run that trained without ending a step
gets (not one that crashed before training). The dump holds the parent's
test pass only (read back with h5py)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

HOGWILD = r"""
import torch, torch.nn as nn, torch.nn.functional as F
import torch.multiprocessing as mp

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 8)
        self.fc2 = nn.Linear(8, 3)
    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)

def train(rank, model):
    torch.manual_seed(1 + rank)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    for step in range(3):
        opt.zero_grad()
        loss = F.nll_loss(model(torch.randn(4, 16)), torch.randint(0, 3, (4,)))
        loss.backward()
        opt.step()

if __name__ == "__main__":
    torch.manual_seed(0)
    model = Net()
    model.share_memory()
    ps = []
    for rank in range(2):
        p = mp.Process(target=train, args=(rank, model))
        p.start()
        ps.append(p)
    for p in ps:
        p.join()
    with torch.no_grad():  # the test pass, in the parent
        out = model(torch.randn(8, 16))
        print("test loss %.6f" % F.nll_loss(out, torch.randint(0, 3, (8,))).item())
"""

CRASH = r"""
import torch
model = torch.nn.Linear(4, 2)
y = model(torch.ones(3, 4))
raise SystemExit("data not found")
"""


class SpawnedTrainers(dt.ShimCase):
    def run_script(self, text, *args):
        path = self.path("t.py")
        with open(path, "w") as f:
            f.write(text)
        cfg = self.write_config(dt.config("./d", task="statistics"))
        return self.run_cmd([dt.PYTHON, path] + list(args), cfg,
                            env_extra={"PYTHONWARNINGS": "ignore"})

    def test_hogwild_children_are_counted_in_one_line_at_exit(self):
        p = self.run_script(HOGWILD.replace('if __name__ == "__main__":',
                                            'if __name__ == "__main__":\n    mp.set_start_method("spawn")'))
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("msprobe:")]
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("2 processes this one started (multiprocessing, spawn) ran training "
                      "(6 steps in all) and were not dumped", lines[0])
        self.assertIn("init_process_group", lines[0])
        self.assertNotIn("step_trigger", p.stderr)
        # the notes the children left are gone
        self.assertEqual([n for n in os.listdir(self.path("d")) if n.startswith(".undumped")], [])
        # the dump is the parent's test pass: forward records only
        recs = dt.read_dump(dt.dump_files(self.path("d"))[(0, 0)])[0]
        self.assertIn("Functional.linear.0.forward", recs)
        self.assertEqual([r for r in recs if "backward" in r], [])

    def test_a_script_that_fails_before_training_gets_no_step_trigger_advice(self):
        p = self.run_script(CRASH)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("data not found", p.stderr)
        self.assertNotIn("step_trigger", p.stderr)


if __name__ == "__main__":
    unittest.main()
