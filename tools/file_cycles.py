#!/usr/bin/env python3
"""file_cycles.py: loops of calls between the C files of a folder.

    tools/file_cycles.py [--build DIR] [--allow FILE] [--edges] FOLDER...

The house rule (docs/ARCHITECTURE.md, issue 19): files of a folder call one
another one way only; where a lower file must reach a higher one it calls a
function the higher one registered. This reads the built objects of every .c
file under FOLDER (their `nm`: names each defines, names each uses), draws an
edge A -> B where A calls a function B defines, and prints each loop: a
strongly connected group of two or more files, with the names behind each of
its edges. Static functions are invisible to nm and never count; calls through
a registered function pointer are no edge, which is the point. --data counts
uses of variables too (a global such as the backend's be_srv, read by every
file, then puts its file in every loop).

--allow FILE names edges that are known and may stay, one a line:
    from.c -> to.c   why, in a few words
(paths relative to the repository root; '#' starts a comment). Allowed edges are left out
before loops are looked for. The exit status is 1 when a loop remains, 0
otherwise (an allowlist entry that names no edge is reported and fails too,
so the list cannot go stale). --edges prints every edge, loop or not.

Objects are found under the build folder's copy of FOLDER's top folder by
their source path (.../CMakeFiles/<target>.dir/<path under the CMake
folder>.c.o); a file built into several targets counts once. A source with no object (not built in this
configuration) is skipped and named.
"""
import argparse
import os
import subprocess
import sys


def find_objects(build, folder):
    """{source path relative to the repository: object path} for .c files under folder."""
    want = {}
    for root, _, files in os.walk(folder):
        for f in files:
            if f.endswith(".c"):
                want[os.path.normpath(os.path.join(root, f))] = None
    # a folder's sources are built by a CMakeLists.txt at or under its top
    # folder (build/frontend/...): look there first, the whole tree if not
    top = os.path.join(build, folder.split(os.sep)[0])
    for root, dirs, files in os.walk(top if os.path.isdir(top) else build):
        for f in files:
            if not f.endswith(".c.o"):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, build)
            parts = rel.split(os.sep)
            # <cmake dir parts> / CMakeFiles / <target>.dir / <source parts>.c.o
            if "CMakeFiles" not in parts:
                continue
            i = parts.index("CMakeFiles")
            if i + 2 >= len(parts):
                continue
            src = os.path.normpath(os.path.join(*(parts[:i] + parts[i + 2:]))[:-2])
            if src in want and want[src] is None:
                want[src] = path
    return want


def symbols(objs, data):
    """{object: (defined global names, undefined names)}, from one nm run:
    functions only (nm's T, W, i), variables too with data."""
    out = subprocess.run(["nm", "-P", "-A"] + objs, check=True, capture_output=True, text=True).stdout
    res = {o: (set(), set()) for o in objs}
    for line in out.splitlines():
        obj, _, rest = line.partition(": ")
        f = rest.split()
        if obj not in res or len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind == "U":
            res[obj][1].add(name)
        elif kind in "TWi" or (data and kind.isupper() and kind not in "NUw"):
            res[obj][0].add(name)
    return res


def sccs(nodes, edges):
    """Tarjan's strongly connected components; edges: {a: set(b)}."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
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


def read_allow(path):
    allow = {}
    if not path:
        return allow
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            f = line.split()
            if len(f) < 4 or f[1] != "->":
                sys.exit(f"{path}:{n}: want 'from.c -> to.c why'")
            allow[(f[0], f[2])] = " ".join(f[3:])
    return allow


def check(build, folder, allow, show_edges, data):
    objs = find_objects(build, folder)
    missing = sorted(s for s, o in objs.items() if o is None)
    files = {s: o for s, o in objs.items() if o is not None}
    if not files:
        print(f"{folder}: no objects under {build} (build first)")
        return 1
    defs, uses = {}, {}
    syms = symbols(sorted(files.values()), data)
    for src, obj in files.items():
        name = os.path.relpath(src, folder)
        defs[name], uses[name] = syms[obj]
    owner = {}
    for name, ds in defs.items():
        for d in ds:
            owner.setdefault(d, name)
    edges, why = {}, {}
    for a, us in uses.items():
        for u in us:
            b = owner.get(u)
            if b is None or b == a:
                continue
            why.setdefault((a, b), set()).add(u)
    status = 0
    allow = {(os.path.relpath(a, folder), os.path.relpath(b, folder)): w
             for (a, b), w in allow.items()
             if a.startswith(folder + os.sep) and b.startswith(folder + os.sep)}
    for pair in sorted(allow):
        if pair not in why:
            print(f"{folder}: allowlist names {pair[0]} -> {pair[1]}, which is no edge now: drop it")
            status = 1
    for (a, b) in why:
        if (a, b) not in allow:
            edges.setdefault(a, set()).add(b)
    if show_edges:
        for (a, b), names in sorted(why.items()):
            tag = "  (allowed)" if (a, b) in allow else ""
            print(f"{folder}: {a} -> {b}: {' '.join(sorted(names))}{tag}")
    loops = [c for c in sccs(defs.keys(), edges) if len(c) > 1]
    for comp in loops:
        status = 1
        print(f"{folder}: loop of {len(comp)} files: {' '.join(comp)}")
        for a in comp:
            for b in sorted(edges.get(a, ())):
                if b in comp:
                    print(f"    {a} -> {b}: {' '.join(sorted(why[(a, b)]))}")
    if not loops:
        print(f"{folder}: {len(files)} files, {len(why)} edges, no loops"
              + (f" ({len(allow)} allowed edges)" if allow else ""))
    for s in missing:
        print(f"{folder}: {s} has no object in {build} (not built here), skipped")
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--allow", help="allowed edges, 'from.c -> to.c why' a line")
    ap.add_argument("--edges", action="store_true", help="print every edge")
    ap.add_argument("--data", action="store_true", help="count uses of variables too")
    ap.add_argument("folders", nargs="+")
    a = ap.parse_args()
    allow = read_allow(a.allow)
    status = 0
    for folder in a.folders:
        status |= check(a.build, os.path.normpath(folder), allow, a.edges, a.data)
    return status


if __name__ == "__main__":
    sys.exit(main())
