#!/usr/bin/env python3
"""Measured beside predicted (docs/kernels.md): reads an executable's
--profile output (one step) and the --schedule-json its plan was compiled
with, and prints, for each kernel label and for the GEMMs, convolutions and
copies taken together, the measured and predicted milliseconds of one step
and their ratio, then the step's. Usage: kernels_vs.py PROFILE.txt PLAN.json [MEASURED_STEP_MS]"""
import json
import re
import sys


def group(name):
    """one name for a launch in both lists: kernels by label, library calls and copies by kind"""
    if name.startswith("gemm"):
        return "GEMMs"
    m = re.match(r"^(conv2d(_dx|_dw)?)[ \[]", name)
    if m:
        return m.group(1)
    if name in ("memcpy", "copy"):
        return "copies"
    if name in ("memset", "zero"):
        return "zeroing"
    if name.split("[")[0] in ("sgd", "adam"):
        return "optimizer"
    return name


def main():
    prof, plan = open(sys.argv[1]).read().splitlines(), json.load(open(sys.argv[2]))
    measured, predicted = {}, {}
    for line in prof:
        # ms, %, calls, on the GPU the kernel's predicted ms (or -), then the label
        m = re.match(r"^\s*([0-9.]+)\s+[0-9.]+\s+(\d+)\s+(?:(?:[0-9.]+|-)\s+)?([a-z].*)$", line)
        if m:
            g = group(m.group(3).strip())
            measured[g] = measured.get(g, 0) + float(m.group(1))
    for k in plan["kernels"]:
        g = group(k["name"])
        predicted[g] = predicted.get(g, 0) + k["count"] * k["predicted_us"] / 1000
    rows = sorted(set(measured) | set(predicted), key=lambda g: -max(measured.get(g, 0), predicted.get(g, 0)))
    print("| launch | measured ms | predicted ms | predicted / measured |")
    print("| --- | --- | --- | --- |")
    for g in rows[:25]:
        a, b = measured.get(g), predicted.get(g)
        f = lambda v: "-" if v is None else f"{v:.3f}"
        print(f"| {g} | {f(a)} | {f(b)} | {f'{b / a:.2f}' if a and b else '-'} |")
    step = float(sys.argv[3]) if len(sys.argv) > 3 else sum(measured.values())
    print(f"| **step** | {step:.3f} | {plan['predicted_step_ms']:.3f} | {plan['predicted_step_ms'] / step:.2f} |")
    gemm_shapes(prof, plan)


def gemm_shapes(prof, plan):
    """the GEMMs by [m x n x k], transposes and batches taken together: where
    their time goes, and the rate each shape ran at (the plan's FLOPs)"""
    measured, predicted, flops = {}, {}, {}
    for line in prof:
        m = re.match(r"^\s*([0-9.]+)\s+[0-9.]+\s+(\d+)\s+(?:(?:[0-9.]+|-)\s+)?gemm.*\[(\d+) x (\d+) x (\d+)\]", line)
        if m:
            key = tuple(int(x) for x in m.group(3, 4, 5))
            measured[key] = measured.get(key, 0) + float(m.group(1))
    for k in plan["kernels"]:
        m = re.match(r"^gemm\[(\d+),(\d+),(\d+)\]", k["name"])
        if m:
            key = tuple(int(x) for x in m.groups())
            predicted[key] = predicted.get(key, 0) + k["count"] * k["predicted_us"] / 1000
            flops[key] = flops.get(key, 0) + k["count"] * k["flops"]
    if not measured:
        return
    print()
    print("| GEMM [m x n x k] | measured ms | predicted ms | predicted / measured | TFLOP/s measured |")
    print("| --- | --- | --- | --- | --- |")
    for key in sorted(measured, key=lambda g: -measured[g])[:12]:
        a, b, f = measured[key], predicted.get(key), flops.get(key)
        rate = f"{f / a / 1e9:.1f}" if f and a else "-"
        print(f"| {key[0]} x {key[1]} x {key[2]} | {a:.3f} | {'-' if b is None else f'{b:.3f}'} | "
              f"{f'{b / a:.2f}' if b else '-'} | {rate} |")


main()
