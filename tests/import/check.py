#!/usr/bin/env python3
"""tests/import: one ONNX model through `dpc MODEL.onnx`, against onnx's
reference evaluator in float64.

  python3 tests/import/check.py DPC DIR NAME [--loss KIND] [--no-half]

DIR holds NAME.onnx and its data (tests/import/models.py). Prints one
"ok - " or "not ok - " line per check:
  - the loss of the imported program (--eval, running statistics) equals the reference's, 1e-10;
  - the first training step's loss (batch statistics) equals the reference's train mode, 1e-10;
  - after that step, --save holds every initializer under its ONNX name, the parameters
    unchanged at --lr 0 and the running statistics moved as PyTorch's train mode moves them;
  - the gradients agree with finite differences (--gradcheck);
  - an f32 build under --device-mem at half its store-everything peak gives the gradients of
    store-everything, bit for bit.
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

results = []


def report(name, good, detail=""):
    print(("ok - " if good else "not ok - ") + name)
    if not good and detail:
        print("    " + detail.strip().replace("\n", "\n    ")[:3000])
    results.append(good)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def main():
    dpc, d, name = sys.argv[1:4]
    kind = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--loss" else "cross_entropy"
    half = "--no-half" not in sys.argv
    model = onnx.load(os.path.join(d, name + ".onnx"))
    x = np.load(os.path.join(d, name + ".x.npy"))
    y = np.load(os.path.join(d, name + ".y.npy"))
    exe = os.path.join(d, name + "64")
    data = ["--data", os.path.join(d, name + ".x.npy"), "--labels", os.path.join(d, name + ".y.npy")]
    c = run([dpc, os.path.join(d, name + ".onnx"), "--target", "cpu", "--precision", "f64", "--loss", kind, "-o", exe])
    report(f"import/{name}: dpc {name}.onnx compiles", c.returncode == 0, c.stderr)
    if c.returncode:
        return
    has_bn = any(n.op_type == "BatchNormalization" for n in model.graph.node)

    want, _ = reference.loss(model, x, y, kind, train=False)
    s = os.path.join(d, name + ".eval.json")
    r = run([exe, "--eval", "--steps", "1", "--summary-json", s] + data)
    got = json.load(open(s))["loss"] if r.returncode == 0 else None
    report(f"import/{name}: --eval's loss is the reference's within 1e-10 ({got} vs {want})",
           got is not None and abs(got - want) <= 1e-10 * max(1, abs(want)), r.stderr)

    want, stats = reference.loss(model, x, y, kind, train=True)
    s = os.path.join(d, name + ".train.json")
    saved = os.path.join(d, name + ".saved.safetensors")
    r = run([exe, "--steps", "1", "--lr", "0", "--summary-json", s, "--save", saved] + data)
    got = json.load(open(s))["loss_first"] if r.returncode == 0 else None
    report(f"import/{name}: the first step's loss (training mode) is the reference's within 1e-10 ({got} vs {want})",
           got is not None and abs(got - want) <= 1e-10 * max(1, abs(want)), r.stderr)
    if r.returncode == 0:
        t = reference.read_safetensors(saved)
        inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer
                 if i.data_type in reference.REALS and i.dims}
        missing = sorted(set(inits) - set(t))
        report(f"import/{name}: --save writes every initializer under its ONNX name", not missing,
               f"missing: {missing}; saved: {sorted(t)}")
        bad = []
        inferred = onnx.shape_inference.infer_shapes(model)
        shapes = {vi.name: [dd.dim_value for dd in vi.type.tensor_type.shape.dim]
                  for vi in list(inferred.graph.value_info) + list(inferred.graph.input)}
        for k, v in inits.items():
            if k not in t:
                continue
            if k in stats:
                # ONNX's reference moves the variance by the biased one; PyTorch (and dpc) by the unbiased
                node = next(n for n in model.graph.node if n.op_type == "BatchNormalization" and k in n.input)
                mom = next((a.f for a in node.attribute if a.name == "momentum"), 0.9)
                exp = stats[k]
                if k == node.input[4]:
                    shape = shapes[node.input[0]]
                    cnt = shape[0] * int(np.prod(shape[2:]))
                    biased = (exp - mom * v.astype(np.float64)) / (1 - mom)
                    exp = mom * v.astype(np.float64) + (1 - mom) * biased * cnt / (cnt - 1)
                if np.abs(t[k] - exp).max() > 1e-6 * max(1, np.abs(exp).max()):
                    bad.append(f"{k}: {t[k].ravel()[:4]} vs {np.asarray(exp).ravel()[:4]}")
            elif not np.array_equal(t[k].astype(np.float64), v.astype(np.float64)):
                bad.append(f"{k} changed at --lr 0")
        report(f"import/{name}: after a step at --lr 0 the parameters are the file's"
               + (" and the running statistics moved as PyTorch's train mode" if has_bn else ""), not bad,
               "\n".join(bad))

    r = run([exe, "--gradcheck"] + data)
    report(f"import/{name}: gradients agree with finite differences (--gradcheck)", r.returncode == 0,
           r.stdout[-2000:] + r.stderr)

    if not half:  # a model whose working set is most of its peak
        return
    # f32 under half the store-everything peak: the same gradients as store-everything
    full = os.path.join(d, name + "32")
    c = run([dpc, os.path.join(d, name + ".onnx"), "--target", "cpu", "--loss", kind, "-o", full,
             "--schedule-json", full + ".json", "--checkpoint", "none"])
    if c.returncode:
        report(f"import/{name}: the f32 build compiles", False, c.stderr)
        return
    mem = json.load(open(full + ".json"))["peak_device_bytes"]
    peak = mem["total"]
    fixed = sum(mem[k] for k in ("params", "grads", "optimizer", "inputs"))
    budget = fixed + (peak - fixed) // 2
    half = os.path.join(d, name + "32half")
    c = run([dpc, os.path.join(d, name + ".onnx"), "--target", "cpu", "--loss", kind, "-o", half,
             "--device-mem", str(budget), "--checkpoint", "auto", "--stream", "none"])
    if c.returncode:
        report(f"import/{name}: compiles under --device-mem {budget} (half of {peak})", False, c.stderr)
        return
    g1, g2 = full + ".grads.safetensors", half + ".grads.safetensors"
    r1 = run([full, "--steps", "1", "--dump-grads", g1] + data)
    r2 = run([half, "--steps", "1", "--dump-grads", g2] + data)
    same = r1.returncode == 0 and r2.returncode == 0
    if same:  # every tensor's bytes (the files' headers name their models)
        t1, t2 = reference.read_safetensors(g1), reference.read_safetensors(g2)
        same = t1.keys() == t2.keys() and all(t1[k].tobytes() == t2[k].tobytes() for k in t1)
    report(f"import/{name}: under --device-mem {budget} (fixed {fixed} bytes and half the rest of {peak}) the "
           f"gradients are store-everything's, bit for bit", same, r1.stderr + r2.stderr)


if __name__ == "__main__":
    main()
    sys.exit(0 if all(results) else 1)
