"""Small real training steps for acc_check's tests, float32 on the CPU:

    acc_train.py          conv2d, relu, flatten, linear, a custom kernel
                          (nan_kernels.mul, planted wrong unless NAN_KERNEL_ULPS=0),
                          division, addition, dropout (random: not replayable),
                          linear and cross_entropy, then SGD; one step
    acc_train.py bn       conv2d, batch_norm (running statistics), relu in place,
                          linear, cross_entropy, SGD with momentum; two steps
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import nan_kernels


def main():
    torch.manual_seed(0)
    conv, lin1, lin2 = nn.Conv2d(1, 3, 3), nn.Linear(108, 16), nn.Linear(16, 4)
    scale = nn.Parameter(torch.rand(16) + 0.5)
    params = list(conv.parameters()) + list(lin1.parameters()) + list(lin2.parameters()) + [scale]
    opt = torch.optim.SGD(params, lr=0.1)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(8, 1, 8, 8, generator=gen)
    y = torch.randint(0, 4, (8,), generator=gen)
    h = F.relu(conv(x)).flatten(1)
    h = nan_kernels.mul(F.relu(lin1(h)), scale)
    h = h / 2.0 + 1.0
    h = F.dropout(h, p=0.25, training=True)
    loss = F.cross_entropy(lin2(h), y)
    loss.backward()
    opt.step()
    print("loss %.6f" % loss.item())


def bn():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                          nn.Flatten(), nn.Linear(4 * 6 * 6, 5))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(2)
    for step in range(2):
        x = torch.randn(6, 3, 8, 8, generator=gen)
        y = torch.randint(0, 5, (6,), generator=gen)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("step %d loss %.6f" % (step, loss.item()))


if __name__ == "__main__":
    bn() if sys.argv[1:] == ["bn"] else main()
