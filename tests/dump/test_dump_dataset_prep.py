"""Data preparation is not dumped as model calls (issue 26, item 13):
torchvision's MNIST reads its whole set in its constructor and views it with
Tensor.view (90 of a 288 MiB step with the real files); a script's own
Dataset subclass may compute in its constructor too. Nothing a Dataset's
constructor runs is recorded, whether torchvision is imported before or
after torch, while the model's calls are (read back with h5py). The MNIST
files are written here in the idx format torchvision reads, 16 images.
Calls the script makes before its model first runs (normalising a dataset
held in a tensor) are data preparation too, while a script with no module
at all keeps every call."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dumptest as dt  # noqa: E402

TRAIN = r"""
import sys
{imports}
import torchvision.transforms as T
from torch.utils.data import DataLoader, Dataset

class Scaled(Dataset):
    # the script's own dataset: its constructor computes on the whole set
    def __init__(self, base):
        self.base = base
        self.scale = torch.arange(16, dtype=torch.float32).view(4, 4).sum() / 120.0
    def __len__(self):
        return len(self.base)
    def __getitem__(self, i):
        x, y = self.base[i]
        return x * self.scale, y

ds = Scaled(torchvision.datasets.MNIST(sys.argv[1], train=True, download=False,
                                       transform=T.ToTensor()))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(ds, batch_size=8):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    print("loss %.9g" % loss.item())
"""


def write_mnist(root, n=16):
    raw = os.path.join(root, "MNIST", "raw")
    os.makedirs(raw)
    rng = np.random.default_rng(0)
    for pre in ("train", "t10k"):
        for suffix, magic, shape in (("images-idx3-ubyte", 2051, (n, 28, 28)),
                                     ("labels-idx1-ubyte", 2049, (n,))):
            with open(os.path.join(raw, "%s-%s" % (pre, suffix)), "wb") as f:
                f.write(np.array((magic,) + shape, dtype=">i4").tobytes())
                f.write(rng.integers(0, 10 if magic == 2049 else 256, shape).astype(np.uint8).tobytes())


class DatasetPrep(dt.ShimCase):
    def test_dataset_constructors_are_not_dumped(self):
        write_mnist(self.path("data"))
        for order, imports in (("torch first", "import torch, torchvision"),
                               ("torchvision first", "import torchvision, torch")):
            with self.subTest(order=order):
                script = self.path("t.py")
                with open(script, "w") as f:
                    f.write(TRAIN.replace("{imports}", imports))
                root = "d_" + order.split()[0]
                cfg = self.write_config(dt.config("./" + root, task="statistics"))
                plain = self.run_cmd([dt.PYTHON, script, self.path("data")], preload=False)
                shim = self.run_cmd([dt.PYTHON, script, self.path("data")], cfg)
                self.assertEqual(shim.returncode, 0, shim.stderr[-3000:])
                self.assertEqual(shim.stdout, plain.stdout, "the shim changed training")
                files = dt.dump_files(self.path(root))
                recs = dt.read_dump(files[(0, 0)])[0]
                by_order = sorted(recs, key=lambda r: int(recs[r]["attrs"]["order"]))
                # the model's calls, from its first op on; none of the datasets'
                self.assertEqual(by_order[0], "Tensor.flatten.0.forward", by_order[:6])
                self.assertIn("Functional.linear.0.forward", recs)
                for name in recs:
                    self.assertFalse(name.startswith(("Tensor.view", "Torch.arange", "Tensor.long",
                                                      "Tensor.sum")), name)


BEFORE_MODEL = r"""
import sys, torch, torch.nn.functional as F
torch.manual_seed(0)
data = torch.randn(64, 8)
mean, std = data.mean(0), data.std(0)       # data preparation: the whole set
data = (data - mean) / std
target = torch.randint(0, 2, (64,))
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    opt.zero_grad()
    loss = F.cross_entropy(model(data), target)
    loss.backward()
    opt.step()
    print("loss %.9g" % loss.item())
"""

NO_MODULE = r"""
import torch, torch.nn.functional as F
torch.manual_seed(0)
x = torch.randn(16, 8)
w = torch.randn(8, 2, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
for step in range(2):
    opt.zero_grad()
    loss = F.relu(x.matmul(w)).sum()
    loss.backward()
    opt.step()
    print("loss %.9g" % loss.item())
"""


class BeforeTheModel(dt.ShimCase):
    def dump(self, source, root, env=None):
        script = self.path(root + ".py")
        with open(script, "w") as f:
            f.write(source)
        cfg = self.write_config(dt.config("./" + root, task="statistics"))
        plain = self.run_cmd([dt.PYTHON, script], preload=False)
        shim = self.run_cmd([dt.PYTHON, script], cfg, env_extra=env)
        self.assertEqual(shim.returncode, 0, shim.stderr[-3000:])
        self.assertEqual(shim.stdout, plain.stdout, "the shim changed training")
        return shim, dt.read_dump(dt.dump_files(self.path(root))[(0, 0)])[0]

    def test_calls_before_the_first_forward_are_data_preparation(self):
        shim, recs = self.dump(BEFORE_MODEL, "prep")
        by_order = sorted(recs, key=lambda r: int(recs[r]["attrs"]["order"]))
        # the model's own first call comes first, numbered from 0
        self.assertEqual(by_order[0], "Functional.linear.0.forward", by_order[:4])
        self.assertEqual(int(recs[by_order[0]]["attrs"]["order"]), 0)
        for name in recs:  # mean, std, - and / over the whole set are not there
            self.assertFalse(name.startswith(("Tensor.mean", "Tensor.std", "Tensor.__sub__",
                                              "Tensor.__truediv__")), name)
        # four calls: mean, std, the subtraction and the division
        self.assertIn("msprobe: 4 calls made before the model's first forward are data "
                      "preparation and are not dumped", shim.stderr)

    def test_the_switch_keeps_them(self):
        _, recs = self.dump(BEFORE_MODEL, "kept", env={"MSPROBE_DUMP_DATA_PREP": "1"})
        for api in ("Tensor.mean.0.forward", "Tensor.std.0.forward", "Tensor.__sub__.0.forward",
                    "Tensor.__truediv__.0.forward"):
            self.assertIn(api, recs)

    def test_a_script_without_modules_keeps_every_call(self):
        shim, recs = self.dump(NO_MODULE, "functional")
        for api in ("Tensor.matmul.0.forward", "Functional.relu.0.forward",
                    "Functional.relu.0.backward", "Tensor.sum.0.forward"):
            self.assertIn(api, recs)
        by_order = sorted(int(r["attrs"]["order"]) for r in recs.values())
        self.assertEqual(by_order, list(range(len(by_order))))  # in order, none lost
        self.assertNotIn("data preparation", shim.stderr)


if __name__ == "__main__":
    unittest.main()
