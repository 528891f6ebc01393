#!/usr/bin/env bash
# Two builds of dpc compared on the plans they make, for a change to the
# planner that must alter none (a faster search, a memo): every sample in
# f32 and f64 stored whole, at min-memory and at 75%, 50% and 30% of its
# store-everything peak (a small program's packing search closes gaps the
# imports do not show: bench/RESULTS.md, 2026-12-07); bench/graphs.py's six
# networks (NASNet and DARTS among them) at min-memory; then, where EXPORTS
# holds torchvision's exports (resnet152, densenet121, densenet201,
# inception_v3 .onnx: `EXPORTS=DIR bash bench/graphs.sh onnx` keeps them
# there), each at min-memory and
# at a budget one point past Feng & Huang's cut and that on one thread
# (--threads 1); where it has loops, its flat import at that budget and its
# loops alone at four budgets and min-memory. Compared: the
# schedule (--emit=schedule), the schedule JSON, and -v less its timings and
# the converter's temporary folder. Prints each case that differs and a last
# line "N cases, N differ".
#   bash tools/plan-ab.sh OLD/bin/dpc NEW/bin/dpc [EXPORTS]
# Each build needs its own runtime and converter beside it (a worktree).
set -u
cd "$(dirname "$0")/.."
old=$1 new=$2 ex=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 bad=0

# plan DPC OUT ARGS...: the three outputs of one compile into OUT.*, normalized
plan() {
	local dpc=$1 out=$2
	shift 2
	"$dpc" --target cpu "$@" --emit=schedule -o "$out.sched" --schedule-json "$out.json" -v >/dev/null 2>"$out.err"
	echo "exit $?" >>"$out.err"
	sed -i -E 's/ +[0-9]+\.[0-9]+ ms//g; s/[0-9.]+ s\b//g; s/ +$//' "$out.err"
	sed -i -E 's#/tmp/dpc-onnx-[A-Za-z0-9]+#ONNX#g' "$out.sched" "$out.json" "$out.err" 2>/dev/null
}

same() { # name, then the arguments to both builds
	local name=$1
	shift
	n=$((n + 1))
	rm -f "$tmp"/a.* "$tmp"/b.*
	plan "$old" "$tmp/a" "$@"
	plan "$new" "$tmp/b" "$@"
	local f
	for f in sched json err; do
		# a compile that fails writes no schedule (its outputs are written whole or not at all)
		[ -e "$tmp/a.$f" ] || [ -e "$tmp/b.$f" ] || continue
		if ! cmp -s "$tmp/a.$f" "$tmp/b.$f"; then
			bad=$((bad + 1))
			echo "differs ($f): $name: $*"
			return
		fi
	done
}

peak() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['peak_device_bytes']['total'])" "$1" 2>/dev/null; }

for s in samples/*.dp; do
	for prec in f32 f64; do
		same "$s $prec stored whole" "$s" --precision "$prec" --checkpoint none
		p=$(peak "$tmp/a.json")
		[ -n "$p" ] || continue
		same "$s $prec min-memory" "$s" --precision "$prec" --checkpoint min-memory
		for f in 75 50 30; do
			same "$s $prec at $f%" "$s" --precision "$prec" --device-mem $((p * f / 100))
		done
	done
done

# bench/graphs.py's six networks at their sizes, at min-memory: where the chain start without the tiny values is
# taken (all but Inception-v3 and DARTS), the improvement beside its evaluation is stopped and made again
for spec in resnet152:16:224 densenet121:32:224 densenet201:16:224 inception_v3:32:299 nasnet:64:32 darts:64:32; do
	IFS=: read -r net b sz <<<"$spec"
	python3 bench/graphs.py "$net" "$b" "$sz" >"$tmp/hand.$net.dp" 2>/dev/null || continue
	same "bench/graphs.py $net min-memory" "$tmp/hand.$net.dp" --checkpoint min-memory --stream none
done

# a budget one point past Feng & Huang's cut, as bench/graphs.sh computes it (the bytes of 2026-12-07's exports)
past() { case $1 in resnet152) echo 1233515975 ;; densenet121) echo 1333161523 ;; densenet201) echo 827610910 ;;
	inception_v3) echo 1288353832 ;; esac; }
if [ -n "$ex" ]; then
	for net in resnet152 densenet121 densenet201 inception_v3; do
		m=$ex/$net.onnx
		[ -f "$m" ] || continue
		b=$(past "$net")
		same "$net cut + 1" "$m" --device-mem "$b" --stream none
		same "$net min-memory" "$m" --checkpoint min-memory --stream none
		same "$net cut + 1, one thread" "$m" --device-mem "$b" --stream none --threads 1
		"$new" --target cpu "$m" --emit=dp -o "$tmp/$net.dp" >/dev/null 2>&1 || continue
		"$new" --target cpu "$m" --no-loops --emit=dp -o "$tmp/$net.flat.dp" >/dev/null 2>&1 || continue
		if grep -q '^ *for ' "$tmp/$net.dp"; then
			same "$net flat, cut + 1" "$tmp/$net.flat.dp" --device-mem "$b" --stream none
			for f in 90 100 120 180; do
				same "$net loops at $f% of cut + 1" "$tmp/$net.dp" --device-mem $((b * f / 100)) --stream none
			done
			same "$net loops, min-memory" "$tmp/$net.dp" --checkpoint min-memory --stream none
		fi
	done
fi
echo "$n cases, $bad differ"
[ "$bad" = 0 ]
