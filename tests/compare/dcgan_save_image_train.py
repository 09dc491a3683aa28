"""A DCGAN step as pytorch/examples' dcgan writes it (ConvTranspose2d and
BatchNorm generator, LeakyReLU(inplace=True) discriminator, BCELoss, Adam),
with torchvision.utils.save_image(fake, normalize=True) in the loop: its
clamp_ takes float(t.min()) and float(t.max()) of the generator's output as
arguments. BF16=1 runs the generator and discriminator under CPU bfloat16
autocast (the compare side); nothing else differs. Run under the msprobe
preload shim (the test sets LD_PRELOAD and MSPROBE_PATH)."""
import os
import sys

import torch
import torch.nn as nn
import torchvision.utils as vutils

torch.manual_seed(0)
torch.set_num_threads(1)
NZ, NGF, NDF = 16, 16, 16
BF16 = os.environ.get("BF16") == "1"

netG = nn.Sequential(
    nn.ConvTranspose2d(NZ, NGF * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(NGF * 2), nn.ReLU(True),
    nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF), nn.ReLU(True),
    nn.ConvTranspose2d(NGF, 3, 4, 2, 1, bias=False), nn.Tanh())
netD = nn.Sequential(
    nn.Conv2d(3, NDF, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 2),
    nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())
crit = nn.BCELoss()
optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
real = torch.rand(8, 3, 16, 16) * 2 - 1
noise = torch.randn(8, NZ, 1, 1)
out_dir = sys.argv[1] if len(sys.argv) > 1 else "."


def cast():
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=BF16)


for step in range(2):
    netD.zero_grad()
    with cast():
        out_real = netD(real).view(-1).float()
    err_real = crit(out_real, torch.ones(8))
    err_real.backward()
    with cast():
        fake = netG(noise)
        out_fake = netD(fake.detach()).view(-1).float()
    err_fake = crit(out_fake, torch.zeros(8))
    err_fake.backward()
    optD.step()
    netG.zero_grad()
    with cast():
        out = netD(fake).view(-1).float()
    errG = crit(out, torch.ones(8))
    errG.backward()
    optG.step()
    vutils.save_image(fake.detach().float(), os.path.join(out_dir, "fake_%d.png" % step),
                      normalize=True)
    print("step %d lossD %.6f lossG %.6f" % (step, float(err_real + err_fake), float(errG)))
