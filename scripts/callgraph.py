#!/usr/bin/env python3
"""File-level call graph of src/, from the object files of a build (nm),
checked against the declared order of modules and shim layers
(scripts/layers.txt).

    scripts/callgraph.py BUILD_DIR [--dot FILE] [--modules-dot FILE] [--all] [--layers FILE]

A file A "calls" B when A's object uses a symbol B's object defines (functions
and data alike). A file A "includes" B when A includes, directly or through
other headers, the header named after B (src/x/b.h beside src/x/b.c: B's
declarations). Exits 1, naming the files, the symbols and the modules or
layers, on any of:
  - a call from a module to one it does not use (scripts/layers.txt: a lower
    module calling a higher one, or a peer calling a peer);
  - a call in the dump shim from a layer to a layer above it, or between two
    groups of a layer against their "<" order;
  - a file-level loop: files that call each other, directly or round a cycle;
  - a header circle: a loop of files once includes count as well as calls (a
    file that includes b.h depends on b.c, even when it only uses b.h's types
    or inline functions);
  - a folder of src/ the declaration does not name, an object of src/dump in no
    layer, or a layer's file the build does not have.
A loop or header circle waiting for its owner is named in scripts/layers.txt
("allow loop:", "allow circle:"); a line there that matches nothing fails.
--all prints every edge too. Generated sources count as the files they are
generated into; tests and benchmarks are left out. The test rules_module_order
runs it on the build it is part of."""
import argparse
import collections
import glob
import os
import re
import subprocess
import sys


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def objects(build):
    for o in sorted(glob.glob(os.path.join(build, "src", "**", "*.o"), recursive=True)):
        rel = os.path.relpath(o, build)
        # src/dump/CMakeFiles/msprobe_py.dir/py_wrap.c.o -> src/dump/py_wrap.c
        parts = rel.split(os.sep)
        if "CMakeFiles" not in parts:
            continue
        i = parts.index("CMakeFiles")
        name = parts[-1][:-2] if parts[-1].endswith(".o") else parts[-1]
        src = "/".join(parts[:i] + [name])
        # an object left behind by a source since removed (or renamed) is not a file of src/
        if not any(os.path.exists(os.path.join(root, src)) for root in (REPO, build)):
            continue
        yield src, o


def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True).stdout
    defs, uses = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        sym, kind = f[0], f[1]
        if kind == "U":
            uses.add(sym)
        elif kind in "TDBRVWC":
            defs.add(sym)
    return defs, uses


def sccs(nodes, edges):
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


class Layers:
    """scripts/layers.txt: modules with the modules they use, and the dump
    shim's layers, each a list of groups of files."""

    def __init__(self, path):
        self.path = path
        self.uses = collections.OrderedDict()   # module -> modules it names
        self.rank = {}                          # dump file -> (layer index, group index)
        self.layer_of = {}                      # dump file -> layer name
        self.problems = []
        decls, cur = [], None
        with open(path) as f:
            for n, line in enumerate(f, 1):
                text = line.split("#", 1)[0]
                if not text.strip():
                    continue
                if text[0].isspace():
                    if cur is None:
                        self.problems.append(f"{path}:{n}: a continuation line with nothing to continue")
                    else:
                        cur[2] += " " + text.strip()
                    continue
                m = re.match(r"(module|layer|allow)\s+([\w-]+)\s*:(.*)$", text.strip())
                if not m:
                    self.problems.append(f"{path}:{n}: not 'module NAME: ...', 'layer NAME: ...' "
                                         "or 'allow circle|loop: ...'")
                    cur = None
                    continue
                cur = [m.group(1), m.group(2), m.group(3), n]
                decls.append(cur)
        nlayer = 0
        self.allow = []                         # (circle or loop, file names, line)
        for kind, name, rest, n in decls:
            if kind == "allow":
                if name not in ("circle", "loop") or len(rest.split()) < 2:
                    self.problems.append(f"{path}:{n}: 'allow circle|loop: FILE FILE ...' only")
                else:
                    self.allow.append((name, frozenset(rest.split()), n))
                continue
            if kind == "module":
                for u in rest.split():
                    if u not in self.uses:
                        self.problems.append(f"{path}:{n}: module {name} uses {u}, "
                                             "which is not declared before it")
                self.uses[name] = rest.split()
                continue
            for g, group in enumerate(rest.split("<")):
                for fname in group.split():
                    if fname in self.rank:
                        self.problems.append(f"{path}:{n}: {fname} is in two layers")
                    self.rank[fname] = (nlayer, g)
                    self.layer_of[fname] = name
            nlayer += 1
        self.below = {}
        for m in self.uses:
            seen, todo = set(), list(self.uses[m])
            while todo:
                u = todo.pop()
                if u not in seen:
                    seen.add(u)
                    todo.extend(self.uses.get(u, ()))
            self.below[m] = seen

    def may_call(self, a, b):
        """Whether module a may call module b."""
        return a == b or b in self.below.get(a, ())


