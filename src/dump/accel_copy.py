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
import contextlib

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


# ---- windows: the statistics of many calls' tensors in few launches ----------
# Launching a torch operation costs the CPU about 10 us (an H200 host, torch
# 2.11); per-tensor reductions (aminmax, sum, norm, NaN and Inf counts: ten
# launches) made the statistics task cost 17x a resnet18 step. Instead each
# call's float tensors are copied, in one launch, into a window: one float32
# buffer per device (bf16 and fp16 convert exactly; float64, integer and bool
# tensors go to a float64 one, exact too). When it is full, or its
# records must be written, the window is reduced in a fixed number of
# launches, whatever it holds: rows of CHUNK elements by aminmax and var_mean
# (mean and mean of squares); the chunks that hold a boundary between tensors
# are gathered and reduced piece by piece with segment_reduce. Only those
# partial results come back, in one copy; py_devstats.c combines them in
# float64 per tensor (sums, roots). Accumulation is float32 within a row (as
# msprobe's own statistics), float64 within a piece and across rows and
# pieces: mean within about 1e-6 of mean(|x|),
# norm within about 1e-6 relative, max and min exact. A tensor whose partial
# results are not finite (NaN, Inf, an overflow) or whose squares underflow is
# read again exactly from the window (win_exact) when its results arrive.

_C = getattr(torch, "_C", None)
_here = contextlib.nullcontext()  # the current stream: no switch


_grad_on = getattr(torch, "is_grad_enabled", None)
_set_grad = getattr(_C, "_set_grad_enabled", None) or (lambda on: torch.set_grad_enabled(on))


def win_new(device, n, wide=0):
    """A window: (buf, ws): a float32 buffer of n elements on device (wide:
    float64, for float64, integer and bool tensors), and the stream it is
    written and reduced on, as (stream, device index, raw handle), or None on
    the CPU."""
    buf = torch.empty(n, dtype=torch.float64 if wide else torch.float32, device=device)
    if buf.device.type != "cuda":
        return buf, None
    s = torch.cuda.current_stream(buf.device)
    return buf, (s, buf.device.index, s.cuda_stream)


def _raw_stream(i):
    return torch.cuda.current_stream(i).cuda_stream


_raw_stream = getattr(_C, "_cuda_getCurrentRawStream", _raw_stream)


def win_put(buf, ws, off, n, ts, flat):
    """Copy tensors ts (n elements together) into buf[off:off+n], in order,
    in one launch, on the window's stream: the stream their calls ran on
    (py_devstats.c opens a new window when the current stream changes), which
    may no longer be the current one when their copy waited. flat[i] is 1
    where ts[i] is one-dimensional: cat takes it as it is (a reshape costs a
    torch call, about 40% of a resnet18 step's tensors are 1-D)."""
    grad = _grad_on()  # out= refuses inputs that require grad; no_grad() costs more
    _set_grad(False)
    try:
        moved = ws is not None and _raw_stream(ws[1]) != ws[2]
        with torch.cuda.stream(ws[0]) if moved else _here:
            torch.cat([t if f else t.reshape(-1) for t, f in zip(ts, flat)],
                      out=buf.narrow(0, off, n))
    finally:
        _set_grad(grad)
    return True


def win_flush(buf, ws, nchunks, chunk, cuts, nidx):
    """Reduce the first nchunks rows of chunk elements of buf, and the pieces
    of some of them, on the window's stream. cuts: int64s (a bytearray), the
    nidx rows that hold pieces, then the pieces' lengths, in order (empty:
    no pieces). Returns (host, event): host is float64 [4, nchunks + pieces]:
    max, min, mean and mean of squares of each row, then max, min, sum and
    sum of squares of each piece (py_devstats.c scales, adds and takes the
    root); complete once event.synchronize() returned."""
    if ws is None:
        return _reduce(buf, nchunks, chunk, cuts, nidx).double(), _LateEvent()
    with torch.cuda.stream(ws[0]):
        res = _reduce(buf, nchunks, chunk, cuts, nidx)
        host = torch.empty(res.shape, dtype=torch.float64, pin_memory=True)
        host.copy_(res, non_blocking=True)
        ev = torch.cuda.Event()
        ev.record()
        return host, ev


def _int64s(b):
    """A bytearray of native int64s as a CPU tensor (its own memory)."""
    if hasattr(torch, "frombuffer"):
        return torch.frombuffer(b, dtype=torch.int64)
    return torch.tensor(memoryview(b).cast("q").tolist(), dtype=torch.int64)  # torch < 1.10


def _reduce(buf, nchunks, chunk, cuts, nidx):
    # each torch call here is a launch and about 10 us of the CPU's (a
    # window's flush is about 20): what can be done in float64 on the host
    # is (sums from means, roots)
    with torch.no_grad():
        rows = buf.narrow(0, 0, nchunks * chunk).view(nchunks, chunk)
        # two passes over the window: aminmax, and var_mean (Welford) for the
        # mean and the mean of squares together (var + mean * mean)
        mn, mx = torch.aminmax(rows, dim=1)
        var, mean = torch.var_mean(rows, dim=1, correction=0)
        parts = [torch.stack([mx, mn, mean, torch.addcmul(var, mean, mean)]).double()]
        if len(cuts):
            dev = buf.device
            c = _int64s(cuts)
            if dev.type == "cuda":  # pinned, so that the copy does not wait
                c = c.pin_memory()
            c = c.to(dev, non_blocking=True)
            i, ln = c.narrow(0, 0, nidx), c.narrow(0, nidx, c.numel() - nidx)
            # in float64: a piece is summed one element after another (a
            # float32 sum of 512 ones drifts by 1e-6), and the pieces are a
            # few rows a tensor, not the window; max and min convert exactly
            gd = rows.index_select(0, i).view(-1).double()
            # unsafe: the check that lengths sum to gd's size would read them
            # back (a wait for the GPU); they do by construction
            parts.append(torch.stack([
                torch.segment_reduce(gd, "max", lengths=ln, unsafe=True),
                torch.segment_reduce(gd, "min", lengths=ln, unsafe=True),
                torch.segment_reduce(gd, "sum", lengths=ln, unsafe=True),
                torch.segment_reduce(gd * gd, "sum", lengths=ln, unsafe=True)]))
        return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]


def win_exact(buf, off, n):
    """The exact statistics of buf[off:off+n] (as stats()), on the host now:
    the rare tensor whose window results were not finite."""
    with torch.no_grad():
        return _stats_of(buf.narrow(0, off, n)).cpu()


# torch.compile: while a compiled function runs, TorchDynamo compiles every
# Python frame it meets, these too when a wrapped call inside it reads a
# device tensor; record_stream cannot be compiled, so each such copy failed
# and fell back to a synchronous one. The shim's own frames are not model
# code: they run as they are (torch >= 2.1; older torch has no such hook).
_compiler = getattr(torch, "compiler", None)
if _compiler is not None and hasattr(_compiler, "disable"):
    start = _compiler.disable(start)
    stats = _compiler.disable(stats)
    win_put = _compiler.disable(win_put)
    win_flush = _compiler.disable(win_flush)
