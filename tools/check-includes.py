#!/usr/bin/env python3
"""Folder-level include arrows: which folder's files include which other
folder's headers, and every cycle among them (issue 41: arrows one way).
Prints the arrows and the cycles; exits 1 where there is a cycle.
  python3 tools/check-includes.py"""
import os
import re
import sys

root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
edges = {}
for top in ("compiler", "runtime", "common"):
    for d, _, files in os.walk(os.path.join(root, top)):
        for f in files:
            if not f.endswith((".c", ".h", ".inc")):
                continue
            src = os.path.join(d, f)
            here = os.path.relpath(d, root)
            for inc in re.findall(r'^#include "([^"]+)"', open(src).read(), re.M):
                there = os.path.relpath(os.path.dirname(os.path.normpath(os.path.join(d, inc))), root)
                if there != here:
                    edges.setdefault(here, {}).setdefault(there, set()).add(f"{os.path.relpath(src, root)} -> {inc}")


def cycles():
    found, seen = [], set()

    def walk(node, path):
        for nxt in sorted(edges.get(node, {})):
            if nxt in path:
                cyc = path[path.index(nxt):] + [nxt]
                key = frozenset(cyc)
                if key not in seen:
                    seen.add(key)
                    found.append(cyc)
            elif len(path) < 12:
                walk(nxt, path + [nxt])

    for n in sorted(edges):
        walk(n, [n])
    return found


for a in sorted(edges):
    print(f"{a} -> {', '.join(sorted(edges[a]))}")
cs = cycles()
for c in cs:
    print("cycle: " + " -> ".join(c))
    for a, b in zip(c, c[1:]):
        print("   ", sorted(edges[a][b])[0])
print(f"{len(edges)} folders, {len(cs)} cycles")
sys.exit(1 if cs else 0)