def module_of(src):
    parts = src.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "src" else None


def find_include(name, src, build):
    """Where `#include "name"` in src resolves (a path relative to the
    repository or the build), or None for a header outside both."""
    here = os.path.dirname(src)
    for root, rel in ((REPO, os.path.join(here, name)), (build, os.path.join(here, name)),
                      (REPO, os.path.join("include", name)), (build, os.path.join("include", name)),
                      (REPO, os.path.join("src", module_of(src) or "", name))):
        if os.path.exists(os.path.join(root, rel)):
            return os.path.normpath(rel)
    return None


def read_source(rel, build):
    for root in (REPO, build):
        p = os.path.join(root, rel)
        if os.path.exists(p):
            with open(p, errors="replace") as f:
                return f.read()
    return ""


def included(src, build, cache):
    """Every header of the repository src includes, directly or through
    other headers: {header: the header src itself names that brings it in}."""
    out = {}
    todo = [(h, h) for h in (find_include(n, src, build)
                             for n in INCLUDE_RE.findall(read_source(src, build))) if h]
    while todo:
        h, via = todo.pop()
        if h in out:
            continue
        out[h] = via
        if h not in cache:
            cache[h] = [x for x in (find_include(n, h, build)
                                    for n in INCLUDE_RE.findall(read_source(h, build))) if x]
        todo.extend((x, via) for x in cache[h])
    return out


