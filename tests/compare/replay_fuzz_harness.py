"""The fuzz campaign's harness (test_replay_fuzz.py runs it in a Python of its
own, since an audit hook cannot be taken back).

It loads the replay worker's source exactly as compare embeds it (the shim's
API rules, acc_check's metrics, replay.py), runs its setup(), then wraps every
public callable of torch, torch.nn.functional, torch._VF and torch.Tensor (and
torch.optim's optimizers' step) with a recorder, and adds an audit hook that
logs every event that writes, executes, imports, unpickles or connects. Then
it sends RUNS jobs of random record names and argument texts through the
worker's replay() and prints, as JSON, the outermost calls the jobs made, the
audit events seen, and the answers' statuses. It judges nothing: the test
does, against the shim's own API list.

    python replay_fuzz_harness.py SOURCE_DIR RUNS SEED
"""
import json
import os
import random
import resource
import signal
import sys

SOURCE_DIR, RUNS, SEED = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

parts = []
for p in ("dump/api_discover.py", "compare/replay_acc.py", "compare/replay.py",
          "compare/replay_args.py", "compare/replay_bound.py", "compare/replay_backward.py",
          "compare/replay_worker.py"):
    with open(os.path.join(SOURCE_DIR, "src", p)) as f:
        parts.append(f.read())
W = {"__name__": "msprobe_replay_fuzz"}
exec(compile("\n".join(parts), "replay-worker", "exec"), W)
assert W["setup"]() is None
import torch  # noqa: E402  (the worker's own, already imported)

# ---- recorders ------------------------------------------------------------------

STATE = {"depth": 0, "active": False, "called": {}}


def recorder(name, orig):
    def wrapped(*a, **k):
        if STATE["active"] and STATE["depth"] == 0:
            STATE["called"][name] = STATE["called"].get(name, 0) + 1
        STATE["depth"] += 1
        try:
            return orig(*a, **k)
        finally:
            STATE["depth"] -= 1
    wrapped.__wrapped__ = orig
    return wrapped


TENSOR_TRAPS = {"__reduce_ex__", "__reduce__", "__setstate__", "__deepcopy__", "__dir__"}
for space, obj in (("torch", torch), ("torch.nn.functional", torch.nn.functional),
                   ("torch._VF", torch._VF), ("torch.Tensor", torch.Tensor)):
    names = dir(obj)
    for n in names:
        if n.startswith("_") and not (space == "torch.Tensor" and (
                n in W["OPERATORS"] or n in W["INPLACE_OPERATORS"] or n in TENSOR_TRAPS)):
            continue
        try:
            v = getattr(obj, n)
        except Exception:
            continue
        if not callable(v) or isinstance(v, type) or type(v).__name__ == "module":
            continue
        try:
            setattr(obj, n, recorder(space + "." + n, v))
        except (AttributeError, TypeError):
            pass
for cls in [v for v in vars(torch.optim).values() if isinstance(v, type)]:
    if isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer):
        for meth in ("__init__", "step"):
            if meth in vars(cls):
                setattr(cls, meth, recorder("%s.%s.%s" % (cls.__module__, cls.__name__, meth),
                                            vars(cls)[meth]))

EVENTS = {}
WATCHED = ("os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
           "subprocess.Popen", "pickle.find_class", "marshal.load", "socket.connect",
           "socket.bind", "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink",
           "os.link", "os.truncate", "os.chmod", "os.chown", "shutil.", "ctypes.", "exec",
           "import", "compile")
