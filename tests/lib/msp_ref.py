"""Reference results computed in the tests themselves (numpy, float64), never
by the code under test."""
import math

import numpy as np


def gelu(x, tanh=False):
    """torch's gelu in float64: erf, or the tanh approximation."""
    x = x.astype(np.float64)
    if tanh:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2)))


def ordinal(k):
    """k as English writes it: 1st, 2nd, 3rd, 11th, 72nd."""
    return "%d%s" % (k, "th" if k % 100 in (11, 12, 13) else
                     {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th"))
