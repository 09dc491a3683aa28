"""Training script for the culprit scenarios: real model code, two steps.

Run as `python3 culprit_models.py MODEL NOISE PLANT [OPTIMIZER]` under the
msprobe preload shim (the test and bench/culprit set LD_PRELOAD and
MSPROBE_PATH). It trains MODEL for two optimizer steps on fixed random data and
prints the losses.

MODEL  resnet (torchvision resnet18), vit (torchvision VisionTransformer),
       lstm (nn.LSTM language model), gpt (a small GPT written here),
       mlp (LayerNorm, Linear, GELU, Linear).
NOISE  bench: the trusted run (fp32, 2 threads, mkldnn on);
       none:  the same as bench;
       fp32:  "other hardware": 1 thread and mkldnn off (ULP noise everywhere);
       kernel: fp32's, and the caller sets ATEN_CPU_CAPABILITY=default in
              this process's environment (torch reads it at import): only
              the CPU kernels differ from the bench run;
       bf16:  torch.autocast("cpu", bfloat16) around forward and loss.
PLANT  none, or one changed argument of exactly one call:
       gelu_tanh    GELU approximate="tanh" in one block (gpt, vit, mlp)
       ln_eps       eps=1.0 in one LayerNorm (gpt, vit)
       attn_scale   attention scale 1/d instead of 1/sqrt(d) in one block (gpt)
       smoothing    cross_entropy label_smoothing=0.3 (every model)
       bn_eps       eps=1.0 in one BatchNorm (resnet)
       wd           the optimizer's weight_decay 0.1 instead of its default
                    (first effect: the parameters of step 1)
       opt_eps      the optimizer's eps 1e-3 instead of 1e-8 (adam, adamw)
       Hidden plants (hid_*) keep every argument the dump records and change
       the kernel below the recorded API for one call, as a faulty device
       kernel would: the builtin that torch.nn.functional calls is swapped
       for that one call (one module's forward) and restored after it.
       hid_ln_eps   torch.layer_norm runs with eps=1.0 under one
                    F.layer_norm(..., eps=1e-5) (gpt: block 1's first
                    LayerNorm; vit: the last encoder layer's ln_2)
       hid_bn_eps   torch.batch_norm runs with eps=1.0 under resnet's
                    layer1[0].bn1
       hid_smoothing torch._C._nn.cross_entropy_loss runs with
                    label_smoothing=0.3 under F.cross_entropy (every model)
       hid_gelu_tanh F.gelu is the builtin itself, so aten::gelu's CPU kernel
                    is overridden (torch.library) with the tanh
                    approximation for one F.gelu(x) call (gpt: block 1; vit:
                    the last encoder layer's GELU); autograd keeps the exact
                    derivative, as a wrong forward kernel would
OPTIMIZER sgd (plain, the default), sgdm (momentum 0.9), adam, adamw.
Nothing here knows msprobe: an argument plant is an argument, which the shim
records as a record attribute, so the test finds the planted record from the
dumps; a hidden plant's record is named by culprit_suite.HIDDEN_RECORD from
the model code.
"""
import contextlib
import math
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS = 2
_VF = torch._C._VariableFunctions  # the builtins themselves, never recorded


@contextlib.contextmanager
def swapped(owner, name, fn):
    """owner.name is fn inside the block, whatever it was (a shim wrapper or
    the builtin) again after it."""
    old = getattr(owner, name)
    setattr(owner, name, fn)
    try:
        yield
    finally:
        setattr(owner, name, old)


def ln_eps_1(x, shape, w, b, eps, cudnn):
    """torch.layer_norm as F.layer_norm calls it, with eps 1.0 instead of eps."""
    return _VF.layer_norm(x, shape, w, b, 1.0, cudnn)


def bn_eps_1(x, w, b, rm, rv, training, momentum, eps, cudnn):
    """torch.batch_norm as F.batch_norm calls it, with eps 1.0 instead of eps."""
    return _VF.batch_norm(x, w, b, rm, rv, training, momentum, 1.0, cudnn)


_CE = torch._C._nn.cross_entropy_loss


def ce_smoothed(x, y, weight, reduction, ignore_index, smoothing):
    """torch._C._nn.cross_entropy_loss with label smoothing 0.3 instead of smoothing."""
    return _CE(x, y, weight, reduction, ignore_index, 0.3)


def gelu_tanh_kernel(x, approximate="none"):
    """aten::gelu's CPU kernel as a wrong device kernel: tanh whatever approximate says."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


@contextlib.contextmanager
def gelu_kernel_overridden():
    """aten::gelu on CPU runs gelu_tanh_kernel inside the block; deleting the
    library restores the builtin kernel."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding a previously registered kernel"
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("gelu", gelu_tanh_kernel, "CPU")
    try:
        yield
    finally:
        del lib


def in_forward(module, make_cm):
    """The context make_cm() holds for the duration of module's forward, every call."""
    held = []

    def enter(mod, args):
        held.append(make_cm())
        held[-1].__enter__()

    def leave(mod, args, out):
        held.pop().__exit__(None, None, None)

    module.register_forward_pre_hook(enter)
    module.register_forward_hook(leave)


