import json, re, sys
try:
    from importlib import metadata as _m
    _d = list(_m.distributions())
except Exception:
    _d = []
_seen = {}
for _x in _d:
    try:
        _n = _x.metadata["Name"]
        _v = _x.version
    except Exception:
        continue
    if not _n:
        continue
    _k = re.sub(r"[-_.]+", "-", _n).lower()
    if _k not in _seen:
        _seen[_k] = {"name": _n, "version": str(_v)}
result = json.dumps({"python": "%d.%d.%d" % tuple(sys.version_info[:3]), "executable": sys.executable, "packages": [_seen[k] for k in sorted(_seen)]})
