"""accel_copy.py's order of operations, on a stand-in torch.cuda (no GPU can be
lent to this test): the copy of a device tensor waits for the work queued on
the current stream, runs on the device's own side stream, non-blocking, into
pinned memory, and its event is recorded after it on that stream; the tensor
is marked as used by the side stream. The real CUDA run is still to be done on
a machine with a GPU (see msprobe-dump(1), ACCELERATORS)."""
import os
import sys
import types
import unittest

import dumptest as dt  # noqa: F401  (path set-up shared with the dump tests)

SOURCE = os.path.join(os.environ.get("MSPROBE_SOURCE_DIR", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), "src", "dump", "accel_copy.py")


class Log(list):
    def add(self, *what):
        self.append(what)


def fake_torch(log):
    torch = types.ModuleType("torch")
    cuda = types.ModuleType("torch.cuda")
    state = {"stream": "default"}

    class Device:
        def __init__(self, kind, index):
            self.type, self.index = kind, index

        def __hash__(self):
            return hash((self.type, self.index))

        def __eq__(self, o):
            return (self.type, self.index) == (o.type, o.index)

    class Stream:
        made = 0

        def __init__(self, device):
            Stream.made += 1
            self.name = "side%d" % Stream.made
            log.add("new stream", self.name, device.index)

        def wait_stream(self, other):
            log.add("wait_stream", self.name, other)

    class Ctx:
        def __init__(self, s):
            self.s = s

        def __enter__(self):
            self.prev, state["stream"] = state["stream"], self.s.name

        def __exit__(self, *a):
            state["stream"] = self.prev

    class Event:
        def record(self, s):
            log.add("record", s.name, state["stream"])

    class Host:
        def copy_(self, src, non_blocking=False):
            log.add("copy", state["stream"], non_blocking, src.name)
            return self

    class Tensor:
        def __init__(self, name, device):
            self.name, self.device, self.shape, self.dtype = name, device, (2, 3), "f32"

        def record_stream(self, s):
            log.add("record_stream", self.name, s.name)

        def cpu(self):
            log.add("cpu", self.name)
            return "host of " + self.name

    def empty(shape, dtype=None, pin_memory=False):
        log.add("empty", shape, dtype, pin_memory, state["stream"])
        return Host()

    cuda.Stream = Stream
    cuda.Event = Event
    cuda.stream = Ctx
    cuda.current_stream = lambda dev: "current%d" % dev.index
    torch.cuda = cuda
    torch.empty = empty
    return torch, Device, Tensor


class AccelCopyOrder(unittest.TestCase):
    def load(self, log):
        torch, Device, Tensor = fake_torch(log)
        saved = sys.modules.get("torch")
        sys.modules["torch"] = torch
        try:
            ns = {"__name__": "msprobe_accel_copy"}
            with open(SOURCE) as f:
                exec(f.read(), ns)
        finally:
            if saved is not None:
                sys.modules["torch"] = saved
            else:
                del sys.modules["torch"]
        return ns["start"], Device, Tensor

    def test_cuda_copy_is_async_on_a_side_stream_after_queued_work(self):
        log = Log()
        start, Device, Tensor = self.load(log)
        a = Tensor("a", Device("cuda", 1))
        host, ev = start(a)
        self.assertIsNotNone(ev)
        self.assertEqual(log, [
            ("new stream", "side1", 1),
            ("wait_stream", "side1", "current1"),          # after training's queued work
            ("empty", (2, 3), "f32", True, "side1"),        # pinned host memory
            ("copy", "side1", True, "a"),                   # non-blocking, on the side stream
            ("record", "side1", "side1"),                   # event after the copy
            ("record_stream", "a", "side1"),                # memory kept until the copy is done
        ])
        del log[:]
        start(Tensor("b", Device("cuda", 1)))
        self.assertNotIn(("new stream", "side2", 1), log, "one side stream per device")
        start(Tensor("c", Device("cuda", 0)))
        self.assertIn(("new stream", "side2", 0), log)

    def test_other_devices_copy_synchronously(self):
        log = Log()
        start, Device, Tensor = self.load(log)
        host, ev = start(Tensor("n", Device("npu", 0)))
        self.assertEqual((host, ev), ("host of n", None))
        self.assertEqual(log, [("cpu", "n")])


if __name__ == "__main__":
    unittest.main()
