"""msprobe's replay worker: re-runs recorded calls on the CPU.

compare (src/compare/cmp_replay.c) starts this with a Python that has torch
(`python -c <this source>`) and sends it jobs on stdin; it answers one JSON
line per job on stdout. A job is one record of the compare side: an API's
forward call, its backward, or an optimizer step, with the compare side's
tensors (inputs, and what the compare side computed) and the non-tensor
arguments of the bench side (so a changed argument shows). For each output
the worker computes:

  R64   the call re-run in float64 on the compare side's inputs
  Rn    the call re-run in the compare side's own dtypes (under CPU autocast
        when that is how the compare side got its output dtypes): what that
        dtype's rounding alone does, on the CPU's own kernels
  e_cmp = ||compare output - R64|| / ||R64||
  e_ref = ||Rn - R64|| / ||R64||
  e_kernel  what any correct kernel of a reducing op may differ by (see
        kernel_bounds): the same-dtype replay is one kernel, not the bound

and compare decides: introduced when e_cmp is well above e_ref (see
msprobe-compare(1), REPLAY). Integer and bool outputs give the share of
elements that differ instead of a norm.

compare sends the bench side of a record it finds introduced as a second
job, the check that the call is rebuilt exactly: a record whose bench output
the replay of the bench inputs does not reproduce is not judged by replay.

The wire format and the worker's process (sandbox, job loop, the kept
worker) are replay_worker.py's; arguments are rebuilt by replay_args.py's
literal parser; the kernel bound is replay_bound.py's; a backward record's
replay, in either layout (ours, msprobe's grad_fn), is replay_backward.py's.
compare embeds them after this source, in one namespace.
A job with "acc": true (acc_check) also gets, per output, "acc": {"dtype",
"shape", "dev", "ref"}: msprobe's precision-standard metrics of the output
and of the same-dtype replay, each against R64 (acc_metrics, from
replay_acc.py, which the worker runs before this source); with "acc":
{"keep": true} (--save_error_data) R64 itself too, as "bench" (acc_bench). A job's
"references" ({custom name: "pkg.mod.fn"}, from acc_check --reference) lets
a Custom record be replayed with the function the user names.

Nothing in a job is executed as code, and a dump is untrusted input (it may
come from anyone): arguments are rebuilt from their repr text by a literal
parser (numbers, strings, None/True/False, tuples, lists, dicts, slices,
torch dtypes/devices/sizes/layouts/memory formats), a string only where the
API's signature takes one and never a path; the only callables are the APIs
the dump shim itself would wrap in this torch (api_discover.py's discover(),
which compare runs before this source) less DENIED below, and torch.optim's
optimizer classes. The worker is sandboxed (sandbox_enter, msprobe-compare(1),
SECURITY): isolated Python, a private working directory, rlimits, Landlock
where the kernel has it, its own process group, killed with compare. Jobs
run in a child the worker forks (job_child), each under its own time and
memory limit; the child is replaced after any record whose call fails or
that changes what the next record would see (state_print), so every record
starts from a clean state.
"""
import ast
import inspect
import json
import math
import struct
import sys


class Skip(Exception):
    """The record cannot be replayed; the message says why."""


RANDOM = {"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
          "feature_alpha_dropout", "rrelu", "gumbel_softmax", "bernoulli", "multinomial",
          "normal", "poisson", "rand", "rand_like", "randn", "randn_like", "randint",
          "randint_like", "randperm", "uniform", "native_dropout", "fused_dropout",
          "exponential", "geometric", "log_normal", "cauchy", "random"}
UNINITIALIZED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}

torch = None


# ---- what may be called --------------------------------------------------------

# Never called, whatever a dump names and whatever the API list holds: the
# list is torch's own overridable functions, and this is the guard should a
# torch ever put one of these there.
DENIED_WORDS = {"load", "save", "file", "open", "pickle", "exec", "eval", "system", "spawn",
                "fork", "compile", "script", "hub", "library", "seed", "autocast",
                "deterministic", "storage", "hook", "setattr", "delattr", "getattr", "stream",
                "share", "pin", "memory", "thread", "threads", "env", "path", "dir", "module"}
