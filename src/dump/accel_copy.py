"""Copies of accelerator tensors to the host for the dump shim (py_tensor.c).

Compiled into libmsprobe_py.so as a string and run inside the training
process. A CUDA (or ROCm) tensor is copied on a side stream of its device,
after the work already queued on the current stream (wait_stream), into
pinned host memory with non_blocking=True: training's stream is never
synchronised, and the copies of all the tensors of one call are in flight
together. Before it reads any byte of a call's tensors the shim waits on
the event recorded after each copy (event.synchronize(): that copy only, not
the device), so the host buffers are complete when read. record_stream
keeps the caching allocator from reusing a tensor's memory before the side
stream has read it.

stats() serves the statistics task: a device tensor's statistics are
computed on its device, on the current stream, and only the six numbers
come back (max, min, sum, norm, NaN count, Inf count, as float64), so a step
moves a few bytes a tensor across the bus instead of every activation.

Never imported on a CPU-only run: the shim loads this file at the first
tensor that is not on the CPU (or, for tests, when MSPROBE_TEST_HOST_COPY or
MSPROBE_TEST_DEVICE_STATS sends CPU tensors through it).
"""
import torch

_streams = {}   # torch.device -> side stream


def start(t):
    """Queue the copy of device tensor t (detached) into pinned host memory.
    Returns (host, event): host is contiguous and complete once
    event.synchronize() returned; event is None when the copy was synchronous
    (a device type without streams)."""
    dev = t.device
    if dev.type != "cuda":  # ROCm builds report "cuda" too
        return t.cpu(), None
    side = _streams.get(dev)
    if side is None:
        side = _streams[dev] = torch.cuda.Stream(device=dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side):
        host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        host.copy_(t, non_blocking=True)
        ev = torch.cuda.Event()
        ev.record(side)
    t.record_stream(side)
    return host, ev


def _stats_of(t):
    x = t.detach()
    if x.dtype == torch.bool:
        x = x.to(torch.uint8)
    elif x.dtype == torch.float16 and x.device.type == "cpu":
        x = x.float()  # exact; torch 1.13 has no CPU aminmax for half (the tests' path)
    # each line one kernel launch, the counts summed straight into float64:
    # launches, not bytes, are what this costs per tensor
    lo, hi = torch.aminmax(x)
    total = torch.sum(x, dtype=torch.float64)
    if x.is_floating_point():
        norm = torch.linalg.vector_norm(x, dtype=torch.float64)
        nan = torch.isnan(x).sum(dtype=torch.float64)
        inf = torch.isinf(x).sum(dtype=torch.float64)
        return torch.stack([hi.double(), lo.double(), total, norm, nan, inf])
    norm = torch.linalg.vector_norm(x.double())
    return torch.stack([hi.double(), lo.double(), total, norm])


class _LateEvent:
    """A CPU tensor's statistics (MSPROBE_TEST_DEVICE_STATS only: CPU tensors
    never come here otherwise) 'arrive' after a few polls, as a GPU's do, so
    that the tests exercise the shim holding records back until they do."""

    def __init__(self):
        self.polls = 0

    def query(self):
        self.polls += 1
        return self.polls > 3

    def synchronize(self):
        self.polls = 4


def stats(t):
    """Queue the statistics of tensor t (not empty) on its device. Returns
    (host, event): host is a float64 tensor [max, min, sum, norm] plus
    [NaN count, Inf count] for floating types, complete once
    event.synchronize() returned. The reductions are queued on
    the current stream, after the work that made t: they read t where the
    training's own kernels would, so no side stream, wait or record_stream
    is needed (each costs as much as a launch)."""
    if t.device.type != "cuda":
        return _stats_of(t), _LateEvent()
    res = _stats_of(t)
    host = torch.empty(res.shape, dtype=torch.float64, pin_memory=True)
    host.copy_(res, non_blocking=True)
    ev = torch.cuda.Event()
    ev.record()
    return host, ev


# torch.compile: while a compiled function runs, TorchDynamo compiles every
# Python frame it meets, these too when a wrapped call inside it reads a
# device tensor; record_stream cannot be compiled, so each such copy failed
# and fell back to a synchronous one. The shim's own frames are not model
# code: they run as they are (torch >= 2.1; older torch has no such hook).
_compiler = getattr(torch, "compiler", None)
if _compiler is not None and hasattr(_compiler, "disable"):
    start = _compiler.disable(start)
    stats = _compiler.disable(stats)
