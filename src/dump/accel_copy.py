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

Never imported on a CPU-only run: the shim loads this file at the first
tensor that is not on the CPU.
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
