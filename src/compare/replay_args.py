"""Arguments of a replayed call, rebuilt from their repr text by a literal
parser (replay.py's docstring: nothing in a job is executed as code).
Embedded after replay.py (src/compare/CMakeLists.txt): one namespace."""

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
