"""Stands in for Huawei's msprobe package where it meets the shim
(test_dump_precision_debugger.py): its PrecisionDebugger wraps torch's APIs
when it is made, as msprobe's ApiRegistry does (the wrapper holds the
function it found, the shim's, and passes calls on through frames of its
own), computes statistics of every tensor a call returns (torch.max, min,
mean, norm, Tensor.clone) from inside this package, hooks the model's
modules to do the same, and writes its own stepN/proc<PID>/dump.json."""
