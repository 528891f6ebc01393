"""fma_steps.py KERNELS.json KERNELS.ptx: for each attention kernel in FMA
(the schedule JSON's launches with instructions_per_step, attn_fma.c), the
PTX instructions of one step of a row of the other side (the innermost loop
holding the scores' shuffles, its nested loops left out, over the steps it
holds: one exponential each, and the forward's rescaling one more a tile)
against the cost model's count, within 10%."""
import json, re, sys

plan = json.load(open(sys.argv[1]))
ptx = open(sys.argv[2]).read()
seen, bad = 0, []
for k in plan["kernels"]:
    if "instructions_per_step" not in k:
        continue
    body = re.search(r"\.entry dp_k%d\((.*?)\n}" % k["kernel"], ptx, re.S).group(1).split("\n")
    labels = {m.group(1): i for i, l in enumerate(body) for m in [re.match(r"^\s*(\$?L\w+):", l)] if m}
    loops = []
    for i, l in enumerate(body):
        m = re.search(r"\bbra(\.uni)?\s+(\$?L\w+);", l)
        if m and m.group(2) in labels and labels[m.group(2)] < i:
            loops.append((labels[m.group(2)], i))
    def instructions(a, b):
        return [l.strip() for l in body[a:b + 1] if l.strip() and not l.strip().endswith(":") and not l.strip().startswith(("//", "."))]
    inner = min((r for r in loops if any("shfl" in l for l in instructions(*r))), key=lambda r: r[1] - r[0], default=None)
    assert inner, (k["name"], "no loop with shuffles")
    nested = [r for r in loops if r != inner and inner[0] <= r[0] and r[1] <= inner[1]]
    own = [i for i in range(inner[0], inner[1] + 1) if not any(a <= i <= b for a, b in nested)]
    ins = [l for i in own for l in instructions(i, i)]
    steps = sum("ex2" in l or "__nv_exp" in l for l in ins) - (1 if k["name"].startswith("attention[") else 0)
    got = len(ins) / max(steps, 1)
    want = k["instructions_per_step"]
    print(f"{k['name']}: {got:.1f} PTX instructions a step, the model {want:.1f}")
    if not (steps >= 1 and abs(got - want) <= 0.1 * want):
        bad.append((k["name"], got, want, steps))
    seen += 1
assert seen >= 3 and not bad, (seen, bad)