DENIED_PREFIXES = ("set_", "register", "use_", "get_")
ALLOWED = set()       # "torch.nn.functional.gelu", ...: filled by main()
ALLOWED_WHY = ""      # why none is, when discovery failed
SIGNATURES = {}       # id(callable) -> torch.overrides' lambda with its signature


def denied(full):
    """Why the API full ("torch.Tensor.add") is never replayed, or None."""
    name = full.rsplit(".", 1)[-1]
    if name.startswith("__") and name.endswith("__"):
        if name not in OPERATORS and name not in INPLACE_OPERATORS:
            return "a Python protocol method"
        return None
    if name.startswith("_"):
        return "a private name"
    low = name.lower()
    for w in low.split("_"):
        if w in DENIED_WORDS:
            return "a name holding %r (loaders, savers, files, processes, global state)" % w
    if low.startswith(DENIED_PREFIXES):
        return "a setter or getter of global state"
    return None


def allowed_apis():
    """The APIs the dump shim would wrap in this torch (api_discover.py's
    discover(), the same rules), less the denied ones."""
    global ALLOWED_WHY
    try:
        names = discover(torch)
    except Exception as e:
        ALLOWED_WHY = "the API list of torch %s cannot be made (%s)" % (
            torch.__version__, str(e).splitlines()[0][:120] if str(e) else type(e).__name__)
        return set()
    return {n for n in names if not denied(n)}


def signatures():
    try:
        import torch.overrides as ov
        return {id(f): lam for f, lam in ov.get_testing_overrides().items()}
    except Exception:
        return {}


# ---- tensors ---------------------------------------------------------------

def decode(raw, dtype, shape):
    dt = getattr(torch, dtype.split(".")[-1], None)
    if not isinstance(dt, torch.dtype):
        raise Skip("dtype %s is not known to this torch" % dtype)
    if len(raw) == 0:
        return torch.empty(shape, dtype=dt)
    # read_fd's bytearray is this tensor's own: wrapped, not copied
    buf = raw if isinstance(raw, bytearray) else bytearray(raw)
    return torch.frombuffer(buf, dtype=dt).reshape(shape)


def cast(v, fn):
    if torch.is_tensor(v):
        return fn(v)
    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        return tuple(cast(x, fn) for x in v)
    if isinstance(v, list):
        return [cast(x, fn) for x in v]
    if isinstance(v, dict):
        return {k: cast(x, fn) for k, x in v.items()}
    return v


def to64(t):
    return t.double() if t.is_floating_point() else t.clone()


def same(t):
    return t.clone()


# ---- the call ----------------------------------------------------------------

def load_reference(path):
    """The function a dotted path names ("pkg.mod.fn"), imported here: what
    acc_check's --reference gives a Custom record to be replayed with. The
    user names it; nothing in a dump does."""
    import importlib
    mod, _, attr = path.rpartition(".")
    try:
        fn = getattr(importlib.import_module(mod), attr, None) if mod else None
    except Exception as e:
        raise Skip("reference %s cannot be imported: %s" % (path, str(e).splitlines()[0][:120]))
    if fn is None or not callable(fn):
        raise Skip("reference %s is not a function" % path)
    return fn


