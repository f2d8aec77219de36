#!/usr/bin/env python3
"""Loops of calls between the C files of a folder (docs/STATUS.md, issue 19).

A file's non-static function definitions are matched against the names every
other file of the same folder uses; a loop is a set of files that reach each
other that way (a strongly connected component of that graph). Calls through
registered function pointers do not count: that is how a lower file reaches a
higher one (backend/README.md, "Files").

    tools/call_loops.py DIR...    prints each loop with the names on its edges;
                                  exit status 1 when any folder has one
"""
import os
import re
import sys

DEF = re.compile(r'^(?!static\b)[A-Za-z_][^\n;=(]*?\(?\b([A-Za-z_]\w*)\)?\s*\([^;{]*\)\s*\{', re.M)
NAME = re.compile(r'\b([A-Za-z_]\w*)\b')
KEYWORDS = {'if', 'for', 'while', 'switch', 'return', 'sizeof'}


LEXEME = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def strip(text):
    """The code alone: comments, strings and characters left out, in one
    pass, so that a quote inside one of them starts nothing."""
    return LEXEME.sub(lambda m: ' ' if m.group(0)[0] == '/' else '0', text)


def edges_of(folder):
    """{(caller file, callee file): names} for the .c files of folder."""
    code = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith('.c'):
            with open(os.path.join(folder, f), encoding='utf-8', errors='replace') as fh:
                code[f] = strip(fh.read())
    defined = {}
    for f, text in code.items():
        for m in DEF.finditer(text):
            if m.group(1) not in KEYWORDS:
                defined.setdefault(m.group(1), f)
    edges = {}
    for f, text in code.items():
        for name in set(NAME.findall(text)):
            g = defined.get(name)
            if g and g != f:
                edges.setdefault((f, g), set()).add(name)
    return list(code), edges


def loops_of(nodes, edges):
    """The strongly connected components of more than one file (Tarjan)."""
    out = {n: [] for n in nodes}
    for a, b in edges:
        out[a].append(b)
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in out[v]:
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
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for n in nodes:
        if n not in index:
            visit(n)
    return found


def main(folders):
    bad = 0
    for folder in folders:
        nodes, edges = edges_of(folder)
        for comp in loops_of(nodes, edges):
            bad = 1
            print(f'{folder}: a loop of {len(comp)} files: {", ".join(comp)}')
            for (a, b), names in sorted(edges.items()):
                if a in comp and b in comp:
                    print(f'  {a} -> {b}: {", ".join(sorted(names))}')
    return bad


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
