#!/usr/bin/env bash
# Memory against time: the residual MLP of bench/resmlp_big.dp (or MODEL)
# under --checkpoint auto for a sweep of --device-mem budgets, and under
# store-everything (none). Per budget: the snapshots and tape rows it buys
# (of the first loop), the ops its adjoint computes again instead of keeping
# (in the loops' rows and in straight-line code), the predicted and measured
# peak device bytes, the predicted and measured recomputed FLOPs (as a
# fraction of one forward; the measured ones count what the run computed
# again), and ms per step. For the MLP, PyTorch's checkpoint_sequential at
# sqrt(L) and other segment counts follows, with its peak memory on the GPU.
#
#   bash bench/tradeoff.sh          here: compiles for the CPU and runs (small sizes)
#   bash bench/tradeoff.sh build    here: compiles CUDA executables into gpu_build/tradeoff
#   bash bench/tradeoff.sh run      on the GPU machine: runs those, and PyTorch beside them
#
# Sizes: L, H (H = B = D) and STEPS from the environment; defaults L=256 H=128
# on the CPU, L=1024 H=1024 on the GPU (bench/ckpt.sh's model). Another
# model: MODEL=samples/gpt.dp (its own sizes, or DEFINES="-D L=12 ...");
# no PyTorch run beside it.
set -u
cd "$(dirname "$0")/.."
# on the GPU machine: gpu_build/'s packed folders (tests/gpu/unpack.sh)
[ -f gpu_build/dirs.tar.xz ] && { bash tests/gpu/unpack.sh || exit 1; }
mode=${1:-cpu}
case $mode in
cpu) L=${L:-256} H=${H:-128} target=cpu dir=${TMPDIR:-/tmp}/dpc_tradeoff ;;
build | run) L=${L:-1024} H=${H:-1024} target=cuda dir=gpu_build/tradeoff ;;
*)
	echo "usage: bash bench/tradeoff.sh [build|run]" >&2
	exit 2
	;;
esac
steps=${STEPS:-5}
model=${MODEL:-bench/resmlp_big.dp}
sizes="-D L=$L -D H=$H -D B=$H -D D=$H"
[ "$model" = bench/resmlp_big.dp ] || sizes=${DEFINES:-}
json() { python3 -c "import json,sys; d = json.load(open(sys.argv[1])); [d := d[k] for k in sys.argv[2:]]; print(d)" "$@"; }

if [ "$mode" != run ]; then
	mkdir -p "$dir"
	rm -f "$dir"/*
	# store-everything's peak, and the least plan: recomputation with 2 snapshots a loop
	bin/dpc --target $target $sizes "$model" --schedule-json "$dir/none.plan" -o "$dir/none" || exit 1
	bin/dpc --target $target $sizes --checkpoint binomial --snapshots 2 --stream none "$model" \
		--schedule-json "$dir/least.plan" -o "$dir/least" || exit 1
	full=$(json "$dir/none.plan" peak_device_bytes total) least=$(json "$dir/least.plan" peak_device_bytes total)
	# six budgets from store-everything's peak down to the least, evenly spaced
	budgets=$(python3 -c "print(' '.join(str($least + ($full - $least) * k // 5) for k in range(5, -1, -1)))")
	for b in $budgets; do
		bin/dpc --target $target $sizes --checkpoint auto --stream none --device-mem "$b" "$model" \
			--schedule-json "$dir/auto_$b.plan" -o "$dir/auto_$b" >"$dir/auto_$b.log" 2>&1 || echo "refused" >"$dir/auto_$b.refused"
	done
	echo "$budgets" >"$dir/budgets"
	echo "$L $H $model" >"$dir/sizes"
	[ "$mode" = build ] && exit 0
fi

read -r L H model <"$dir/sizes"
budgets=$(cat "$dir/budgets")
[ "$target" = cuda ] && nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /'
if [ "$model" = bench/resmlp_big.dp ]; then
	echo "residual MLP L=$L H=B=D=$H, $steps steps, on $target ($(date -u +%Y-%m-%d))"
else
	echo "$model $sizes, $steps steps, on $target ($(date -u +%Y-%m-%d))"
fi
printf "%-22s %6s %6s %6s %14s %14s %10s %10s %10s\n" schedule s k again "predicted B" "measured B" "pred. FLOPs" "meas. FLOPs" ms/step
row() { # NAME EXE PLAN
	local name=$1 exe=$2 plan=$3
	"$exe" --steps "$steps" --lr 1e-4 --quiet --summary-json "$exe.json" >/dev/null || { echo "$name: failed"; return; }
	python3 - "$name" "$plan" "$exe.json" <<'PY'
import json, sys
name, plan, run = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
loop = plan["loops"][0] if plan["loops"] and plan["loops"][0]["schedule"] != "store-everything" else {}
s, k = loop.get("s", "-"), loop.get("tape_rows") or "-"  # k: the steps a taped action tapes, - when it recomputes one
again = len(plan["straight_line"]["recomputed"]) + sum(len(l.get("row_recomputed", [])) for l in plan["loops"])
print(f"{name:<22} {s!s:>6} {k!s:>6} {again:>6} {plan['peak_device_bytes']['total']:>14} {run['peak_device_bytes']:>14} "
      f"{plan['recomputed_fraction']:>10.3f} {run['recomputed_fraction']:>10.3f} {run['ms_per_step']:>10.2f}")
PY
}
row none "$dir/none" "$dir/none.plan"
for b in $budgets; do
	if [ -f "$dir/auto_$b.refused" ]; then
		echo "auto --device-mem $b: refused at compile time ($(tail -1 "$dir/auto_$b.log"))"
		continue
	fi
	row "auto $b" "$dir/auto_$b" "$dir/auto_$b.plan"
done
# PyTorch: plain, and checkpoint_sequential at sqrt(L) segments and a few others
[ "$model" = bench/resmlp_big.dp ] || exit 0
dev=cpu
[ "$target" = cuda ] && dev=cuda
py=python3
[ -x /usr/bin/python3 ] && [ "$target" = cpu ] && py=/usr/bin/python3
sq=$(python3 -c "import math; print(round(math.sqrt($L)))")
for k in 0 $((sq / 4)) $sq $((sq * 4)); do
	$py bench/resmlp_torch.py --device $dev -L "$L" -H "$H" -B "$H" -D "$H" --steps "$steps" --warmup 1 \
		--checkpoint-segments "$k" 2>&1 | tail -1
done
