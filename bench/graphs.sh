#!/usr/bin/env bash
# bench/graphs.sh [NET...]: dpc's checkpoint selection on the networks of
# Feng & Huang's table (CVPR 2021, "Optimal Gradient Checkpoint Search for
# Arbitrary Computation Graphs") that dpc can express, at their input sizes.
# Each network is written by bench/graphs.py and planned (not run) with
# --checkpoint auto --stream none; prints, per network:
#   store-everything's peak and its activation bytes (the peak less the
#   weights, their gradients and optimizer state, as they count them);
#   the least peak (--checkpoint min-memory), its cut of the activation
#   bytes beside their published cut, and what it recomputes, as a
#   fraction of one forward's FLOPs;
#   the trade-off: the fraction recomputed at 90%, 75%, 50% and 25% of the
#   peak ("-" where that is below the least budget);
#   the time and memory that min-memory's compile takes.
#   bash bench/graphs.sh offload [NET...]: keep, recompute or offload (issue
#   26, item 7): the least cut and what it recomputes with offloading priced
#   at the default --offload-cost (--device-mem 1T, streaming allowed) beside
#   the least without it, the bytes offloaded, and the same at 25% of the peak.
#   bash bench/graphs.sh onnx [NET...]: the same networks from torchvision's own
#   exports (resnet152, densenet121, densenet201, inception_v3, at the sizes
#   below; PYTHON names a Python with torch and torchvision; EXPORTS=DIR
#   keeps the exports there, made where missing), imported with
#   dpc MODEL.onnx (batch normalization in training mode, as exported): the
#   least cut (--checkpoint min-memory) and what it recomputes, beside
#   the hand-written row's and theirs, and the plan's seconds (conv_s: of
#   them, the converter's, from -v); then the plan
#   at a budget one point past their cut (the weights, their gradients and
#   (99 - theirs)% of the activation bytes): what it recomputes ("-": no plan)
#   and its seconds; and the same budget on the flat import (--no-loops: one
#   straight line, which the chain planner may plan with nested checkpoints),
#   what it recomputes, its seconds and the straight-line search it took.
#   bash bench/graphs.sh chainleast [NET...]: for the same exports' flat
#   imports, the least (min-memory) and what it recomputes, beside the lowest
#   budget (bisected between the least and their cut + 1) at which the chain
#   planner plans (its plan taken wherever it fits), in points above the
#   least, and what that recomputes (issue 62, item 3).
#   bash bench/graphs.sh loops [NET...]: torchvision's export (default
#   resnet152) with its loops as recovered against the flat import
#   (--no-loops), each planned from its .dp at budgets from the least up
#   (each's min-memory peak, then 95% down to 30% of the activation bytes
#   cut): the fraction of a forward each recomputes and its seconds.
#   bash bench/graphs.sh phases [NET|FILE...]: which of the straight-line
#   selection's stacked searches still find anything (issue 62, item 4): each
#   network (or a .dp or .onnx file) planned with --checkpoint min-memory and
#   at half its store-everything peak under DPC_SELECT_TRACE=1; per search
#   phase, the seconds it took and how often it lowered the planned bytes (the
#   least search; or its FLOPs at the same bytes) or the FLOPs (a budget's
#   fit), and by how much in all. Where the least search's second pass (packed
#   harder) runs in a child beside the first (two CPUs), its phases are one,
#   "least: packed hard"; run under taskset -c 0 to see them apart.
#   bash bench/graphs.sh codegen [NET...]: the whole compile of torchvision's
#   exports (as for onnx; from their flat .dp, store-everything) to an
#   executable for cuda and for cpu, on one thread and on nproc (--threads):
#   the seconds, code generation's share (-v), the kernels and their units,
#   and whether the two executables are the same bytes.
#   bash bench/graphs.sh scale: compile time and memory against the size of
#   the graph (ResNet-50, -101, -152, DenseNet-121, -201 at batch 16, 224x224,
#   ResNet-152 and DenseNet-121 also at twice and four times their depth;
#   NASNet and DARTS at their sizes), each at half its peak and with
#   --checkpoint min-memory.
# NET: at the sizes of Feng & Huang's code (their repository's
# net/model_factory.py and README): resnet152 (batch 16), densenet121 (batch
# 32), densenet201 (batch 16), each at 224x224, inception_v3 (batch 32,
# 299x299: theirs is 300), nasnet and darts (the CIFAR-10 networks of 20
# cells of 36 channels with NASNet-A's and DARTS-V2's cells, batch 64,
# 32x32); default all six. darts_imagenet (DARTS-V2's ImageNet network,
# batch 32, 224x224) is not in their table.
#
#   bash bench/graphs.sh build   (tests/gpu/run.sh build runs it) here, and
#   bash bench/graphs.sh gpu     on the GPU machine: samples/densenet.dp,
#     inception.dp and unet.dp at B=32, 32x32 (unet 64x64), each compiled
#     for cuda store-everything, under a budget (50% of store-everything's
#     peak; Inception 85%) and with --checkpoint min-memory; each runs 20 steps beside its PyTorch twin
#     (bench/graphs_torch.py) in eager mode, with torch.utils.checkpoint
#     around each layer, module or level, under torch.compile with
#     activation_memory_budget 0.5, and with every saved tensor on the host
#     (save_on_cpu) beside dpc's least with offloading (--checkpoint
#     min-memory --device-mem 1G); prints peak memory and ms per step.
set -eu
cd "$(dirname "$0")/.."
# on the GPU machine: gpu_build/'s packed folders (tests/gpu/unpack.sh)
[ -f gpu_build/dirs.tar.xz ] && { bash tests/gpu/unpack.sh || exit 1; }
DPC=${DPC:-bin/dpc}
G=gpu_build/graphs
size() { case $1 in unet) echo 64 ;; *) echo 32 ;; esac; }
# the budget between store-everything and the least, in % of store-everything's peak (Inception's least is 72%)
mid() { case $1 in inception) echo 85 ;; *) echo 50 ;; esac; }
if [ "${1:-}" = build ]; then
	mkdir -p $G
	for s in densenet inception unet; do
		d=(-D B=32 -D S=$(size $s))
		"$DPC" --target cuda "${d[@]}" --schedule-json $G/$s.none.json samples/$s.dp -o $G/$s.none
		full=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_device_bytes']['total'])" $G/$s.none.json)
		"$DPC" --target cuda "${d[@]}" --stream none --device-mem $((full * $(mid $s) / 100)) --schedule-json $G/$s.mid.json \
			samples/$s.dp -o $G/$s.mid
		"$DPC" --target cuda "${d[@]}" --checkpoint min-memory --schedule-json $G/$s.least.json samples/$s.dp -o $G/$s.least
		"$DPC" --target cuda "${d[@]}" --checkpoint min-memory --device-mem 1G --schedule-json $G/$s.offload.json \
			samples/$s.dp -o $G/$s.offload
	done
	exit 0
