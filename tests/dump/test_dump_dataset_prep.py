"""Data preparation is not dumped as model calls (issue 26, item 13):
torchvision's MNIST reads its whole set in its constructor and views it with
Tensor.view (90 of a 288 MiB step with the real files); a script's own
Dataset subclass may compute in its constructor too. Nothing a Dataset's
constructor runs is recorded, whether torchvision is imported before or
after torch, while the model's calls are (read back with h5py). The MNIST
files are written here in the idx format torchvision reads, 16 images."""
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


if __name__ == "__main__":
    unittest.main()
