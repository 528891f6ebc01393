#!/usr/bin/env bash
# Compile time against the length of a straight line (issue 42, item 6):
# `loss { return sum(W + W + ... + W) }` with N adds, compiled for the CPU
# with -v; prints, per N, the whole compile and its slowest phases, and the
# seconds per thousand ops, which stay about flat when every phase is
# linear in the graph.
#   bash bench/compile_scale.sh [N...]     (default 25000 50000 100000)
set -eu
cd "$(dirname "$0")/.."
DPC=${DPC:-bin/dpc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in ${@:-25000 50000 100000}; do
	python3 -c "
n = $n
print('param W : f32[4] = ones')
print('loss { return sum(' + ' + '.join(['W'] * n) + ') }')" >"$tmp/line.dp"
	start=$(date +%s.%N)
	"$DPC" --target cpu -v "$tmp/line.dp" -o "$tmp/line" 2>"$tmp/v.log"
	end=$(date +%s.%N)
	python3 - "$n" "$start" "$end" "$tmp/v.log" <<'PY'
import re, sys
n, start, end = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
phases = []
for line in open(sys.argv[4]):
    m = re.match(r"dpc: (.*?)\s+([0-9.]+) ms$", line)
    if m:
        phases.append((float(m.group(2)) / 1000, m.group(1)))
top = ", ".join(f"{name} {s:.2f} s" for s, name in sorted(phases, reverse=True)[:3])
print(f"{n:7d} adds: {end - start:6.2f} s, {1000 * (end - start) / n:.3f} s per thousand ops; slowest: {top}")
PY
done