def check(build, layers_path, dot=None, show_all=False, modules_dot=None):
    lay = Layers(layers_path)
    problems = list(lay.problems)
    defs, uses = {}, {}
    for src, obj in objects(build):
        d, u = symbols(obj)
        defs.setdefault(src, set()).update(d)
        uses.setdefault(src, set()).update(u)
    owner = {}
    for src, ds in defs.items():
        for s in ds:
            owner.setdefault(s, src)
    edges = collections.defaultdict(set)
    why = collections.defaultdict(set)
    for src, us in uses.items():
        for s in us:
            t = owner.get(s)
            if t and t != src:
                edges[src].add(t)
                why[(src, t)].add(s)
    nodes = set(defs)

    # Folders and layers against the declaration.
    for d in sorted(glob.glob(os.path.join(REPO, "src", "*", ""))):
        m = os.path.basename(os.path.dirname(d))
        if m not in lay.uses:
            problems.append(f"src/{m}/ is no module of {os.path.relpath(layers_path, REPO)}")
    dump = {s.split("/")[-1] for s in nodes if module_of(s) == "dump"}
    for f in sorted(dump - set(lay.rank)):
        problems.append(f"src/dump/{f} is in no layer of {os.path.relpath(layers_path, REPO)}")
    for f in sorted(set(lay.rank) - dump):
        problems.append(f"{os.path.relpath(layers_path, REPO)} names src/dump/{f} "
                        f"(layer {lay.layer_of[f]}), which this build has no object of")

    # Calls against the order.
    for s in sorted(edges):
        for t in sorted(edges[s]):
            ms, mt = module_of(s), module_of(t)
            syms = " ".join(sorted(why[(s, t)])[:6])
            if ms in lay.uses and mt in lay.uses and not lay.may_call(ms, mt):
                problems.append(f"upward call: {s} (module {ms}) -> {t} (module {mt}), "
                                f"which {ms} does not use: {syms}")
            if ms == mt == "dump":
                fs, ft = s.split("/")[-1], t.split("/")[-1]
                if fs in lay.rank and ft in lay.rank and lay.rank[ft] > lay.rank[fs]:
                    where = (f"layer {lay.layer_of[fs]}" if lay.layer_of[fs] != lay.layer_of[ft]
                             else f"layer {lay.layer_of[fs]}, against its '<' order")
                    problems.append(f"upward call: {s} (layer {lay.layer_of[fs]}) -> {t} "
                                    f"(layer {lay.layer_of[ft]}; {where}): {syms}")

    loops = [c for c in sccs(nodes, edges) if len(c) > 1]
    used = set()

    def allowed(kind, c):
        names = frozenset(f.split("/")[-1] for f in c)
        for k, allow, n in lay.allow:
            if k == kind and allow == names:
                what = "header circle" if kind == "circle" else "loop"
                print(f"allowed ({os.path.relpath(layers_path, REPO)}:{n}): {what} "
                      f"{' '.join(c)}")
                used.add(n)
                return True
        return False
    all_loops = loops
    loops = [c for c in loops if not allowed("loop", c)]
    for c in loops:
        lines = [f"loop: {' '.join(c)}"]
        cs = set(c)
        for s in c:
            for t in sorted(edges[s] & cs):
                lines.append(f"    {s} -> {t}: {' '.join(sorted(why[(s, t)])[:5])}")
        problems.append("\n".join(lines))

    # Header circles: calls and includes of a file's own header together.
    stem = {os.path.splitext(s)[0]: s for s in nodes}
    both = collections.defaultdict(set, {s: set(ts) for s, ts in edges.items()})
    inc_why = {}
    cache = {}
    for s in sorted(nodes):
        for h, via in included(s, build, cache).items():
            t = stem.get(os.path.splitext(h)[0]) if h.endswith(".h") else None
            if t and t != s:
                both[s].add(t)
                inc_why[(s, t)] = h if h == via else f"{via} (which includes {h})"
    in_loop = {frozenset(c) for c in all_loops}
    circles = [c for c in sccs(nodes, both) if len(c) > 1 and frozenset(c) not in in_loop
               and not allowed("circle", c)]
    for kind, allow, n in lay.allow:
        if n not in used:
            what = "header circle" if kind == "circle" else "loop"
            problems.append(f"{os.path.relpath(layers_path, REPO)}:{n}: allows a {what} "
                            f"of {' '.join(sorted(allow))}, which there is not: remove the line")
    for c in circles:
        lines = [f"header circle: {' '.join(c)}"]
        cs = set(c)
        for s in c:
            for t in sorted(both[s] & cs):
                if (s, t) in inc_why:
                    lines.append(f"    {s} -> {t}: includes {inc_why[(s, t)]}")
                if t in edges.get(s, ()):
                    lines.append(f"    {s} -> {t}: {' '.join(sorted(why[(s, t)])[:5])}")
        problems.append("\n".join(lines))

    if show_all:
        for s in sorted(edges):
            for t in sorted(edges[s]):
                print(f"{s} -> {t}: {' '.join(sorted(why[(s, t)])[:6])}")
    print(f"{len(nodes)} files, {sum(len(v) for v in edges.values())} edges, "
          f"{len(loops)} loop(s), {len(circles)} header circle(s), "
          f"{len(problems) - len(loops) - len(circles)} other problem(s)")
    for p in problems:
        print(p)
    if dot:
        with open(dot, "w") as f:
            f.write("digraph src {\n  rankdir=BT; node [shape=box, fontsize=10];\n")
            for s in sorted(edges):
                for t in sorted(edges[s]):
                    f.write(f'  "{s}" -> "{t}";\n')
            f.write("}\n")
    if modules_dot:
        write_modules_dot(modules_dot, edges, why)
    return 1 if problems else 0


def write_modules_dot(path, edges, why):
    """The module-level picture (scripts/modules.svg): one box per module of src/
    with its files, one arrow per pair of modules that call each other,
    labelled with how many file-to-file calls make it."""
    files, calls = collections.Counter(), collections.Counter()
    for s in edges:
        files[module_of(s)] += 0
        for t in edges[s]:
            ms, mt = module_of(s), module_of(t)
            if ms and mt and ms != mt:
                calls[(ms, mt)] += 1
    seen = collections.defaultdict(set)
    for s in edges:
        seen[module_of(s)].add(s)
        for t in edges[s]:
            seen[module_of(t)].add(t)
    with open(path, "w") as f:
        f.write("digraph modules {\n  rankdir=BT; node [shape=box, fontname=Helvetica, "
                "fontsize=11]; edge [fontname=Helvetica, fontsize=9];\n")
        for m in sorted(k for k in seen if k):
            f.write(f'  "{m}" [label="src/{m}\\n{len(seen[m])} files"];\n')
        for (ms, mt), n in sorted(calls.items()):
            f.write(f'  "{ms}" -> "{mt}" [label="{n}"];\n')
        f.write("}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--dot")
    ap.add_argument("--modules-dot", help="write the module-level graph (scripts/modules.svg's source)")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--layers", default=os.path.join(REPO, "scripts", "layers.txt"))
    a = ap.parse_args()
    if not glob.glob(os.path.join(a.build, "src", "**", "*.o"), recursive=True):
        print(f"{a.build}: no object files under src/ (not a build folder, or not built)")
        sys.exit(1)
    sys.exit(check(a.build, a.layers, a.dot, a.all, a.modules_dot))


if __name__ == "__main__":
    main()
