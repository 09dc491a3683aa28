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

Wire format. In: frames of [u32 little-endian length][JSON header] followed by
the raw bytes of each tensor the header lists, in order (C order, the dump's
native little-endian bytes); a length of 0 ends the session. Out: first a
line {"ready": torch version} (or {"error": why}), then per job
{"id", "status": "ok"|"skip", "reason", "mode", "outputs": [{"role", "e_cmp",
"e_ref", "e_kernel", "u", "float"}]}. Infinite errors are sent as 1e300, unknown as -1.
A job with "acc": true (acc_check) also gets, per output, "acc": {"dtype",
"shape", "dev", "ref"}: msprobe's precision-standard metrics of the output
and of the same-dtype replay, each against R64 (acc_metrics, from
replay_acc.py, which the worker runs before this source). A job's
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


# ---- the sandbox -------------------------------------------------------------
#
# compare starts the worker as `python -I -B -c SRC CONFIG` in a new process
# group (posix_spawn's SETPGROUP), CONFIG a JSON object: "dir" (a private
# directory compare made and removes), "parent" (compare's pid), "path" (the
# user's PYTHONPATH entries, absolute: -I drops the variable and the working
# directory, where a dump's neighbour json.py would be imported from),
# "fsize", "nofile" (rlimits). Everything below runs before torch is imported
# and before any job is read.

SANDBOX = {"landlock": None, "why": ""}

# Landlock (linux/landlock.h, a stable ABI): syscall numbers are the same on
# every architecture.
_LL_CREATE, _LL_ADD, _LL_RESTRICT = 444, 445, 446
_LL_EXECUTE, _LL_WRITE_FILE = 1 << 0, 1 << 1
_LL_REMOVE_DIR, _LL_REMOVE_FILE, _LL_MAKE_CHAR, _LL_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_LL_MAKE_REG, _LL_MAKE_SOCK, _LL_MAKE_FIFO, _LL_MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
_LL_MAKE_SYM, _LL_REFER, _LL_TRUNCATE = 1 << 12, 1 << 13, 1 << 14
_LL_NET_BIND, _LL_NET_CONNECT = 1, 2
_LL_SCOPE_UNIX, _LL_SCOPE_SIGNAL = 1, 2


def _libc():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return ctypes, libc