fi
if [ "${1:-}" = gpu ]; then
	nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /'
	for s in densenet inception unet; do
		for plan in none mid least offload; do
			$G/$s.$plan --steps 20 --quiet --summary-json /tmp/graphs_$s.json >/dev/null || exit 1
			python3 -c "import json,sys; d=json.load(open(sys.argv[1])); j=json.load(open(sys.argv[2])); print('dpc %s B=32 %s: peak %d bytes, %.3f ms/step, %.3f of a forward recomputed' % (sys.argv[3], sys.argv[4], d['peak_device_bytes'], d['ms_per_step'], j['recomputed_fraction']))" \
				/tmp/graphs_$s.json $G/$s.$plan.json $s $plan
		done
		for mode in none checkpoint budget=0.5 offload; do
			python3 bench/graphs_torch.py $s 32 $(size $s) $mode 20 || echo "torch $s $mode: failed"
		done
	done
	exit 0
fi
[ -x "$DPC" ] || make -s bin/dpc
out=${TMPDIR:-/tmp}/dpc_graphs.$$
# EXPORTS=DIR keeps torchvision's exports there, made where missing and used again (tools/plan-ab.sh reads them)
ex=${EXPORTS:-$out}
mkdir -p "$out" "$ex"
trap 'rm -rf "$out"' EXIT
nets=("$@")
[ ${#nets[@]} = 0 ] && nets=(resnet152 densenet121 densenet201 inception_v3 nasnet darts)

batch() { case $1 in nasnet | darts) echo 64 ;; densenet121 | inception_v3 | darts_imagenet) echo 32 ;; *) echo 16 ;; esac; }
side() { case $1 in inception_v3) echo 299 ;; nasnet | darts) echo 32 ;; *) echo 224 ;; esac; }
theirs() { case $1 in resnet152) echo 81 ;; densenet121) echo 78 ;; densenet201) echo 85 ;; inception_v3) echo 71 ;; nasnet) echo 81 ;;
	darts | darts_imagenet) echo 80 ;; esac; }
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
# plan FILE BUDGET: exit 0 when it plans; the schedule in $out/s.json
plan() { "$DPC" --target cpu "$1" --device-mem "$2" --stream none --emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null 2>&1; }
frac() { field "$out/s.json" "'%.3f' % d['recomputed_fraction']"; }
# network NET: $f, its program; $full, store-everything's peak; $weights, the bytes of weights,
# gradients and optimizer state in it
network() {
	f="$out/$1.dp"
	python3 bench/graphs.py "$1" "$(batch "$1")" "$(side "$1")" >"$f"
	"$DPC" --target cpu "$f" --emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null
	full=$(field "$out/s.json" "d['peak_device_bytes']['total']")
	weights=$(field "$out/s.json" "d['peak_device_bytes']['params'] + d['peak_device_bytes']['grads'] + d['peak_device_bytes']['optimizer']")
}
# cut PEAK: the share of store-everything's activation bytes that a plan of PEAK bytes cuts
cut() { python3 -c "print('%.0f%%' % (100 * (1 - ($1 - $weights) / ($full - $weights))))"; }