# what the worker itself may import or compile while it replays
QUIET_IMPORTS = {"re", "inspect", "contextlib", "warnings", "importlib", "ast", "math"}
TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def audit(event, args):
    if not STATE["active"]:
        return
    if event == "open":
        mode = args[1] if len(args) > 1 else "r"
        flags = args[2] if len(args) > 2 else 0
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                 (isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        if writes:
            EVENTS["open for writing"] = EVENTS.get("open for writing", 0) + 1
        return
    if event == "import" and args and (args[0] in QUIET_IMPORTS or args[0] in sys.modules):
        return
    if event == "compile" or event == "marshal.loads":
        return  # the literal parser's ast.parse, or an import's code: never run by themselves
    if event == "exec" and args and getattr(args[0], "co_filename", "").startswith(TORCH_DIR):
        return  # torch importing its own module lazily (-I: from its own directory)
    if event == "import" and args and str(args[0]).startswith("torch."):
        return
    if event.startswith(WATCHED):
        key = event + (":" + str(args[0])[:60] if event == "import" else "")
        EVENTS[key] = EVENTS.get(key, 0) + 1


sys.addaudithook(audit)

# ---- jobs -------------------------------------------------------------------------

rng = random.Random(SEED)
with open(os.environ["MSP_FUZZ_APIS"]) as f:
    SHIM = [line.split("\t")[1].strip() for line in f
            if "\t" in line and not line.startswith("#")]
HOSTILE = ["Torch.load", "Torch.save", "Torch.from_file", "Tensor.save", "Torch.set_default_dtype",
           "Torch.set_autocast_enabled", "Torch.manual_seed", "Torch.__setattr__",
           "Tensor.__setattr__", "Tensor.__reduce_ex__", "Tensor.__init_subclass__",
           "Tensor.__class__", "Torch.compile", "Torch.jit", "Torch._C", "Tensor.register_hook",
           "Tensor.backward", "Tensor.numpy", "Tensor.tolist", "Tensor.storage",
           "Tensor.share_memory_", "Tensor.apply_", "Tensor.map_", "Torch.hub", "Torch.ops",
           "Torch.library", "Torch.use_deterministic_algorithms", "Torch.set_num_threads",
           "Functional.handle_torch_function", "Torch.set_grad_enabled", "Torch.Generator",
           "Torch.Tensor", "Torch.nn", "Torch.os", "Torch.sys", "Torch.__import__",
           "Torch.eval", "Torch.exec", "Torch.__builtins__", "Tensor.__getattribute__",
           "Tensor.__reduce__", "Tensor.__deepcopy__", "Tensor.__dir__", "Torch.classes",
           "Torch.overrides", "Torch.autograd", "Torch.distributed", "VF.__getattr__",
           "Torch.set_printoptions", "Torch.set_flush_denormal", "Torch.seed",
           "Torch.set_rng_state", "Torch.save_state", "Tensor.set_", "Tensor.resize_",
           "Torch.lobpcg"]
OPTIMIZERS = ["torch.optim.sgd.SGD", "torch.optim.adamw.AdamW", "torch.optim.adam.Adam",
              "torch.optim.Optimizer", "torch.optim.optimizer.Optimizer",
              "torch.optim.lr_scheduler.StepLR", "torch.optim.swa_utils.AveragedModel",
              "os.system", "builtins.eval", "torch.optim_evil.X", "torch.optim.__init__",
              "torch.optim.sgd.torch", "torch.optim.sgd.SGD.__init__", "torch.load",
              "torch.optim..SGD", "torch.optim.sgd._SGD"]
TEXTS = ["0", "1", "-1", "2", "3", "1e300", "-1e-300", "nan", "inf", "None", "True", "False",
         "0.5", "10**100", str(1 << 40), str(-(1 << 62)), "'mean'", "'sum'", "'none'", "'tanh'",
         "'same'", "'valid'", "'bilinear'", "'floor'", "'fro'", "'ij,jk->ik'", "'cpu'",
         "'cuda:0'", "'/etc/passwd'", "'npu/step0/rank0/dump.h5'", "'../../.ssh/authorized_keys'",
         "\"__import__('os').system('touch /tmp/x')\"", "__import__('os')",
         "open('x', 'w')", "os.system('id')", "lambda: 0", "torch.float32", "torch.float64",
         "torch.bfloat16", "torch.int64", "torch.strided", "torch.contiguous_format",
         "torch.load", "torch.save", "torch.device('cpu')", "device(type='cpu')",
         "torch.Size([2, 2])", "slice(0, 2, None)", "Ellipsis", "(0, 1)", "(1, 1)", "[0, 1]",
         "(2, 2)", "((1, 2), (3, 4))", "{'a': 1}", "{}", "()", "[]", "(0, " + str(1 << 31) + ")",
         "'" + "A" * 200 + "'", "(" * 200 + ")" * 200, "[" * 5000, "1" * 5000,
         "torch.__class__", "torch._C", "torch.nn.functional", "<built-in function print>",
         "<Tensor>", "f'{1}'", "b'abc'", "1j", "1+2j", "print", "exec", "...", "-0.0"]


def text():
    t = rng.choice(TEXTS)
    r = rng.random()
    if r < 0.1:
        return "(%s, %s)" % (t, rng.choice(TEXTS))
    if r < 0.15:
        return "[%s]" % t
    if r < 0.2:
        return "{%r: %s}" % (rng.choice(["dim", "p", "mode", "__class__"]), t)
    return t


def name():
    r = rng.random()
    if r < 0.45:
        api = rng.choice(SHIM)
    elif r < 0.85:
        api = rng.choice(HOSTILE)
    else:
        a = rng.choice(SHIM + HOSTILE)
        cut = rng.randrange(len(a) + 1)
        api = a[:cut] + rng.choice([".", "..", "__", "_", ".load", ".__class__", "\u0430", "",
                                    ".x.y"]) + a[cut:]
    return api, "%s.%d.%s" % (api, rng.randrange(3), rng.choice(["forward"] * 5 + ["backward"]))


def tensor():
    shape = rng.choice([(4,), (2, 3), (2, 2), (1, 2, 4, 4), (3, 3), ()])
    dt = rng.choice([torch.float32, torch.float32, torch.float64, torch.bfloat16, torch.int64])
    t = torch.randn(shape, generator=GEN)
    return t.to(dt) if dt != torch.int64 else (t * 3).to(dt)


GEN = torch.Generator().manual_seed(SEED)


def job(i):
    if rng.random() < 0.06:  # an optimizer step
        args = {"class": rng.choice(OPTIMIZERS), "group.0.params": "1",
                "group.0.lr": rng.choice(["0.1", "'x'", "None", "-1", "1e300"])}
        for k in ("momentum", "weight_decay", "betas", "eps", "foreach", "maximize"):
            if rng.random() < 0.3:
                args["group.0." + k] = text()
        p = tensor().float()
        tensors = {("f", "input.param.0"): p, ("f", "input.grad.0"): torch.randn_like(p),
                   ("f", "output.param.0"): p.clone()}
        return ({"id": i, "kind": "optimizer", "name": "Optimizer.SGD.0.step", "args": args},
                tensors, "Optimizer")
    api, nm = name()
    args = {}
    x = tensor()
    # half the time an output like the input: elementwise APIs then replay through
    tensors = {("f", "input.0"): x, ("f", "output.0"): x.clone() if rng.random() < 0.5
               else tensor()}
    for k in range(rng.choice([0, 0, 1, 2, 3])):
        role = rng.choice(["input.%d" % (k + 1), "kwarg." + rng.choice(
            ["dim", "p", "mode", "reduction", "approximate", "padding", "weight", "inplace",
             "path", "f", "pickle_module", "map_location", "dtype", "out", "generator",
             "keepdim", "equation", "device", "niter", "tol", "k"])])
        if rng.random() < 0.25:
            tensors[("f", role)] = tensor()
        else:
            args[role] = text()
    if rng.random() < 0.05:
        args["autocast"] = rng.choice(["cpu:torch.bfloat16", "cpu:os.system", "x"])
    kind = "backward" if nm.endswith("backward") else "forward"
    j = {"id": i, "kind": kind, "name": nm, "args": args}
    if kind == "backward":
        j["forward"] = nm.rsplit(".", 1)[0] + ".forward"
        tensors = {(("f" if r.startswith(("input", "kwarg")) else "b"), r): t
                   for (_, r), t in tensors.items()}
        tensors[("b", "input.0")] = tensor()
        tensors[("b", "output.0")] = tensor()
    return j, tensors, api


class TimeUp(Exception):
    pass


def on_alarm(sig, frame):
    raise TimeUp()


signal.signal(signal.SIGALRM, on_alarm)
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
with open("/proc/self/statm") as f:
    base = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
resource.setrlimit(resource.RLIMIT_AS, (base + (3 << 30), hard))

statuses = {}
per_job = []  # (api named, outermost calls it made)
for i in range(RUNS):
    j, tensors, api = job(i)
    STATE["called"] = {}
    STATE["active"] = True
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        res = W["replay"](j, tensors)
        status = res.get("status", "?")
    except W["Skip"]:
        status = "skip"
    except TimeUp:
        status = "time"
    except BaseException as e:  # noqa: B902 (the worker turns these into "replay failed")
        status = "error:" + type(e).__name__
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        STATE["active"] = False
        STATE["depth"] = 0
    statuses[status] = statuses.get(status, 0) + 1
    per_job.append([api, j["name"], sorted(STATE["called"])])

print(json.dumps({"statuses": statuses, "events": EVENTS, "jobs": per_job,
                  "allowed": sorted(W["ALLOWED"])}))