def _landlock(handled_fs, rules, net=False, scoped=False):
    """Restrict this thread (and what it forks or execs) to the rights in
    rules [(path, rights)] for the accesses in handled_fs; with net, no TCP
    bind or connect; with scoped, no abstract unix socket or signal out of
    the domain. The ABI version, or raises OSError."""
    import os
    ctypes, libc = _libc()
    abi = libc.syscall(_LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        e = ctypes.get_errno()
        raise OSError(e, "landlock: %s" % os.strerror(e))
    known = (_LL_EXECUTE | _LL_WRITE_FILE | _LL_REMOVE_DIR | _LL_REMOVE_FILE | _LL_MAKE_CHAR
             | _LL_MAKE_DIR | _LL_MAKE_REG | _LL_MAKE_SOCK | _LL_MAKE_FIFO | _LL_MAKE_BLOCK
             | _LL_MAKE_SYM | (_LL_REFER if abi >= 2 else 0) | (_LL_TRUNCATE if abi >= 3 else 0))
    fs = handled_fs & known
    attr = (ctypes.c_uint64 * 3)(fs, (_LL_NET_BIND | _LL_NET_CONNECT) if net and abi >= 4 else 0,
                                 (_LL_SCOPE_UNIX | _LL_SCOPE_SIGNAL) if scoped and abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    fd = libc.syscall(_LL_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, "landlock ruleset: %s" % os.strerror(e))
    try:
        for path, rights in rules:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                # struct landlock_path_beneath_attr is packed: u64 then s32
                rule = (ctypes.c_uint8 * 12).from_buffer_copy(
                    struct.pack("<Qi", rights & fs, pfd))
                if libc.syscall(_LL_ADD, ctypes.c_int(fd), ctypes.c_int(1), ctypes.byref(rule),
                                ctypes.c_uint32(0)) != 0:
                    e = ctypes.get_errno()
                    raise OSError(e, "landlock rule for %s: %s" % (path, os.strerror(e)))
            finally:
                os.close(pfd)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            raise OSError(ctypes.get_errno(), "no_new_privs")
        if libc.syscall(_LL_RESTRICT, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "landlock_restrict_self: %s" % os.strerror(e))
    finally:
        os.close(fd)
    return abi


def _die_with_parent(parent):
    import os
    import signal
    ctypes, libc = _libc()
    libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    if parent and os.getppid() != parent:  # it died before the line above
        os._exit(0)


def sandbox_enter(cfg):
    """Before torch and before any job: tie the worker to compare, move it to
    its private directory, set its rlimits and take away every write outside
    that directory (Landlock, where the kernel has it). What could not be
    done is said in SANDBOX["why"] (the ready line carries it)."""
    import os
    import resource
    import signal
    if cfg.get("parent"):  # a kept worker (cfg "keep") outlives the compare that started it
        _die_with_parent(cfg.get("parent"))
    for p in reversed(cfg.get("path") or []):
        if isinstance(p, str) and os.path.isabs(p) and p not in sys.path:
            sys.path.insert(1, p)
    d = cfg.get("dir")
    if d:
        os.chdir(d)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE fails, no kill
    for res, v in ((resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, cfg.get("fsize")),
                   (resource.RLIMIT_NOFILE, cfg.get("nofile"))):
        if v is None:
            continue
        soft, hard = resource.getrlimit(res)
        v = int(v) if hard == resource.RLIM_INFINITY else min(int(v), hard)
        resource.setrlimit(res, (v, v))
    writes = (_LL_WRITE_FILE | _LL_REMOVE_DIR | _LL_REMOVE_FILE | _LL_MAKE_CHAR | _LL_MAKE_DIR
              | _LL_MAKE_REG | _LL_MAKE_SOCK | _LL_MAKE_FIFO | _LL_MAKE_BLOCK | _LL_MAKE_SYM
              | _LL_REFER | _LL_TRUNCATE)
    rules = [(d, writes)] if d else []
    if os.path.exists(os.devnull):
        rules.append((os.devnull, _LL_WRITE_FILE | _LL_TRUNCATE))
    try:
        SANDBOX["landlock"] = _landlock(writes, rules, net=True, scoped=True)
    except (OSError, AttributeError) as e:
        SANDBOX["why"] = "Landlock unavailable (%s): writes are not confined" % e


def sandbox_no_exec():
    """After torch is imported: no program can be executed any more (a
    second Landlock layer that grants no EXECUTE anywhere)."""
    if SANDBOX["landlock"] is None:
        return
    try:
        _landlock(_LL_EXECUTE, [])
    except OSError as e:
        SANDBOX["why"] = "no second Landlock layer (%s): exec is not refused" % e


def job_limits(job):
    """In the job child, before a job: its memory (RLIMIT_AS's soft limit:
    what the child maps now plus job["mem"] bytes, plus 72 MiB a thread of
    torch's) and time (job["limit_s"] seconds of wall time, an alarm whose
    default action ends the child, and that times torch's threads of CPU
    time on top of what the child has used). job_limits_end() lifts them."""
    import os
    import resource
    import signal
    threads = max(1, torch.get_num_threads())
    mem = job.get("mem")
    if isinstance(mem, (int, float)) and mem > 0:
        with open("/proc/self/statm") as f:
            base = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        # each of torch's threads maps a stack and a malloc arena of its own
        lim = base + int(mem) + threads * (72 << 20)
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        resource.setrlimit(resource.RLIMIT_AS, (lim if hard == resource.RLIM_INFINITY
                                                else min(lim, hard), hard))
    lim_s = job.get("limit_s")
    if isinstance(lim_s, (int, float)) and lim_s > 0:
        secs = max(1, int(math.ceil(lim_s)))
        signal.alarm(secs)
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu = int(used.ru_utime + used.ru_stime) + secs * threads + 5
        hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        resource.setrlimit(resource.RLIMIT_CPU, (cpu if hard == resource.RLIM_INFINITY
                                                 else min(cpu, hard), hard))


def job_limits_end():
    import resource
    import signal
    signal.alarm(0)
    for res in (resource.RLIMIT_AS, resource.RLIMIT_CPU):
        hard = resource.getrlimit(res)[1]
        resource.setrlimit(res, (hard, hard))


def state_print():
    """What one record could change for the next: torch's global modes and
    the callables replay looks up. A job child whose print changed is not
    given another record."""
    spaces = (vars(torch), vars(torch.nn.functional), torch.Tensor.__dict__)
    return (torch.is_grad_enabled(), torch.get_default_dtype(), torch.is_autocast_enabled(),
            torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype(),
            torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(),
            tuple(id(ns.get(n)) for ns in spaces for n in STATE_NAMES),
            id(torch.nn), id(torch.nn.functional), id(torch.Tensor), id(torch.optim))


STATE_NAMES = ()


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


# ---- arguments from their repr text ------------------------------------------

_NAMES = {"None": None, "True": True, "False": False, "nan": float("nan"),
          "inf": float("inf"), "Ellipsis": Ellipsis}
_TORCH_KINDS = ()


def _attr_chain(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return list(reversed(parts))
    return None


def _lit(node):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_lit(e) for e in node.elts)
    if isinstance(node, ast.List):
        return [_lit(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {_lit(k): _lit(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _lit(node.operand)
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.Attribute):
        chain = _attr_chain(node)
        if chain and chain[0] == "torch" and len(chain) == 2:
            v = getattr(torch, chain[1], None)
            if isinstance(v, _TORCH_KINDS):
                return v
    if isinstance(node, ast.Call):
        chain = _attr_chain(node.func)
        args = [_lit(a) for a in node.args]
        kw = {k.arg: _lit(k.value) for k in node.keywords}
        if chain == ["slice"]:
            return slice(*args)
        if chain in (["device"], ["torch", "device"]):
            return torch.device(*args, **kw)
        if chain == ["torch", "Size"]:
            return torch.Size(*args)
    raise ValueError("not a literal")


MAX_ARG_TEXT = 4096  # an argument's repr longer than this is not rebuilt


def parse_value(key, text):
    if len(text) > MAX_ARG_TEXT:
        raise Skip("argument %s is %d characters long: over the %d rebuilt" %
                   (key, len(text), MAX_ARG_TEXT))
    try:
        return _lit(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError) as e:
        raise Skip("argument %s = %s cannot be rebuilt (%s)" % (key, text[:80], e))


# Strings an API may take: the parameters whose name says so, or whose
# default (in torch.overrides' signature of the API) is a string. A string
# through *args/**kwargs may only name a device.
STRING_PARAMS = {"reduction", "mode", "approximate", "padding", "padding_mode", "pad_mode",
                 "rounding_mode", "nonlinearity", "indexing", "equation", "ord", "p", "norm",
                 "side", "interpolation", "device"}
_SAFE_TEXT = None
_DEVICE_TEXT = None


def _strings(v, where, out, depth=0):
    if isinstance(v, str):
        out.append((where, v))
    elif isinstance(v, (tuple, list)) and depth < 4:
        for i, x in enumerate(v):
            _strings(x, where, out, depth + 1)
    elif isinstance(v, dict) and depth < 4:
        for k, x in v.items():
            _strings(k, where, out, depth + 1)
            _strings(x, where, out, depth + 1)


def check_strings(fn, full, args, kwargs):
    """A string argument only where the API's signature takes one, and never
    one that is not a short setting word (a path, a module name, code)."""
    global _SAFE_TEXT, _DEVICE_TEXT
    import re
    if _SAFE_TEXT is None:
        _SAFE_TEXT = re.compile(r"[A-Za-z0-9_ ,.:+\-<>()\[\]]{0,128}\Z")
        _DEVICE_TEXT = re.compile(r"(cpu|cuda|npu|meta|xpu|mps)(:[0-9]{1,4})?\Z")
    found = []
    for i, a in enumerate(args):
        _strings(a, i, found)
    for k, a in kwargs.items():
        _strings(a, k, found)
    if not found:
        return
    for where, v in found:
        if not _SAFE_TEXT.match(v):
            raise Skip("argument %s of %s is the string %r: no setting of an API looks so "
                       "(msprobe-compare(1), SECURITY)" % (where, full, v[:60]))
    import inspect
    lam = SIGNATURES.get(id(fn))
    try:
        sig = inspect.signature(lam) if lam is not None else None
    except (TypeError, ValueError):
        sig = None
    params = list(sig.parameters.values()) if sig else []
    takes = {p.name for p in params if p.name in STRING_PARAMS or isinstance(p.default, str)}
    if sig is None:
        takes = STRING_PARAMS  # no signature known: a keyword's own name must say so
    var = {p.name for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    bound = None
    if sig is not None:
        try:
            bound = dict(sig.bind(*args, **kwargs).arguments)
        except TypeError:
            bound = None  # another overload: judged by whether the API takes strings at all
    for where, v in found:
        if bound is not None:
            pname = next((n for n, x in bound.items() if _holds(x, v)), None)
        else:
            pname = where if isinstance(where, str) else None
        if pname is not None and pname in takes:
            continue
        if pname is None and sig is not None and bound is None and takes:
            continue  # a positional string of an overload of an API that takes strings
        if (pname is None or pname in var) and _DEVICE_TEXT.match(v):
            continue
        raise Skip("argument %s of %s is the string %r where its signature takes none "
                   "(msprobe-compare(1), SECURITY)" % (where, full, v[:60]))


def _holds(x, v):
    out = []
    _strings(x, None, out)
    return any(s is v or s == v for _, s in out)


# ---- tensors ---------------------------------------------------------------

def decode(raw, dtype, shape):
    dt = getattr(torch, dtype.split(".")[-1], None)
    if not isinstance(dt, torch.dtype):
        raise Skip("dtype %s is not known to this torch" % dtype)
    if len(raw) == 0:
        return torch.empty(shape, dtype=dt)
    return torch.frombuffer(bytearray(raw), dtype=dt).reshape(shape)


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


# ---- what any correct kernel may do -------------------------------------------
#
# The same-dtype replay on this CPU is one kernel: another correct kernel of the
# op (another summation order, blocking, fused multiply-add) may differ more.
# For an op that sums K terms per output element (its reduction length), any
# correct kernel that accumulates in float32 (float64 for float64) is, with
# high probability, within lambda*sqrt(K)*u of the exact sum of the terms'
# magnitudes (Higham and Mary, "A new approach to probabilistic rounding
# error analysis", SISC 2019); compare allows that, in the norm it measures:
#   multilinear ops (matmul family, convolutions, sum, mean), forward and
#     backward: KERNEL_LAMBDA*sqrt(K)*u * ||op(|inputs|)|| / ||op(inputs)||,
#     the call re-run in float64 on the inputs' magnitudes;
#   other reductions (norms, softmax, layer/batch/group norm, losses): the
#     float64 call's own sensitivity, ||op(x*(1+e*r)) - op(x)|| / ||op(x)||
#     with r random signs and e = KERNEL_LAMBDA*sqrt(K)*u (what perturbing
#     each input by a correct kernel's backward error does), and for a loss or
#     a reduction to few elements at least KERNEL_LAMBDA*sqrt(K)*u;
#   elementwise ops (K = 1): nothing beyond compare's few units of roundoff.

KERNEL_LAMBDA = 1.0
MATMUL = {"linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "dot",
          "vdot", "inner", "__matmul__", "__rmatmul__", "bilinear", "tensordot", "chain_matmul"}
CONV = {"conv1d", "conv2d", "conv3d", "conv_tbc", "convolution", "_convolution"}
CONV_T = {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}
LINEAR_SUM = {"sum", "mean", "nansum", "nanmean", "avg_pool1d", "avg_pool2d", "avg_pool3d",
              "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "trace"}
REDUCE = {"norm", "var", "std", "var_mean", "std_mean", "prod", "logsumexp", "cross_entropy",
          "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
          "binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_similarity",
          "pairwise_distance", "dist", "cdist", "pdist", "frobenius_norm", "nuclear_norm",
          "vector_norm", "matrix_norm", "soft_margin_loss", "multilabel_soft_margin_loss",
          "poisson_nll_loss", "gaussian_nll_loss", "ctc_loss", "cosine_embedding_loss",
          "margin_ranking_loss", "triplet_margin_loss", "hinge_embedding_loss"}
ALONG_DIM = {"softmax", "log_softmax", "softmin", "cumsum", "cumprod", "logcumsumexp",
             "_softmax", "_log_softmax"}
NORMS = {"layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm", "normalize",
         "local_response_norm", "native_layer_norm", "native_batch_norm"}


def _arg(args, kwargs, i, name):
    if name in kwargs:
        return kwargs[name]
    return args[i] if len(args) > i else None


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def reduction_len(api, args, kwargs, backward):
    """(K, kind): how many terms an output element of the call sums, and
    which bound applies ("multilinear", "reduce", "sensitive"), or (1, None)
    for an elementwise op (or one this table does not know)."""
    name = api.lstrip("_") if api not in ("__matmul__", "__rmatmul__") else api
    ts = [a for a in list(args) + list(kwargs.values()) if torch.is_tensor(a)]
    x = ts[0] if ts else None
    try:
        if name in MATMUL or api in MATMUL:
            m = args[1] if name in ("addmm", "baddbmm", "addbmm", "addmv") and len(args) > 1 \
                else x
            k = int(m.shape[-1]) if m is not None and m.dim() else 1
            if backward and x is not None and x.dim() > 1:
                k = max(k, x.numel() // max(int(x.shape[-1]), 1))  # weight grads sum rows
            return k, "multilinear"
        if name in CONV or name in CONV_T:
            w = _arg(args, kwargs, 1, "weight")
            if w is None or w.dim() < 2:
                return 1, None
            k = w.numel() // max(int(w.shape[0 if name in CONV else 1]), 1)
            if backward and x is not None and x.dim() > 2:
                k = max(k, x.numel() // max(int(x.shape[1]), 1))  # N*H*W for the weight's
            return max(k, 1), "multilinear"
        if name in LINEAR_SUM or name in REDUCE:
            if x is None:
                return 1, None
            kind = "multilinear" if name in LINEAR_SUM else "reduce"
            return -1, kind  # from the output's size (reduction_len_out)
        if name in ALONG_DIM:
            d = _arg(args, kwargs, 1, "dim")
            d = d if isinstance(d, int) else -1
            return (int(x.shape[d]) if x is not None and x.dim() else 1), "sensitive"
        if name in NORMS:
            if x is None or x.dim() == 0:
                return 1, None
            if name in ("layer_norm", "native_layer_norm", "rms_norm"):
                s = _arg(args, kwargs, 1, "normalized_shape")
                s = [s] if isinstance(s, int) else list(s or [x.shape[-1]])
                k = _numel(s)
                if backward:
                    k = max(k, x.numel() // max(k, 1))  # weight grads sum rows
            elif name in ("batch_norm", "native_batch_norm"):
                k = x.numel() // max(int(x.shape[1]), 1) if x.dim() > 1 else x.numel()
            elif name == "group_norm":
                g = _arg(args, kwargs, 1, "num_groups")
                k = x.numel() // max(int(x.shape[0]) * (g if isinstance(g, int) else 1), 1)
            elif name == "instance_norm":
                k = _numel(x.shape[2:])
            else:
                k = int(x.shape[-1])
            return max(k, 1), "sensitive"
    except (IndexError, TypeError, ValueError, RuntimeError):
        return 1, None
    return 1, None


def acc_unit(dt):
    """The unit roundoff a correct kernel accumulates in: float32 for the
    low-precision floats and float32, float64 for float64."""
    return 2.0 ** -53 if dt == torch.float64 else 2.0 ** -24


def kernel_bounds(call, api, args, kwargs, recorded, r64, backward=False):
    """role -> the output error any correct kernel may make (see above); call(fc)
    re-runs the call in float64 with every tensor passed through fc; {} for an
    elementwise op."""
    k, kind = reduction_len(api, args, kwargs, backward)
    if kind is None or not r64:
        return {}
    if k < 0:  # a reduction: the terms an output element sums
        ins = max((a.numel() for a in list(args) + list(kwargs.values()) if torch.is_tensor(a)),
                  default=1)
        k = max(ins // max(min(o.numel() for o in r64.values()), 1), 1)
    if k <= 1:
        return {}
    eps32 = KERNEL_LAMBDA * math.sqrt(k) * 2.0 ** -24
    g = torch.Generator().manual_seed(20261202)

    def shake(t):
        if not t.is_floating_point():
            return t.clone()
        r = torch.randint(0, 2, t.shape, generator=g).to(torch.float64) * 2 - 1
        return t.double() * (1 + eps32 * r)

    try:
        if kind == "multilinear":
            alt = call(lambda t: t.double().abs() if t.is_floating_point() else t.clone())
        else:
            alt = call(shake)
    except Exception:  # the bound is an extra: the replay's own verdict stands
        return {}
    out = {}
    for role, c in recorded.items():
        ref, m = r64.get(role), alt.get(role)
        if ref is None or m is None or not c.is_floating_point() or m.shape != ref.shape:
            continue
        scale = acc_unit(c.dtype) / 2.0 ** -24
        n = float(ref.double().norm())
        if not (n > 0.0) or not math.isfinite(n):
            continue
        if kind == "multilinear":
            b = eps32 * scale * float(m.double().norm()) / n
        else:
            b = rel_err(m.double(), ref.double()) * scale
            if kind == "reduce":
                b = max(b, eps32 * scale)
        if math.isfinite(b):
            out[role] = b
    return out


def wire(e):
    if e is None or (isinstance(e, float) and math.isnan(e)):
        return -1.0
    return 1e300 if math.isinf(e) else e


def judge(recorded, r64, rn, mode, acc=False, bounds=None):
    outs = []
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
    if not outs:
        raise Skip("no output tensor to judge")
    return {"status": "ok", "mode": mode, "outputs": outs}


# ---- jobs ----------------------------------------------------------------------

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
    return judge(recorded, r64, rn, mode.name, job.get("acc"), bounds)


def _grad_role(fwd_role):
    # forward input.N[.M] <-> backward output.N[.M]; kwarg.NAME <-> output.kwarg.NAME
    if fwd_role.startswith("input."):
        return "output." + fwd_role[len("input."):]
    return "output." + fwd_role


def replay_backward(job, tensors):
    prefix, api, fn = resolve(job["forward"], job.get("references"))
    fwd_args = job["args"]
    grads_in = {role: t for (r, role), t in tensors.items() if r == "b" and role.startswith("input")}
    recorded = {role: t for (r, role), t in tensors.items() if r == "b" and role.startswith("output")}
    if not grads_in:
        raise Skip("the backward record holds no incoming gradient")
    args, kwargs = build_call(call_tensors(tensors, fwd_args, "f"), fwd_args)
    check_random(api, kwargs, args)
    if prefix != "Custom":
        check_strings(fn, "%s.%s" % (prefix, api), args, kwargs)
    # the forward's output dtypes say how the compare side computed (autocast)
    fwd_want = {r: getattr(torch, d.split(".")[-1]) for r, d in job.get("forward_dtypes", {}).items()}
    # roles whose gradient was recorded (an aliased tensor is one leaf: see call)
    grad_roles = [role for (r, role) in tensors if r == "f" and _grad_role(role) in recorded]

    def forward(fc, grad):
        # only the inputs whose gradient was recorded take one: batch_norm's
        # running statistics, for one, must not
        wants = {id(t) for (r, role), t in tensors.items() if r == "f" and role in grad_roles}

        def leaf(t):
            v = t if fc is None else fc(t)
            if grad and v.is_floating_point() and id(t) in wants:
                v = v.detach().clone().requires_grad_(True)
            return v
        objs = call_tensors(tensors, fwd_args, "f", leaf)
        a, k = build_call(objs, fwd_args)
        return objs, run(fn, api, a, k)

    def call(mode):
        import contextlib
        fc = mode.fcast() if isinstance(mode, Mode) else mode
        ctx = mode.context() if isinstance(mode, Mode) else contextlib.nullcontext()
        with ctx, torch.enable_grad():
            objs, out = forward(fc, True)
            outs, gos = [], []
            for role, o in out.items():
                g = grads_in.get("input" + role[len("output"):])
                if g is not None and o.requires_grad:
                    outs.append(o)
                    gos.append((g if fc is None else fc(g)).to(o.dtype))
            roles = [r for r in grad_roles if objs[r].requires_grad]
            leaves, seen = [], set()
            for r in roles:  # an aliased tensor is one leaf
                if id(objs[r]) not in seen:
                    seen.add(id(objs[r]))
                    leaves.append(objs[r])
            if not outs or not leaves:
                raise Skip("no output of the forward call takes a gradient")
            gr = torch.autograd.grad(outs, leaves, gos, allow_unused=True)
        by_obj = {id(t): g for t, g in zip(leaves, gr)}
        res = {}
        for r in roles:
            g = by_obj.get(id(objs[r]))
            if g is not None:
                res[_grad_role(r)] = g
        return res

    def fwd_only(mode):
        with torch.no_grad(), mode.context():
            return forward(mode.fcast(), False)[1]

    r64 = call(to64)
    if fwd_want:
        mode, _ = choose_mode(fwd_only, fwd_want, fwd_args)
        rn = call(mode)
    else:
        mode, rn = choose_mode(call, {r: t.dtype for r, t in recorded.items()}, fwd_args)
    recorded = {r: t for r, t in recorded.items() if r in r64}
    bounds = kernel_bounds(call, api, args, kwargs, recorded, r64, backward=True)
    return judge(recorded, r64, rn, mode.name, job.get("acc"), bounds)


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
        ps = {}
        for i, t in prm.items():
            if i not in grd:
                raise Skip("parameter %d has no recorded gradient" % i)
            p = torch.nn.Parameter(f(t).clone())
            p.grad = f(grd[i]).clone()
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
                opt.state[p] = {k: (f(v).clone() if torch.is_tensor(v) else v)
                                for k, v in state[i].items()}
        opt.step()
        return {"output.param.%d" % i: p.detach() for i, p in ps.items()}

    with torch.no_grad():
        r64 = call(to64)
        rn = call(None)
    return judge(recorded, r64, rn, "as recorded", job.get("acc"))


def replay_side(job, tensors):
    kind = job.get("kind")
    if kind == "forward":
        return replay_forward(job, tensors)
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


def read_fd(n):
    """n bytes of the job stream (fd 0), read with no read-ahead: a job child
    that dies leaves the stream at the next frame for the one after it."""
    import os
    buf = bytearray()
    while len(buf) < n:
        b = os.read(0, min(n - len(buf), 1 << 24))
        if not b:
            raise EOFError
        buf += b
    return bytes(buf)


def read_job():
    """The next frame: (job, {(rec, role): (tensor header, bytes)}), or None
    at the end of the session."""
    try:
        n = struct.unpack("<I", read_fd(4))[0]
        if n == 0:
            return None
        job = json.loads(read_fd(n))
        tensors = {}
        for t in job["tensors"]:
            tensors[(t["rec"], t["role"])] = (t, read_fd(int(t["nbytes"])))
    except EOFError:
        return None
    return job, tensors


def job_child(out_fd, parent):
    """A child of the worker that reads jobs from fd 0 and answers each on
    out_fd ("S id" when it starts one, "A json" with the answer, "E" at the
    end of the session). It replays until a record's call fails or changes
    the state another record would see (state_print), then exits and the
    worker forks a fresh one: every record starts from a clean state. A
    record past its time or memory limit ends the child; the worker answers
    for it. Never returns."""
    import os

    def say(tag, text=""):
        data = ("%s %s\n" % (tag, text)).encode()
        while data:
            data = data[os.write(out_fd, data):]

    try:
        _die_with_parent(parent)
        start = state_print()
        while True:
            got = read_job()
            if got is None:
                say("E")
                break
            job, raw = got
            say("S", json.dumps(job.get("id")))
            clean = True
            try:
                job_limits(job)
                t = {k: decode(b, d["dtype"], d["shape"]) for k, (d, b) in raw.items()}
                res = replay(job, t)
            except Skip as e:
                res = {"status": "skip", "reason": str(e)}
            except BaseException as e:  # the call failed: no next record here
                clean = False
                res = {"status": "skip", "reason": "replay failed: %s: %s" %
                       (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")}
            finally:
                job_limits_end()
            del got, raw
            res["id"] = job.get("id")
            say("A", json.dumps(res, allow_nan=False))
            if not clean or state_print() != start:
                break
    finally:
        os._exit(0)


def serve(out):
    """The worker's loop: fork a job child, relay its answers, answer for a
    record it died on, fork another while the session lasts. A session whose
    compare hangs up (killed, or gone past its budget) ends at once, its job
    child killed: a kept worker has no parent death to end it."""
    import os
    import select
    import signal
    me = os.getpid()
    while True:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            job_child(w, me)
        os.close(w)
        pending, ended, gone, buf = None, False, False, b""
        watch = select.poll()
        watch.register(r, select.POLLIN)
        watch.register(0, select.POLLRDHUP)
        while not gone:
            events = dict(watch.poll())
            if events.get(0, 0) & (select.POLLRDHUP | select.POLLHUP | select.POLLERR):
                gone = True
                break
            if r not in events:
                continue
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                tag, _, text = line.decode().partition(" ")
                if tag == "S":
                    pending = json.loads(text)
                elif tag == "A":
                    out.write(text + "\n")
                    out.flush()
                    pending = None
                elif tag == "E":
                    ended = True
        os.close(r)
        if gone:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _, status = os.waitpid(pid, 0)
        if ended or gone:
            return 0
        if pending is None:
            continue  # a child that had its fill: the next one reads on
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        if sig in (signal.SIGALRM, signal.SIGXCPU):
            why = "the replay ran past its time limit a record"
        elif sig:
            why = "the replay was ended by signal %d (%s)" % (sig, signal.Signals(sig).name)
        else:
            why = "the replay ended (exit %d) without an answer" % os.WEXITSTATUS(status)
        out.write(json.dumps({"status": "skip", "reason": why, "id": pending}) + "\n")
        out.flush()


def ready_line(extra=None):
    line = {"ready": torch.__version__, "apis": len(ALLOWED), "landlock": SANDBOX["landlock"],
            "sandbox": SANDBOX["why"]}
    line.update(extra or {})
    return json.dumps(line) + "\n"


def _session_dir():
    """A session's own directory inside the kept worker's (its job children
    write nowhere else), made before and removed after the session."""
    import os
    d = os.path.abspath("s%d" % os.getpid())
    os.mkdir(d, 0o700)
    os.chdir(d)
    return d


def _remove_tree(d):
    import shutil
    shutil.rmtree(d, ignore_errors=True)


def _hello(conn):
    """A connecting compare's first message: one byte and, as SCM_RIGHTS,
    the descriptor its session's stderr goes to. (the descriptor or None, ok);
    refused when the peer is another user."""
    import os
    import socket
    conn.settimeout(10)
    pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                        struct.calcsize("3i")))
    if uid != os.getuid():
        return None, False
    size = socket.CMSG_LEN(struct.calcsize("i"))
    msg, anc, _flags, _addr = conn.recvmsg(1, size)
    if msg != b"h":
        return None, False
    fds = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += list(struct.unpack("%di" % (len(data) // 4), data[:len(data) // 4 * 4]))
    err = fds.pop(0) if fds else None
    for fd in fds:
        os.close(fd)
    conn.settimeout(None)
    return err, True


def keep_serving(cfg, out):
    """A kept worker (cfg "keep" seconds, cfg "listen" its socket, which
    compare bound in a directory only its user may enter): torch is imported
    once, and each compare's session is a child forked from here, the first
    one on the descriptors compare started us with, the next ones on their
    connections. It leaves after "keep" seconds without a session; compare
    finds a socket nobody answers on and starts another."""
    import os
    import select
    import socket
    import time
    keep = float(cfg.get("keep") or 0)
    lst = socket.socket(fileno=int(cfg["listen"]))
    me = os.getpid()
    home = os.getcwd()
    for name in os.listdir(home):  # sessions a kill left behind
        _remove_tree(os.path.join(home, name))
    live = set()
    count = [0]

    def session(conn, err):
        count[0] += 1
        pid = os.fork()
        if pid:
            return pid
        try:
            _die_with_parent(me)
            lst.close()
            if conn is not None:
                os.dup2(conn, 0)
                os.dup2(conn, 1)
                os.close(conn)
            if err is not None:
                os.dup2(err, 2)
                os.close(err)
            d = _session_dir()
            try:
                if conn is not None:
                    out.write(ready_line({"server": me, "session": count[0]}))
                    out.flush()
                serve(out)
            finally:
                os.chdir(home)
                _remove_tree(d)
        finally:
            os._exit(0)

    live.add(session(None, None))  # the compare that started us, on 0 and 1
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # nothing of that compare's is held once its session ends
        os.dup2(null, fd)
    os.close(null)
    idle_since = time.monotonic()
    while True:
        for pid in list(live):
            if os.waitpid(pid, os.WNOHANG)[0]:
                live.discard(pid)
        if live:
            idle_since = time.monotonic()
        left = keep - (time.monotonic() - idle_since)
        if not live and left <= 0:
            return 0
        ready, _, _ = select.select([lst], [], [], min(1.0, max(0.05, left)))
        if not ready:
            continue
        try:
            conn, _ = lst.accept()
        except OSError:
            continue
        try:
            err, ok = _hello(conn)
        except (OSError, struct.error):
            err, ok = None, False
        if ok:
            live.add(session(conn.fileno(), err))
        if err is not None:
            os.close(err)
        conn.close()


def setup():
    """Import torch and list what may be called; None, or why not."""
    global torch, _TORCH_KINDS, ALLOWED, SIGNATURES, STATE_NAMES
    try:
        import torch as t
        torch = t
        _TORCH_KINDS = (torch.dtype, torch.layout, torch.memory_format)
    except Exception as e:
        return "cannot import torch: %s" % e
    torch.set_grad_enabled(False)
    ALLOWED = allowed_apis()
    SIGNATURES = signatures()
    STATE_NAMES = tuple(sorted({n.rsplit(".", 1)[-1] for n in ALLOWED}))
    return None


def main():
    import os
    out = sys.stdout
    cfg = {}
    try:
        cfg = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
        cfg = cfg if isinstance(cfg, dict) else {}
        sandbox_enter(cfg)
    except Exception as e:
        out.write(json.dumps({"error": "cannot enter the sandbox: %s" % e}) + "\n")
        out.flush()
        return 1
    why = setup()
    if why:
        out.write(json.dumps({"error": why}) + "\n")
        out.flush()
        return 1
    sandbox_no_exec()
    kept = cfg.get("keep") and cfg.get("listen") is not None
    out.write(ready_line({"server": os.getpid(), "session": 1} if kept else None))
    out.flush()
    return keep_serving(cfg, out) if kept else serve(out)


if __name__ == "__main__":
    sys.exit(main())
