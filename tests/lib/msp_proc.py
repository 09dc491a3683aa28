"""Processes by their parent, read from /proc (Linux): what a test needs to
find the helpers a command started and to see that none outlives it."""
import os


def _parents():
    """{pid: parent pid} of every process that is not a zombie."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
            except OSError:
                continue
            fields = st[st.rindex(")") + 2:].split()
            if fields[0] != "Z":
                out[int(d)] = int(fields[1])
    return out


def children(pid):
    return [p for p, pp in _parents().items() if pp == pid]


def descendants(pid):
    kids = {}
    for p, pp in _parents().items():
        kids.setdefault(pp, []).append(p)
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def cmdline(pid):
    """Its command line as bytes, or None once it is gone."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return None


def alive(pid):
    """Running or stopped, not a zombie nor gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rindex(")") + 2] != "Z"