# export NET: torchvision's NET at its size to $ex/NET.onnx (batch normalization in training mode)
export() {
	"${PYTHON:-python3}" - "$1" "$(batch "$1")" "$(side "$1")" "$ex/$1.onnx" <<'PY'
import sys, warnings
import torch, torchvision
warnings.filterwarnings("ignore")
name, b, s, path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
kw = {"aux_logits": False, "init_weights": True} if name == "inception_v3" else {}
m = getattr(torchvision.models, name)(**kw).train()
torch.onnx.export(m, (torch.randn(b, 3, s, s),), path, dynamo=False, opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, input_names=["x"])
PY
}

if [ "${1:-}" = loops ]; then
	shift
	nets=("$@")
	[ ${#nets[@]} = 0 ] && nets=(resnet152)
	# issue 62, item 1: the import with its loops (as recovered) against the flat one (--no-loops) at budgets from the
	# loops' least up: what each recomputes (fraction of a forward; "-": no plan) and its seconds, from the .dp files
	# (the converter's time apart)
	printf '%-12s %12s %6s %10s %8s %10s %8s
' network budget_MB cut loops loops_s flat flat_s
	for net in "${nets[@]}"; do
		[ -f "$ex/$net.onnx" ] || export "$net"
		"$DPC" --target cpu "$ex/$net.onnx" --emit=dp -o "$out/$net.loops.dp" >/dev/null
		"$DPC" --target cpu "$ex/$net.onnx" --no-loops --emit=dp -o "$out/$net.flat.dp" >/dev/null
		"$DPC" --target cpu "$out/$net.flat.dp" --checkpoint none --emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null
		full=$(field "$out/s.json" "d['peak_device_bytes']['total']")
		weights=$(field "$out/s.json" "d['peak_device_bytes']['params'] + d['peak_device_bytes']['grads'] + d['peak_device_bytes']['optimizer']")
		budgets=()
		for w in loops flat; do
			"$DPC" --target cpu "$out/$net.$w.dp" --checkpoint min-memory --stream none --emit=schedule -o /dev/null \
				--schedule-json "$out/s.json" >/dev/null
			budgets+=("$(field "$out/s.json" "d['peak_device_bytes']['total']")")
		done
		for c in 95 92 90 85 80 75 70 60 50 40 30; do
			budgets+=("$(python3 -c "print(int($weights + (1 - $c / 100) * ($full - $weights)))")")
		done
		for b in $(printf '%s\n' "${budgets[@]}" | sort -n -u); do
			row=()
			for w in loops flat; do
				rm -f "$out/s.json"
				/usr/bin/time -f '%e' -o "$out/time" "$DPC" --target cpu "$out/$net.$w.dp" --device-mem "$b" --stream none \
					--emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null 2>&1 || true
				if [ -s "$out/s.json" ] && [ "$(field "$out/s.json" "d['peak_device_bytes']['total'] <= $b")" = True ]; then
					row+=("$(frac)" "$(tail -1 "$out/time")")
				else
					row+=(- "$(tail -1 "$out/time")")
				fi
			done
			printf '%-12s %12.1f %6s %10s %8s %10s %8s\n' "$net" "$(python3 -c "print($b / 1e6)")" "$(cut "$b")" "${row[@]}"
		done
	done
	exit 0
fi

if [ "${1:-}" = offload ]; then
	shift
	nets=("$@")
	[ ${#nets[@]} = 0 ] && nets=(resnet152 densenet121 densenet201 inception_v3 nasnet darts)
	printf '%-12s %6s %9s %6s %9s %10s %9s %9s %10s %9s\n' network cut rec@least cut_off rec@least off_MB rec@25 rec@25_off \
		off@25_MB compile_s
	for net in "${nets[@]}"; do
		network "$net"
		"$DPC" --target cpu "$f" --checkpoint min-memory --stream none --emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null
		least=$(field "$out/s.json" "d['peak_device_bytes']['total']") rec=$(frac)
		t=$( { /usr/bin/time -f '%e' "$DPC" --target cpu "$f" --checkpoint min-memory --device-mem 1T --emit=schedule -o /dev/null \
			--schedule-json "$out/s.json" >/dev/null; } 2>&1 | tail -1)
		least_off=$(field "$out/s.json" "d['peak_device_bytes']['total']") rec_off=$(frac)
		moved=$(field "$out/s.json" "'%.1f' % (d['straight_line']['offloaded_bytes'] / 1e6)")
		at25=- at25_off=- moved25=-
		if plan "$f" $((full / 4)); then at25=$(frac); fi
		if "$DPC" --target cpu "$f" --device-mem $((full / 4)) --emit=schedule -o /dev/null --schedule-json "$out/s.json" \
			>/dev/null 2>&1; then
			at25_off=$(frac) moved25=$(field "$out/s.json" "'%.1f' % (d['straight_line']['offloaded_bytes'] / 1e6)")
		fi
		printf '%-12s %6s %9s %6s %9s %10s %9s %9s %10s %9s\n' "$net" "$(cut $least)" "$rec" "$(cut $least_off)" "$rec_off" \
			"$moved" "$at25" "$at25_off" "$moved25" "$t"
	done
	exit 0
fi

if [ "${1:-}" = onnx ]; then
	shift
	nets=("$@")
	[ ${#nets[@]} = 0 ] && nets=(resnet152 densenet121 densenet201 inception_v3)
	printf '%-12s %6s %5s %12s %12s %6s %9s %6s %9s %9s %7s %10s %8s %10s %8s %6s\n' network batch side full_MB act_MB cut rec@least \
		theirs hand_cut compile_s conv_s rec@them+1 fit_s flat@them+1 flat_s search
	for net in "${nets[@]}"; do
		[ -f "$ex/$net.onnx" ] || export "$net"
		"$DPC" --target cpu "$ex/$net.onnx" --checkpoint none --emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null
		full=$(field "$out/s.json" "d['peak_device_bytes']['total']")
		weights=$(field "$out/s.json" "d['peak_device_bytes']['params'] + d['peak_device_bytes']['grads'] + d['peak_device_bytes']['optimizer']")
		/usr/bin/time -f '%e' -o "$out/time" "$DPC" --target cpu "$ex/$net.onnx" --checkpoint min-memory --stream none -v \
			--emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null 2>"$out/err"
		t=$(tail -1 "$out/time")
		# of it, the converter's seconds (-v's phase)
		conv=$(awk '/^dpc: import: the ONNX converter/ { printf "%.2f", $(NF - 1) / 1000 }' "$out/err")
		least=$(field "$out/s.json" "d['peak_device_bytes']['total']") rec=$(frac)
		mine=$(cut "$least") fw=$full ww=$weights
		# a budget one point past their cut
		past=$(python3 -c "print(int($weights + (1 - ($(theirs "$net") + 1) / 100) * ($full - $weights)))")
		fit=-
		/usr/bin/time -f '%e' -o "$out/time" "$DPC" --target cpu "$ex/$net.onnx" --device-mem "$past" --stream none \
			--emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null 2>&1 || true
		fit_s=$(tail -1 "$out/time")
		[ -s "$out/s.json" ] && [ "$(field "$out/s.json" "d['peak_device_bytes']['total'] <= $past")" = True ] && fit=$(frac)
		rm -f "$out/s.json"
		# the same budget on the flat import (--no-loops: one straight line, which the chain planner may nest)
		flat=- search=-
		/usr/bin/time -f '%e' -o "$out/time" "$DPC" --target cpu "$ex/$net.onnx" --no-loops --device-mem "$past" \
			--stream none --emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null 2>&1 || true
		flat_s=$(tail -1 "$out/time")
		if [ -s "$out/s.json" ] && [ "$(field "$out/s.json" "d['peak_device_bytes']['total'] <= $past")" = True ]; then
			flat=$(frac) search=$(field "$out/s.json" "d['straight_line']['search']")
		fi
		rm -f "$out/s.json"
		network "$net"
		"$DPC" --target cpu "$f" --checkpoint min-memory --stream none --emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null
		hand=$(cut "$(field "$out/s.json" "d['peak_device_bytes']['total']")")
		printf '%-12s %6s %5s %12.1f %12.1f %6s %9s %5s%% %9s %9s %7s %10s %8s %10s %8s %6s\n' "$net" "$(batch "$net")" "$(side "$net")" \
			"$(python3 -c "print($fw / 1e6)")" "$(python3 -c "print(($fw - $ww) / 1e6)")" "$mine" "$rec" "$(theirs "$net")" "$hand" "$t" \
			"${conv:--}" "$fit" "$fit_s" "$flat" "$flat_s" "$search"
	done
	exit 0
fi

if [ "${1:-}" = chainleast ]; then
	shift
	nets=("$@")
	[ ${#nets[@]} = 0 ] && nets=(resnet152 densenet121 densenet201 inception_v3)
	# issue 62, item 3: what min-memory recomputes at the least against what the chain planner needs. The flat
	# import (--no-loops) at its least, then the lowest budget between there and Feng & Huang's cut + 1 at which
	# the chain planner plans (DPC_SELECT_CHAIN=1: its plan taken wherever it fits; bisected, 8 plans): its
	# peak, points of the activation bytes above the least, and what it recomputes ("-": no chain plan at the
	# cut + 1 either)
	printf '%-12s %10s %9s %10s %8s %9s\n' network least_MB rec@least chain_MB +points rec@chain
	for net in "${nets[@]}"; do
		[ -f "$ex/$net.onnx" ] || export "$net"
		"$DPC" --target cpu "$ex/$net.onnx" --no-loops --emit=dp -o "$out/$net.flat.dp" >/dev/null
		f="$out/$net.flat.dp"
		"$DPC" --target cpu "$f" --checkpoint none --emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null
		full=$(field "$out/s.json" "d['peak_device_bytes']['total']")
		weights=$(field "$out/s.json" "d['peak_device_bytes']['params'] + d['peak_device_bytes']['grads'] + d['peak_device_bytes']['optimizer']")
		"$DPC" --target cpu "$f" --checkpoint min-memory --stream none --emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null
		least=$(field "$out/s.json" "d['peak_device_bytes']['total']") rec=$(frac)
		past=$(python3 -c "print(int($weights + (1 - ($(theirs "$net") + 1) / 100) * ($full - $weights)))")
		# chained BUDGET: the plan at BUDGET fits and is the chain planner's; its peak and fraction in $cpeak, $crec
		chained() {
			DPC_SELECT_CHAIN=1 plan "$f" "$1" && [ "$(field "$out/s.json" "d['straight_line']['search']")" = chain ] &&
				cpeak=$(field "$out/s.json" "d['peak_device_bytes']['total']") && crec=$(frac)
		}
		lo=$least hi=$past best=- brec=- above=-
		if chained "$hi"; then
			best=$cpeak brec=$crec
			for _ in 1 2 3 4 5 6 7 8; do
				mid=$(((lo + hi) / 2))
				if chained "$mid"; then hi=$mid best=$cpeak brec=$crec; else lo=$mid; fi
			done
			above=$(python3 -c "print('%.2f' % (100 * ($best - $least) / ($full - $weights)))")
			best=$(python3 -c "print('%.1f' % ($best / 1e6))")
		fi
		printf '%-12s %10.1f %9s %10s %8s %9s\n' "$net" "$(python3 -c "print($least / 1e6)")" "$rec" "$best" "$above" "$brec"
	done
	exit 0
fi

if [ "${1:-}" = codegen ]; then
	shift
	nets=("$@")
	[ ${#nets[@]} = 0 ] && nets=(resnet152 densenet121 densenet201 inception_v3)
	# the whole compile of torchvision's export (from its .dp, store-everything) to an executable, on each
	# target, on one thread and on all (--threads): the seconds, and of them code generation's (the kernels'
	# IR, LLVM's optimizer and code generator over the host module and the kernels' units), from -v
	printf '%-12s %6s %8s %6s %10s %10s %10s %10s %7s\n' network target kernels units "1 thread s" codegen_s \
		"$(nproc) threads s" codegen_s same
	for net in "${nets[@]}"; do
		[ -f "$ex/$net.onnx" ] || export "$net"
		"$DPC" --target cpu "$ex/$net.onnx" --no-loops --emit=dp -o "$out/$net.dp" >/dev/null
		for target in cuda cpu; do
			row=()
			for t in 1 "$(nproc)"; do
				/usr/bin/time -f '%e' -o "$out/time" "$DPC" --target $target --threads "$t" -v "$out/$net.dp" \
					-o "$out/$net.$target.$t" 2>"$out/v.log" >/dev/null
				cg=$(awk '/^dpc: (codegen: [0-9]|LLVM optimizer)/ { s += $(NF - 1) } END { printf "%.2f", s / 1000 }' "$out/v.log")
				row+=("$(tail -1 "$out/time")" "$cg")
			done
			k=$(sed -n 's/^dpc: codegen: \([0-9]*\) kernels .* in \([0-9]*\) unit.*/\1 \2/p' "$out/v.log")
			same=no
			cmp -s "$out/$net.$target.1" "$out/$net.$target.$(nproc)" && same=yes
			printf '%-12s %6s %8s %6s %10s %10s %10s %10s %7s\n' "$net" $target $k "${row[@]}" $same
		done
	done
	exit 0
fi

if [ "${1:-}" = phases ]; then
	shift
	nets=("$@")
	[ ${#nets[@]} = 0 ] && nets=(resnet152 densenet121 densenet201 inception_v3 nasnet darts)
	for net in "${nets[@]}"; do
		case $net in
		*.dp | *.onnx) f=$net ;;
		*) network "$net" ;;
		esac
		"$DPC" --target cpu "$f" --checkpoint none --stream none --emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null
		full=$(field "$out/s.json" "d['peak_device_bytes']['total']")
		for how in least half; do
			case $how in least) args=(--checkpoint min-memory) ;; half) args=(--device-mem $((full / 2))) ;; esac
			/usr/bin/time -f '%e' -o "$out/time" env DPC_SELECT_TRACE=1 "$DPC" --target cpu "$f" "${args[@]}" --stream none \
				--emit=schedule -o /dev/null 2>"$out/trace" >/dev/null || true
			t=$(tail -1 "$out/time")
			python3 - "$(basename "$net") $how, $t s in all" "$out/trace" <<'PY'
import re, sys
title, path = sys.argv[1], sys.argv[2]
line = re.compile(r"select: (\w+): (.+?)\s+([0-9.]+) s\s+(-?\d+) bytes\s+(-?\d+) flops")
phases, order, prev = {}, [], None
for text in open(path):
    m = line.match(text)
    if not m:
        continue
    kind, phase, sec, b, f = m.group(1), m.group(2), float(m.group(3)), int(m.group(4)), int(m.group(5))
    if phase == "begin":
        # the time since the last search ended: lowering, AD, the loops' rows and snapshots, planning
        outside = phases.setdefault("(outside the searches)", [0, 0.0, 0, 0, 0])
        outside[0] += 1
        outside[1] += sec
        prev = None
        continue
    key = kind + ": " + phase
    if key not in phases:
        phases[key] = [0, 0.0, 0, 0, 0]
        order.append(key)
    p = phases[key]
    p[0] += 1
    p[1] += sec
    if prev is not None:
        # the least search lowers bytes (or, at the same bytes, FLOPs); a fit lowers FLOPs within the budget
        gain = prev[0] - b if kind == "least" else 0
        fewer = prev[1] - f if kind == "fit" or b == prev[0] else 0
        if gain > 0 or (gain == 0 and fewer > 0):
            p[2] += 1
            p[3] += max(gain, 0)
            p[4] += max(fewer, 0)
    prev = (b, f)
print("%s (%d searches)" % (title, sum(1 for t in open(path) if "begin" in t)))
print("  %-26s %5s %9s %7s %14s %18s" % ("phase", "runs", "seconds", "helped", "bytes lowered", "FLOPs lowered"))
for key in order + ["(outside the searches)"]:
    if key not in phases:
        continue
    n, sec, helped, gain, fewer = phases[key]
    if key.startswith("("):
        print("  %-26s %5d %9.2f" % (key, n, sec))
        continue
    print("  %-26s %5d %9.2f %7d %14d %18d" % (key, n, sec, helped, gain, fewer))
PY
		done
	done
	exit 0
fi

if [ "${1:-}" = scale ]; then
	# compile time and memory against the graph's size: ResNet-50, -101, -152 and ResNet-152 at twice and four
	# times its depth, DenseNet-121 (and at twice and four times its depth) and -201, at batch 16, 224x224, NASNet
	# and DARTS at their sizes; each planned at half its store-everything peak, and with --checkpoint min-memory
	printf '%-13s %9s %11s %10s %8s %8s %9s %9s\n' network fwd_ops candidates rec@50 compile_s rss_MB least_s rss_MB
	for net in resnet50 resnet101 resnet152 resnet152x2 resnet152x4 densenet121 densenet121x2 densenet121x4 densenet201 \
		nasnet darts; do
		f="$out/$net.dp"
		case $net in
		nasnet | darts) python3 bench/graphs.py "$net" "$(batch $net)" "$(side $net)" >"$f" ;;
		*) python3 bench/graphs.py "$net" 16 224 >"$f" ;;
		esac
		"$DPC" --target cpu "$f" --emit=schedule -o /dev/null --schedule-json "$out/s.json" >/dev/null
		full=$(field "$out/s.json" "d['peak_device_bytes']['total']")
		ops=$("$DPC" --target cpu "$f" --emit=ir | grep -c ' = ')
		t=$( { /usr/bin/time -f '%e %M' "$DPC" --target cpu "$f" --device-mem $((full / 2)) --stream none --emit=schedule \
			-o /dev/null --schedule-json "$out/s.json" >/dev/null; } 2>&1 | tail -1)
		l=$( { /usr/bin/time -f '%e %M' "$DPC" --target cpu "$f" --checkpoint min-memory --stream none --emit=schedule \
			-o /dev/null >/dev/null; } 2>&1 | tail -1)
		printf '%-13s %9s %11s %10s %8s %8.0f %9s %9.0f\n' "$net" "$ops" "$(field "$out/s.json" "d['straight_line']['candidates']")" \
			"$(frac)" "${t% *}" "$(python3 -c "print(${t#* } / 1024)")" "${l% *}" "$(python3 -c "print(${l#* } / 1024)")"
	done
	exit 0
fi

printf '%-12s %5s %10s %10s %10s %6s %6s %8s %9s %7s %7s %7s %7s %8s %8s\n' network batch peak_MB act_MB least_MB cut theirs rec@least \
	rec@theirs rec@90 rec@75 rec@50 rec@25 compile_s rss_MB
for net in "${nets[@]}"; do
	network "$net"
	t=$( { /usr/bin/time -f '%e %M' "$DPC" --target cpu "$f" --checkpoint min-memory --stream none --emit=schedule -o /dev/null \
		--schedule-json "$out/s.json" >/dev/null; } 2>&1 | tail -1)
	least=$(field "$out/s.json" "d['peak_device_bytes']['total']")
	rec_least=$(frac)
	# at their cut: the weights and (1 - their cut) of the activation bytes
	at_theirs=-
	if plan "$f" $(python3 -c "print(int($weights + (1 - $(theirs "$net") / 100) * ($full - $weights)))"); then at_theirs=$(frac); fi
	curve=()
	for pc in 90 75 50 25; do
		if plan "$f" $((full * pc / 100)); then curve+=("$(frac)"); else curve+=(-); fi
	done
	cut=$(cut $least)
	printf '%-12s %5s %10.1f %10.1f %10.1f %6s %5s%% %8s %9s %7s %7s %7s %7s %8s %8.0f\n' "$net" "$(batch "$net")" \
		"$(python3 -c "print($full / 1e6)")" "$(python3 -c "print(($full - $weights) / 1e6)")" \
		"$(python3 -c "print($least / 1e6)")" "$cut" "$(theirs "$net")" "$rec_least" "$at_theirs" "${curve[@]}" "${t% *}" \
		"$(python3 -c "print(${t#* } / 1024)")"
done
