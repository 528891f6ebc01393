"""units.py ONE SPLIT: the kernels' PTX made in units (compiler/codegen/units.c)
against the same program's in one module. SPLIT must be one PTX module (one
header), hold every kernel of ONE and no other, and each kernel's code must
be ONE's but for what units rename or renumber: the unit's suffix _uN on
module-scope names, the labels' function numbers (LBBn_) and the call
sequences' numbers in comments. SPLIT's kernels must also be out of their
numbers' order (unit by unit: it was split)."""
import re
import sys


def kernels(text):
    out = {}
    for m in re.finditer(r"\.visible \.entry (dp_k\d+)\((.*?)\n\}\n", text, re.S):
        body = re.sub(r"_u\d+\b", "", m.group(2))
        body = re.sub(r"LBB\d+_", "LBB_", body)
        body = re.sub(r"callseq \d+", "callseq", body)
        out[m.group(1)] = body
    return out


one, split = (open(p).read() for p in sys.argv[1:3])
headers = len(re.findall(r"^\.version ", split, re.M))
assert headers == 1, f"{sys.argv[2]}: {headers} .version lines, want 1"
a, b = kernels(one), kernels(split)
assert a, f"{sys.argv[1]}: no kernels"
assert set(a) == set(b), f"kernels only in one: {sorted(set(a) ^ set(b))[:5]}"
differ = [k for k in a if a[k] != b[k]]
assert not differ, f"{len(differ)} kernels' code differs, e.g. {differ[:3]}"
order = [int(k) for k in re.findall(r"\.visible \.entry dp_k(\d+)\(", split)]
assert order != sorted(order), f"{sys.argv[2]}: the kernels in their numbers' order: not split"
print(f"{len(a)} kernels, the same code")
