#!/usr/bin/env python3
"""The launch check (docs/kernels.md): reads a --schedule-json file of the
CUDA target and fails on any launch that moves more than 16 MiB or does more
than 1 GFLOP on fewer blocks than the GPU has SMs, and on an attention or
cross-entropy kernel with a stack frame. Also checks that the predicted step
is the sum of its launches, and optional counts: NAME=N (launches per step
whose name starts with NAME), NAME/rows=N (the same launches' rows of
scores, every head's: the count times the first two of the shape's three
numbers, items x heads and query rows, for attention's row kernels on
GEMMs, whose groups of items and blocks of rows depend on the workspace)."""
import json
import sys


def heads_rows(name):
    """attn_softmax[96,256,1024]: 96 x 256 rows of scores"""
    dims = name.split("[")[1].split(",")
    return int(dims[0]) * int(dims[1])

SMS = {"h100": 132, "h200": 132, "a100": 108}


def main():
    path, wants = sys.argv[1], sys.argv[2:]
    d = json.load(open(path))
    ks = d["kernels"]
    sms = SMS[d["gpu"]]
    bad = []
    for k in ks:
        if k["blocks"] >= 0 and k["blocks"] < sms and (k["bytes"] > 16 << 20 or k["flops"] > 10**9):
            bad.append("starved: %s, %d blocks for %d bytes, %d FLOPs" % (k["name"], k["blocks"], k["bytes"], k["flops"]))
        heavy = k["name"].startswith(("attention", "attn_", "cross_entropy"))
        if heavy and k["kind"] == "kernel":
            if k["stack_bytes"] is None:
                bad.append("%s: no ptxas figures (is ptxas at hand?)" % k["name"])
            elif k["stack_bytes"] > 0:
                bad.append("%s: a %d-byte stack frame" % (k["name"], k["stack_bytes"]))
    total = sum(k["count"] * k["predicted_us"] for k in ks) / 1000
    if abs(total - d["predicted_step_ms"]) > 1e-3 * max(total, 1) and d["predicted_step_ms"] < total:
        bad.append("predicted_step_ms %g is not the launches' sum %g" % (d["predicted_step_ms"], total))
    for w in wants:
        name, n = w.rsplit("=", 1)
        rows = name.endswith("/rows")
        name = name[:-5] if rows else name
        got = sum(k["count"] * (heads_rows(k["name"]) if rows else 1)
                  for k in ks if k["name"].startswith(name))
        if got != int(n):
            bad.append("%s: %d launches a step, expected %s" % (name, got, n))
    for b in bad:
        print(b)
    print("%d launches a step, %d rows, predicted %.3f ms on %s" % (d["predicted_launches"], len(ks), d["predicted_step_ms"], d["gpu"]))
    sys.exit(1 if bad else 0)


main()
