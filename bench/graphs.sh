#!/usr/bin/env bash
# bench/graphs.sh [NET...]: dpc's checkpoint selection on the networks of
# Feng & Huang's table (CVPR 2021, "Optimal Gradient Checkpoint Search for
# Arbitrary Computation Graphs") that dpc can express, at their input sizes.
# Each network is written by bench/graphs.py and planned (not run) with
# --checkpoint auto --stream none; prints, per network:
#   store-everything's peak and its activation bytes (the peak less the
#   weights, their gradients and optimizer state, as they count them);
#   the least budget that plans (bisection over compiles, to 0.1% of the
#   peak), its cut of the activation bytes beside their published cut, and
#   what it recomputes, as a fraction of one forward's FLOPs;
#   the trade-off: the fraction recomputed at 90%, 75%, 50% and 25% of the
#   peak ("-" where that is below the least budget);
#   the compile time and memory at the least budget.
# NET: resnet152 (batch 16), densenet121 (batch 32), densenet201 (batch 16),
# each at 224x224; default all three.
set -eu
cd "$(dirname "$0")/.."
DPC=${DPC:-bin/dpc}
[ -x "$DPC" ] || make -s bin/dpc
out=${TMPDIR:-/tmp}/dpc_graphs.$$
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
nets=("$@")
[ ${#nets[@]} = 0 ] && nets=(resnet152 densenet121 densenet201)

batch() { case $1 in resnet152) echo 16 ;; densenet121) echo 32 ;; *) echo 16 ;; esac; }
theirs() { case $1 in resnet152) echo 81 ;; densenet121) echo 78 ;; densenet201) echo 85 ;; *) echo - ;; esac; }
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
# plan FILE BUDGET: exit 0 when it plans; the schedule in $out/s.json
plan() { "$DPC" --target cpu "$1" --device-mem "$2" --stream none --emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null 2>&1; }
frac() { field "$out/s.json" "'%.3f' % d['recomputed_fraction']"; }

printf '%-12s %5s %10s %10s %10s %6s %6s %8s %7s %7s %7s %7s %8s %8s\n' network batch peak_MB act_MB least_MB cut theirs rec@least \
	rec@90 rec@75 rec@50 rec@25 compile_s rss_MB
for net in "${nets[@]}"; do
	f="$out/$net.dp"
	python3 bench/graphs.py "$net" "$(batch "$net")" 224 >"$f"
	"$DPC" --target cpu "$f" --emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null
	full=$(field "$out/s.json" "d['peak_device_bytes']['total']")
	weights=$(field "$out/s.json" "d['peak_device_bytes']['params'] + d['peak_device_bytes']['grads'] + d['peak_device_bytes']['optimizer']")
	lo=0 hi=$full
	while [ $((hi - lo)) -gt $((full / 1000)) ]; do
		mid=$(((lo + hi) / 2))
		if plan "$f" $mid; then hi=$mid; else lo=$mid; fi
	done
	plan "$f" $hi
	least=$(field "$out/s.json" "d['peak_device_bytes']['total']")
	rec_least=$(frac)
	t=$( { /usr/bin/time -f '%e %M' "$DPC" --target cpu "$f" --device-mem $hi --stream none --emit=schedule >/dev/null; } 2>&1 | tail -1)
	curve=()
	for pc in 90 75 50 25; do
		if plan "$f" $((full * pc / 100)); then curve+=("$(frac)"); else curve+=(-); fi
	done
	cut=$(python3 -c "print('%.0f%%' % (100 * (1 - ($least - $weights) / ($full - $weights))))")
	printf '%-12s %5s %10.1f %10.1f %10.1f %6s %5s%% %8s %7s %7s %7s %7s %8s %8.0f\n' "$net" "$(batch "$net")" \
		"$(python3 -c "print($full / 1e6)")" "$(python3 -c "print(($full - $weights) / 1e6)")" \
		"$(python3 -c "print($least / 1e6)")" "$cut" "$(theirs "$net")" "$rec_least" "${curve[@]}" "${t% *}" \
		"$(python3 -c "print(${t#* } / 1024)")"
done
