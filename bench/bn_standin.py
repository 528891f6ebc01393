#!/usr/bin/env python3
"""A timing stand-in for a fused batch norm (issue 62, item 4): reads an
imported .dp (dpc M.onnx --emit=dp) and writes it with each batch norm as
y = x * g + b, its statistics, their blends with training() and the running
updates dropped. The program trains something else; only its planning time
is meant to be compared (bench/RESULTS.md, 2026-12-05).
    python3 bench/bn_standin.py IN.dp > OUT.dp"""
import re
import sys

lines = open(sys.argv[1]).read().split("\n")
# each batch norm's input (from its centred values) and gain (from its scale)
x_of, gain_of = {}, {}
for line in lines:
    m = re.match(r"\s*let (\S+)_bn_ce = (\S+) - ", line)
    if m:
        x_of[m.group(1)] = m.group(2)
    m = re.match(r"\s*let (\S+)_bn_sc = (\S+) / sqrt", line)
    if m:
        gain_of[m.group(1)] = m.group(2)
out = []
for line in lines:
    s = line.strip()
    if re.match(r"let \S+_bn_(me|m|va|v|sc|ce) = ", s) or (s.startswith("update ") and "_bn_" in s):
        continue
    m = re.match(r"(\s*)let (\S+) = (\S+)_bn_ce \* reshape\((\S+)_bn_sc, (\[[^\]]*\])\) \+ (.*)$", line)
    if m:
        indent, name, base, _, shape, rest = m.groups()
        line = f"{indent}let {name} = {x_of[base]} * reshape({gain_of[base]}, {shape}) + {rest}"
    out.append(line)
print("\n".join(out))
