#!/usr/bin/python3
"""Cost of one wrapped call outside the dumped steps (not a test): times
F.relu(x) and x + y on a one-element tensor and prints ns per call as JSON.
Run once plain and once under the shim with no step selected; the difference
is what the shim adds to every API call of a step it does not dump."""
import json
import time

import torch
import torch.nn.functional as F

N = 200000


def per_call(fn):
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(N):
            fn()
        best = min(best, (time.perf_counter() - t0) / N)
    return 1e9 * best


x = torch.ones(1)
y = torch.ones(1)
print(json.dumps({"relu_ns": per_call(lambda: F.relu(x)), "add_ns": per_call(lambda: x + y)}))
