"""Two steps of torchvision's resnet18 with SGD (momentum), batch 2, whose
32x32 images are resized to 64x64 with F.interpolate inside the training
loop, before model(x), in a helper the loop calls, and flipped in the loop
body itself; the whole dataset is normalised once at the top of the script
(data preparation). With STEP_FN=1 the loop body is a function the loop
calls (with no loop of its own). With GRAD_ACCUM=1 the batch is flipped
and resized in the loop body, then run as two micro-batches of one image in
an inner loop (forward and backward each), and the optimizer steps once, in
the outer loop: gradient accumulation. RESIZE_MODE / RESIZE_ALIGN plant a
different resize on one side (test_dump_prep_in_loop.py, test_culprit_resize_in_loop.py)."""
import os

import torch
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
torch.set_num_threads(1)
MODE = os.environ.get("RESIZE_MODE", "bilinear")
ALIGN = os.environ.get("RESIZE_ALIGN", "0") == "1"

images = torch.rand(4, 3, 32, 32)
labels = torch.randint(0, 10, (4,))
images = (images - 0.5) / 0.25  # the whole set, before the loop: data preparation
model = torchvision.models.resnet18(num_classes=10)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def resize(x):
    if MODE == "nearest":
        return F.interpolate(x, size=(64, 64), mode=MODE)
    return F.interpolate(x, size=(64, 64), mode=MODE, align_corners=ALIGN)


def train_step(x, y):
    x = torch.flip(x, [3])  # augmentation, before the model
    x = resize(x)           # and in a function called from there
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


for step, (x, y) in enumerate(DataLoader(TensorDataset(images, labels), batch_size=2)):
    if os.environ.get("STEP_FN") == "1":
        loss = train_step(x, y)
    elif os.environ.get("GRAD_ACCUM") == "1":
        x = torch.flip(x, [3])  # augmentation in the outer loop's body
        x = resize(x)
        opt.zero_grad()
        for xm, ym in zip(x.chunk(2), y.chunk(2)):  # two micro-batches
            loss = F.cross_entropy(model(xm), ym) * 0.5
            loss.backward()
        opt.step()              # once a batch, in the outer loop
    else:
        x = torch.flip(x, [3])  # augmentation in the loop body
        x = resize(x)           # and in a function the loop body calls
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("step %d loss %.6f" % (step, loss.item()))
