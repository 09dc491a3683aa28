#!/usr/bin/env python3
"""File-level call graph of src/, from the object files of a build (nm), and
the loops in it: files that call each other, directly or round a cycle.

    scripts/callgraph.py BUILD_DIR [--dot FILE] [--all]

A file A "calls" B when A's object uses a symbol B's object defines (functions
and data alike). Prints each strongly connected set of more than one file (a
loop: issue 21 wants none) with the symbols that close it, and exits 1 when
there is one; --all prints every edge too. Generated sources count as the
files they are generated into; tests and benchmarks are left out."""
import argparse
import collections
import glob
import os
import subprocess
import sys


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
        elif kind in "TDBRVWC" or kind in "tdbr" and False:
            defs.add(sym)
    return defs, uses


def sccs(nodes, edges):
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build")
    ap.add_argument("--dot")
    ap.add_argument("--all", action="store_true")
    a = ap.parse_args()
    defs, uses = {}, {}
    for src, obj in objects(a.build):
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
    loops = [c for c in sccs(nodes, edges) if len(c) > 1]
    if a.all:
        for s in sorted(edges):
            for t in sorted(edges[s]):
                print(f"{s} -> {t}: {' '.join(sorted(why[(s, t)])[:6])}")
    print(f"{len(nodes)} files, {sum(len(v) for v in edges.values())} edges, "
          f"{len(loops)} loop(s)")
    for c in loops:
        print("loop:", " ".join(c))
        cs = set(c)
        for s in c:
            for t in sorted(edges[s] & cs):
                print(f"    {s} -> {t}: {' '.join(sorted(why[(s, t)])[:5])}")
    if a.dot:
        with open(a.dot, "w") as f:
            f.write("digraph src {\n  rankdir=BT; node [shape=box, fontsize=10];\n")
            for s in sorted(edges):
                for t in sorted(edges[s]):
                    f.write(f'  "{s}" -> "{t}";\n')
            f.write("}\n")
    sys.exit(1 if loops else 0)


if __name__ == "__main__":
    main()