class Block(nn.Module):
    def __init__(self, d, heads, plant):
        super().__init__()
        self.d, self.heads = d, heads
        self.ln1_w, self.ln1_b = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))
        self.ln2_w, self.ln2_b = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.plant = plant

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads
        eps1 = 1.0 if self.plant == "ln_eps" else 1e-5
        with swapped(torch, "layer_norm", ln_eps_1) if self.plant == "hid_ln_eps" else \
                contextlib.nullcontext():
            h = F.layer_norm(x, (d,), self.ln1_w, self.ln1_b, eps=eps1)
        q, k, v = self.qkv(h).split(d, dim=2)
        q = q.reshape(b, t, self.heads, hd).transpose(1, 2)
        k = k.reshape(b, t, self.heads, hd).transpose(1, 2)
        v = v.reshape(b, t, self.heads, hd).transpose(1, 2)
        scale = 1.0 / hd if self.plant == "attn_scale" else 1.0 / math.sqrt(hd)
        att = torch.matmul(q, k.transpose(-2, -1)).mul(scale)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        h = F.layer_norm(x, (d,), self.ln2_w, self.ln2_b, eps=1e-5)
        approx = "tanh" if self.plant == "gelu_tanh" else "none"
        h = self.fc(h)
        with gelu_kernel_overridden() if self.plant == "hid_gelu_tanh" else \
                contextlib.nullcontext():
            h = F.gelu(h, approximate=approx)
        x = x + self.out(h)
        return x


class GPT(nn.Module):
    def __init__(self, plant, vocab=64, d=32, layers=2, heads=2, t=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, t, d) * 0.02)
        # the plant sits in the last block: earlier blocks stay clean
        self.blocks = nn.ModuleList(Block(d, heads, plant if i == layers - 1 else "none")
                                    for i in range(layers))
        self.ln_w, self.ln_b = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[:, :idx.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        x = F.layer_norm(x, (x.shape[-1],), self.ln_w, self.ln_b, eps=1e-5)
        return self.head(x)


class LSTMLM(nn.Module):
    def __init__(self, vocab=50, d=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, d, num_layers=1, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        h, _ = self.lstm(self.emb(idx))
        return self.head(h)


class MLP(nn.Module):
    """LayerNorm, Linear, GELU: the smallest model whose Adam state showed as
    optimizer-state gaps before optimizer steps were records."""

    def __init__(self, plant, d=32, classes=10):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 64)
        self.act = nn.GELU(approximate="tanh" if plant == "gelu_tanh" else "none")
        self.fc2 = nn.Linear(64, classes)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(self.ln(x))))


def build(model, plant):
    """(module, inputs, targets, number of classes) with fixed seeds."""
    torch.manual_seed(0)
    if model == "resnet":
        import torchvision
        m = torchvision.models.resnet18(num_classes=10)
        if plant == "bn_eps":
            m.layer1[0].bn1.eps = 1.0
        elif plant == "hid_bn_eps":
            in_forward(m.layer1[0].bn1, lambda: swapped(torch, "batch_norm", bn_eps_1))
        x = torch.randn(4, 3, 32, 32)
        y = torch.randint(0, 10, (4,))
    elif model == "vit":
        import torchvision
        m = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                                 num_heads=2, hidden_dim=32, mlp_dim=64,
                                                 num_classes=10)
        last = m.encoder.layers[-1]
        if plant == "ln_eps":
            last.ln_2.eps = 1.0
        elif plant == "hid_ln_eps":
            in_forward(last.ln_2, lambda: swapped(torch, "layer_norm", ln_eps_1))
        elif plant == "hid_gelu_tanh":
            for mod in last.mlp.modules():
                if isinstance(mod, nn.GELU):
                    in_forward(mod, gelu_kernel_overridden)
        elif plant == "gelu_tanh":
            for mod in last.mlp.modules():
                if isinstance(mod, nn.GELU):
                    mod.approximate = "tanh"
        x = torch.randn(4, 3, 32, 32)
        y = torch.randint(0, 10, (4,))
    elif model == "lstm":
        m = LSTMLM()
        x = torch.randint(0, 50, (4, 16))
        y = torch.randint(0, 50, (4, 16))
    elif model == "mlp":
        m = MLP(plant)
        x = torch.randn(16, 32)
        y = torch.randint(0, 10, (16,))
    elif model == "gpt":
        m = GPT(plant)
        x = torch.randint(0, 64, (4, 16))
        y = torch.randint(0, 64, (4, 16))
    else:
        raise SystemExit("unknown model " + model)
    return m, x, y


def optimizer(name, params, plant):
    """The optimizer the script trains with; the plant changes one hyperparameter."""
    kw = {}
    if plant == "wd":
        kw["weight_decay"] = 0.1
    if plant == "opt_eps":
        kw["eps"] = 1e-3
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.05, **kw)
    if name == "sgdm":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, **kw)
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3, **kw)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, **kw)
    raise SystemExit("unknown optimizer " + name)


def main(argv):
    model, noise, plant = argv[1], argv[2], argv[3]
    opt_name = argv[4] if len(argv) > 4 else "sgd"
    if noise in ("fp32", "kernel"):
        torch.set_num_threads(1)
        torch.backends.mkldnn.enabled = False
    else:
        torch.set_num_threads(2)
    m, x, y = build(model, plant)
    opt = optimizer(opt_name, m.parameters(), plant)
    smoothing = 0.3 if plant == "smoothing" else 0.0
    for step in range(STEPS):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=noise == "bf16"):
            out = m(x)
            logits = out.reshape(-1, out.shape[-1])
            with swapped(torch._C._nn, "cross_entropy_loss", ce_smoothed) \
                    if plant == "hid_smoothing" else contextlib.nullcontext():
                loss = F.cross_entropy(logits, y.reshape(-1), label_smoothing=smoothing)
        loss.backward()
        opt.step()
        print("step %d loss %.6f" % (step, loss.item()), flush=True)


if __name__ == "__main__":
    main(sys.argv)