def resolve(name, refs=None):
    parts = name.split(".")
    if len(parts) < 4:
        raise Skip("record name %s is not PREFIX.API.N.PASS" % name)
    prefix, api = parts[0], ".".join(parts[1:-2])
    base = api.split(".")[-1]
    if prefix in ("Distributed",):
        raise Skip("communication op: not replayed in one process")
    if prefix == "Custom" and refs and api in refs:
        return prefix, base, load_reference(refs[api])
    if prefix == "Custom":
        raise Skip("custom callable: not replayed")
    if prefix in ("NPU", "Aten", "Module", "Jit", "MindSpeed"):
        raise Skip("%s record: no CPU kernel to replay it" % prefix)
    space = {"Functional": "torch.nn.functional", "Torch": "torch", "Tensor": "torch.Tensor",
             "VF": "torch._VF"}.get(prefix)
    if space is None or "." in api:
        raise Skip("%s: not an API this worker knows" % name)
    full = space + "." + api
    why = denied(full)
    if why:
        raise Skip("%s is never replayed: %s (msprobe-compare(1), SECURITY)" % (full, why))
    if full not in ALLOWED:
        raise Skip("%s is not an API the dump shim wraps in torch %s%s, so no dump of it "
                   "is replayed (msprobe-compare(1), SECURITY)" % (
                       full, torch.__version__, ": " + ALLOWED_WHY if ALLOWED_WHY else ""))
    owner = {"torch.nn.functional": torch.nn.functional, "torch": torch,
             "torch.Tensor": torch.Tensor, "torch._VF": torch._VF}[space]
    fn = owner.__dict__.get(api) if space == "torch.Tensor" else vars(owner).get(api)
    if fn is None and space in ("torch.Tensor", "torch._VF"):
        fn = getattr(owner, api, None)
    if fn is None or not callable(fn) or isinstance(fn, type):
        raise Skip("%s.%s does not exist in torch %s" % (prefix, api, torch.__version__))
    if base in UNINITIALIZED:
        raise Skip("allocator of uninitialized memory: nothing to replay")
    return prefix, api, fn


class Leaf:
    """A recorded value, told apart from the dicts that stand for containers."""
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


