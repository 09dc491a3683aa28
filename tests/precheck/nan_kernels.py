"""A planted wrong kernel for acc_check's tests, registered by name in the
dump's api_list ("nan_kernels.mul") and so recorded as
Custom.nan_kernels.mul.N.forward: the product of its inputs, moved by
NAN_KERNEL_ULPS (default 40) units in the last place of float32 away from
the correctly rounded result, where msprobe's absolute-threshold standard for
mul allows a relative error of 2^-20 (8 to 16 ULPs). NAN_KERNEL_ULPS=0 makes
it the correct kernel."""
import os

import torch

ULPS = float(os.environ.get("NAN_KERNEL_ULPS", "40"))


def mul(a, b):
    out = torch.mul(a, b)
    if ULPS:
        out = out + out.abs() * (ULPS * 2.0 ** -24)
    return out