def _insert(tree, path, value, role):
    node = tree
    for k in path[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise Skip("argument %s is both a value and a container" % role)
    if path[-1] in node:
        raise Skip("argument %s recorded twice" % role)
    node[path[-1]] = Leaf(value)


def _rebuild(node, role):
    if isinstance(node, Leaf):
        return node.v
    n = max(node) + 1
    missing = [i for i in range(n) if i not in node]
    if missing:
        raise Skip("argument %s.%d was not recorded" % (role, missing[0]))
    return tuple(_rebuild(node[i], "%s.%d" % (role, i)) for i in range(n))


def call_tensors(tensors, args_text, rec, fc=None):
    """The record's argument tensors by role, each cast once by fc, with every
    "alias.<role>" role the very object of the role it names."""
    objs = {}
    for (r, role), t in tensors.items():
        if r == rec and (role.startswith("input.") or role.startswith("kwarg.")):
            objs[role] = t if fc is None else fc(t)
    for key, target in args_text.items():
        if key.startswith("alias.") and key[6:] in objs and target in objs:
            objs[key[6:]] = objs[target]
    return objs


def build_call(objs, args_text):
    """Positional and keyword arguments from roles input.N[.M] / kwarg.NAME[.M]:
    tensors from objs (role -> tensor), non-tensor values from args_text."""
    pos, kw = {}, {}
    items = list(objs.items())
    have = set(objs)
    for key, text in args_text.items():
        if (key.startswith("input.") or key.startswith("kwarg.")) and key not in have:
            if text.startswith("<") and text.endswith(">"):
                raise Skip("argument %s was recorded as %s" % (key, text))
            items.append((key, parse_value(key, text)))
    for role, v in items:
        parts = role.split(".")
        try:
            if parts[0] == "input":
                _insert(pos, [int(p) for p in parts[1:]], v, role)
            else:
                _insert(kw, [parts[1]] + [int(p) for p in parts[2:]], v, role)
        except ValueError:
            raise Skip("role %s is not a call argument" % role)
    args = list(_rebuild(pos, "input")) if pos else []
    kwargs = {k: _rebuild(v, "kwarg." + k) for k, v in kw.items()}
    return args, kwargs


def flatten_out(out):
    res = {}

    def walk(v, role, depth):
        if torch.is_tensor(v):
            res[role] = v
        elif isinstance(v, (tuple, list)) and depth < 3:
            for i, it in enumerate(v):
                walk(it, "%s.%d" % (role, i), depth + 1)

    if isinstance(out, (tuple, list)):
        for i, it in enumerate(out):
            walk(it, "output.%d" % i, 1)
    else:
        walk(out, "output.0", 1)
    return res


INPLACE_DUNDER = {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
                  "__ifloordiv__", "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__",
                  "__ilshift__", "__irshift__", "__imatmul__"}


def _inplace_at(fn):
    """The position of fn's "inplace" parameter, or -1."""
    if fn not in INPLACE_POS:
        pos = -1
        for f in (fn, SIGNATURES.get(id(fn))):
            try:
                names = list(inspect.signature(f).parameters) if f is not None else []
            except (TypeError, ValueError):
                names = []
            if "inplace" in names:
                pos = names.index("inplace")
                break
        INPLACE_POS[fn] = pos
    return INPLACE_POS[fn]


INPLACE_POS = {}


def run(fn, api, args, kwargs):
    # F.relu(x, inplace=True) (or F.leaky_relu(x, 0.2, True)) writes x too: on
    # a copy, so a leaf that takes a gradient (backward replay) is never
    # written in place
    inplace = api.endswith("_") or api in INPLACE_DUNDER or kwargs.get("inplace") is True
    if not inplace and args:
        at = _inplace_at(fn)
        inplace = 0 <= at < len(args) and args[at] is True
    if inplace and args and torch.is_tensor(args[0]):
        args = list(args)
        args[0] = args[0].clone()
    out = fn(*args, **kwargs)
    if inplace and (out is None or out is args[0]):
        out = args[0]
    return flatten_out(out)


def check_random(api, kwargs, args):
    base = api.lower()
    if base not in RANDOM and not base.startswith("rand"):
        return
    if "dropout" in base:
        p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
        training = kwargs.get("training", args[2] if len(args) > 2 else True)
        if p == 0 or training is False:
            return
    raise Skip("random op: its draws cannot be repeated")


def low_float(dtypes):
    order = [torch.bfloat16, torch.float16]
    for d in order:
        if d in dtypes:
            return d
    return None


class Mode:
    """How the compare side computed: its inputs as recorded, under CPU
    autocast to a low precision, or with floating inputs cast to it."""

    def __init__(self, name, low=None, autocast=False):
        self.name, self.low, self.autocast = name, low, autocast

    def fcast(self):
        if self.low is None or self.autocast:
            return None
        low = self.low
        return lambda t: t.to(low) if t.is_floating_point() else t.clone()

    def context(self):
        import contextlib
        import warnings
        if not self.autocast:
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        stack.enter_context(torch.autocast("cpu", dtype=self.low))
        return stack


def recorded_autocast(args_text):
    """The dtype the record says autocast used (the "autocast" attribute,
    "cpu:torch.bfloat16,cuda:torch.float16": the CPU's first), or None."""
    text = args_text.get("autocast", "")
    found = None
    for part in text.split(","):
        dev, _, dt = part.partition(":")
        d = getattr(torch, dt.split(".")[-1], None) if dt else None
        if isinstance(d, torch.dtype) and (found is None or dev == "cpu"):
            found = d
    return found


def choose_mode(call, want, args_text=None):
    """The first mode in which call(mode) returns outputs of the dtypes the
    compare side recorded (want: role -> dtype). A record that says it ran
    under autocast is replayed so (CPU autocast, else its inputs cast)."""
    ac = recorded_autocast(args_text or {})
    if ac is not None:
        tag = str(ac).replace("torch.", "")
        modes = [Mode("autocast " + tag, ac, True), Mode("inputs cast to " + tag, ac)]
    else:
        modes = [Mode("as recorded")]
        low = low_float(set(want.values()))
        if low is not None:
            tag = str(low).replace("torch.", "")
            modes += [Mode("autocast " + tag, low, True), Mode("inputs cast to " + tag, low)]
    tried = []
    for m in modes:
        try:
            out = call(m)
        except Skip:
            raise
        except Exception as e:  # mixed dtypes outside autocast, for one
            tried.append("%s: %s" % (m.name, str(e).splitlines()[0][:80] if str(e) else "error"))
            continue
        if all(out.get(r) is not None and out[r].dtype == d for r, d in want.items()):
            return m, out
        tried.append("%s: output dtypes differ" % m.name)
    raise Skip("the compare side's output dtypes cannot be reproduced (%s)" % "; ".join(tried))


# ---- errors -------------------------------------------------------------------

UNIT = {}


def unit_roundoff(dt):
    if not UNIT:
        UNIT.update({torch.float64: 2.0 ** -53, torch.float32: 2.0 ** -24,
                     torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8})
    return UNIT.get(dt, 0.0)


def rel_err(x, ref):
    """||x - ref|| / ||ref|| in float64; NaN/Inf must sit at the same places."""
    if x.shape != ref.shape:
        raise Skip("replayed output has shape %s, the recorded one %s: the call is not "
                   "rebuilt exactly" % (list(ref.shape), list(x.shape)))
    if not (x.is_floating_point() or ref.is_floating_point()):
        if x.numel() == 0:
            return 0.0
        return float((x.to(torch.int64) != ref.to(torch.int64)).double().mean())
    a, b = x.double().reshape(-1), ref.double().reshape(-1)
    # all finite (the usual case): both norms are then finite, and a
    # non-finite element on either side makes one of them inf or NaN (no
    # float64 difference of float32 values overflows); the masked path below
    # costs several times more on large tensors
    d, n = float((a - b).norm()), float(b.norm())
    if math.isfinite(d) and math.isfinite(n):
        if n == 0.0:
            return 0.0 if d == 0.0 else math.inf
        return d / n
    fa, fb = torch.isfinite(a), torch.isfinite(b)
    both_nan = torch.isnan(a) & torch.isnan(b)
    same_inf = (~fa) & (~fb) & (a == b)
    if not bool((fa & fb | both_nan | same_inf).all()):
        return math.inf
    keep = fa & fb
    d = (a[keep] - b[keep]).norm()
    n = b[keep].norm()
    if float(n) == 0.0:
        return 0.0 if float(d) == 0.0 else math.inf
    return float(d / n)


def wire(e):
    if e is None or (isinstance(e, float) and math.isnan(e)):
        return -1.0
    return 1e300 if math.isinf(e) else e


def judge(recorded, r64, rn, mode, acc=False, bounds=None):
    outs = []
    keep = [ACC_KEEP_BYTES] if isinstance(acc, dict) and acc.get("keep") else None
    for role, c in recorded.items():
        if role not in r64 or role not in rn:
            raise Skip("the replay returns no %s" % role)
        outs.append({"role": role, "e_cmp": wire(rel_err(c, r64[role])),
                     "e_ref": wire(rel_err(rn[role], r64[role])),
                     "e_kernel": wire((bounds or {}).get(role, 0.0)),
                     "u": unit_roundoff(c.dtype), "float": bool(c.is_floating_point())})
        if acc:  # acc_check: msprobe's metrics of the output and of the same-dtype replay
            outs[-1]["acc"] = {"dtype": str(c.dtype), "shape": list(c.shape),
                               "dev": acc_metrics(c, r64[role]),
                               "ref": acc_metrics(rn[role].to(c.dtype), r64[role])}
            if keep:  # -save_error_data: the benchmark itself
                outs[-1]["acc"]["bench"] = acc_bench(r64[role], keep)
    if not outs:
        raise Skip("no output tensor to judge")
    return {"status": "ok", "mode": mode, "outputs": outs}


# ---- jobs ----------------------------------------------------------------------

# Replay on a sample (msprobe-compare(1), REPLAY). Elementwise APIs: output
# element i depends on input element i alone when every tensor has the
# output's shape, so the call on a sample of its elements is the call's own
# on those elements, and relative errors over them estimate the whole
# tensor's (2^16 elements kept, 64 blocks: a relative standard error near
# 4e-3 of the error itself when the elements' errors are independent). The
# same holds for a step of an optimizer that updates each element from that
# element's gradient and state alone.
# Compare decides and sends only those elements: every k-th block of 1,024
# (job "every": k), so that it reads the blocks it sends and passes over the
# rest; the ready line hands it these.
# From 2^19 elements on: a whole replay of a 1.7M-element bfloat16 mul took
# 0.31 s against 0.06 s sampled, half the compare of a 512 MiB pair.
ELEMENTWISE = {"add", "sub", "mul", "div", "true_divide", "neg", "abs", "exp", "log", "sqrt",
               "rsqrt", "pow", "square", "reciprocal", "sigmoid", "tanh", "relu", "gelu", "silu",
               "leaky_relu", "elu", "selu", "celu", "hardtanh", "hardswish", "hardsigmoid",
               "softplus", "mish", "sin", "cos", "erf", "clamp", "clip", "maximum", "minimum",
               "addcmul", "addcdiv", "lerp", "__add__", "__radd__", "__sub__", "__rsub__",
               "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__neg__", "__pow__",
               "__iadd__", "__isub__", "__imul__", "__itruediv__", "add_", "sub_", "mul_",
               "div_", "relu_", "clamp_", "sigmoid_", "tanh_"}
ELEMENTWISE_OPTIMIZERS = {"SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "NAdam",
                          "RAdam", "RMSprop", "Rprop", "ASGD"}
SAMPLE_MIN = 1 << 19
SAMPLE_KEEP = 1 << 16


def sample_policy():
    return {"apis": sorted(ELEMENTWISE), "optimizers": sorted(ELEMENTWISE_OPTIMIZERS),
            "min": SAMPLE_MIN, "keep": SAMPLE_KEEP}


def with_check(res, tensors, r64, rn, name, bounds=None):
    """res with "check": the bench side's outputs (tag "k", sent when its
    replay would be this very call) judged against the same replay."""
    check = {role: t for (r, role), t in tensors.items() if r == "k"}
    if check:
        try:
            res["check"] = judge(check, r64, rn, name, False, bounds)
        except Skip as e:
            res["check"] = {"status": "skip", "reason": str(e)}
    return res


def sampled(job, name):
    """A verdict's mode name, with the sample compare sent when it sent one."""
    every = job.get("every", 1)
    if every == 1:
        return name
    suffix = "th" if every % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(every % 10,
                                                                                     "th")
    return "%s, on every %d%s block of 1024 elements" % (name, every, suffix)


def replay_forward(job, tensors):
    prefix, api, fn = resolve(job["name"], job.get("references"))
    args_text = job["args"]
    recorded = {role: t for (r, role), t in tensors.items()
                if r == "f" and role.startswith("output")}
    args, kwargs = build_call(call_tensors(tensors, args_text, "f"), args_text)
    check_random(api, kwargs, args)
    if prefix != "Custom":
        check_strings(fn, "%s.%s" % (prefix, api), args, kwargs)
    want = {r: t.dtype for r, t in recorded.items()}

    def call(mode):
        fc = mode.fcast() if isinstance(mode, Mode) else mode
        a, k = build_call(call_tensors(tensors, args_text, "f", fc), args_text)
        if isinstance(mode, Mode):
            with mode.context():
                return run(fn, api, a, k)
        return run(fn, api, a, k)

    with torch.no_grad():
        r64 = call(to64)
        mode, rn = choose_mode(call, want, args_text)
        bounds = kernel_bounds(call, api, args, kwargs, recorded, r64)
    name = sampled(job, mode.name)
    return with_check(judge(recorded, r64, rn, name, job.get("acc"), bounds), tensors, r64, rn,
                      name, bounds)


def optimizer_class(path):
    """The torch.optim optimizer class path names ("torch.optim.adamw.AdamW"),
    looked up among the modules torch has already imported: nothing a dump
    names is imported, and only a subclass of torch.optim.Optimizer is."""
    parts = path.split(".") if isinstance(path, str) else []
    if len(parts) < 3 or parts[:2] != ["torch", "optim"] or \
            not all(p.isidentifier() and not p.startswith("_") for p in parts[2:]):
        raise Skip("optimizer class %s: only torch.optim optimizers are replayed" % (path or "?"))
    mod = sys.modules.get(".".join(parts[:-1]))  # imported by torch itself, or absent
    obj = vars(mod).get(parts[-1]) if mod is not None else None
    base = torch.optim.Optimizer
    if not (isinstance(obj, type) and issubclass(obj, base) and obj is not base
            and obj.__module__.startswith("torch.optim")):
        raise Skip("%s is not an optimizer of torch %s's torch.optim" % (path, torch.__version__))
    return obj


def replay_optimizer(job, tensors):
    args = job["args"]
    path = args.get("class", "")
    cls = optimizer_class(path)
    groups = []
    g = 0
    while "group.%d.params" % g in args:
        hp = {}
        for k, text in args.items():
            pre = "group.%d." % g
            if k.startswith(pre) and k != pre + "params":
                hp[k[len(pre):]] = parse_value(k, text)
        for (r, role), t in tensors.items():
            pre = "group.%d." % g
            if r == "f" and role.startswith(pre):
                hp[role[len(pre):]] = t
        groups.append((int(args["group.%d.params" % g]), hp))
        g += 1
    if not groups:
        raise Skip("the record names no parameter group")
    prm, grd, state = {}, {}, {}
    for (r, role), t in tensors.items():
        p = role.split(".")
        if r != "f":
            continue
        if role.startswith("input.param."):
            prm[int(p[2])] = t
        elif role.startswith("input.grad."):
            grd[int(p[2])] = t
        elif role.startswith("input.state."):
            state.setdefault(int(p[2]), {})[".".join(p[3:])] = t
    for k, text in args.items():
        if k.startswith("input.state."):
            p = k.split(".")
            state.setdefault(int(p[2]), {})[".".join(p[3:])] = parse_value(k, text)
    recorded = {role: t for (r, role), t in tensors.items() if r == "f" and role.startswith("output.param.")}

    def call(fcast):
        f = fcast or same

        def own(t):  # a copy the step may change: f's own, or one made here
            x = f(t)
            return x.clone() if x is t else x
        ps = {}
        for i, t in prm.items():
            if i not in grd:
                raise Skip("parameter %d has no recorded gradient" % i)
            p = torch.nn.Parameter(own(t))
            p.grad = own(grd[i])
            ps[i] = p
        pg, hps, start = [], [], 0
        for n, hp in groups:
            mine = [ps[i] for i in range(start, start + n) if i in ps]
            start += n
            if mine:
                # each group carries its hyperparameters from the start: SGD
                # (torch < 2) has no default lr and refuses a group without one
                pg.append(dict({k: (f(v) if torch.is_tensor(v) else v) for k, v in hp.items()},
                               params=mine))
                hps.append(hp)
        opt = cls(pg)
        for group, hp in zip(opt.param_groups, hps):
            group.update({k: (f(v) if torch.is_tensor(v) else v) for k, v in hp.items()})
        for i, p in ps.items():
            if i in state:
                opt.state[p] = {k: (own(v) if torch.is_tensor(v) else v)
                                for k, v in state[i].items()}
        opt.step()
        return {"output.param.%d" % i: p.detach() for i, p in ps.items()}

    with torch.no_grad():
        r64 = call(to64)
        rn = call(None)
    name = sampled(job, "as recorded")
    return with_check(judge(recorded, r64, rn, name, job.get("acc")), tensors, r64, rn, name)


def replay_side(job, tensors):
    kind = job.get("kind")
    if kind == "forward":
        return replay_forward(job, tensors)
    if kind == "backward" and job.get("grad_layout") == "grad_fn":  # msprobe's own dump
        return replay_backward_grad_fn(job, tensors)
    if kind == "backward":
        return replay_backward(job, tensors)
    if kind == "optimizer":
        return replay_optimizer(job, tensors)
    raise Skip("unknown job kind %s" % kind)


def replay(job, tensors):
    """One side of a record (compare does the compare side, and the bench side
    as its check): tensors tagged "f" (the record, or a backward record's
    forward) and "b" (the backward record); job["args"] the bench side's
    arguments with this side's context (autocast, aliases)."""
    return replay_side(job, tensors)

