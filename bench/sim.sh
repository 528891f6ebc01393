#!/usr/bin/env bash
# A launch-bound simulation: samples/oscillator.dp (32 damped oscillators, a
# body of eight elementwise ops) at T = 10^4 and 10^6 steps under binomial
# checkpointing, per training step: time, recomputed steps, and device calls
# (kernel launches, GEMMs and device copies), beside PyTorch eager (a Python
# loop, torch.utils.checkpoint per segment of sqrt(T) steps;
# bench/sim_torch.py) and, on the GPU machine, JAX (lax.scan with
# jax.checkpoint per segment; bench/sim_jax.py). dpc's rows: fused (the
# default: the forward loop and the revolve's schedule each one kernel),
# unfused (--no-fuse: a launch per op and step), and on the GPU fused with
# --graph (the step captured once as a CUDA graph and replayed).
#
#   bash bench/sim.sh          here: compiles for the CPU and runs; PyTorch on the CPU at
#                              T = 10^4 only (10^6 takes minutes a step: TORCH_1E6=1)
#   bash bench/sim.sh build    here: compiles CUDA executables into gpu_build/sim
#   bash bench/sim.sh run      on the GPU machine: runs those, PyTorch and JAX beside them
set -u
cd "$(dirname "$0")/.."
# on the GPU machine: gpu_build/'s packed folders (tests/gpu/unpack.sh)
[ -f gpu_build/dirs.tar.xz ] && { bash tests/gpu/unpack.sh || exit 1; }
mode=${1:-cpu}
case $mode in
cpu) target=cpu dir=${TMPDIR:-/tmp}/dpc_sim dev=cpu ;;
build | run) target=cuda dir=gpu_build/sim dev=cuda ;;
*)
	echo "usage: bash bench/sim.sh [build|run]" >&2
	exit 2
	;;
esac
steps=${STEPS:-2}
sizes="10000 1000000"
if [ "$mode" != run ]; then
	mkdir -p "$dir"
	rm -f "$dir"/*
	for T in $sizes; do
		bin/dpc --target $target -D T=$T --checkpoint binomial samples/oscillator.dp -o "$dir/osc_$T" || exit 1
		bin/dpc --target $target -D T=$T --checkpoint binomial --no-fuse samples/oscillator.dp -o "$dir/osc_${T}_nf" || exit 1
	done
	[ "$mode" = build ] && exit 0
fi

[ "$target" = cuda ] && nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /'
echo "oscillator B=32, binomial checkpointing (sqrt(T) + 1 snapshots), $steps steps, on $target ($(date -u +%Y-%m-%d))"
py=python3
[ -x /usr/bin/python3 ] && [ "$target" = cpu ] && py=/usr/bin/python3
# dpc RUN LABEL EXE ARGS...: one variant's line
dpc() {
	local T=$1 label=$2 exe=$3
	shift 3
	"$exe" --quiet --summary-json "$exe.json" "$@" >/dev/null || { echo "dpc T=$T $label: failed"; return; }
	python3 - "$T" "$label" "$exe.json" <<'PY'
import json, sys
T, label, j = int(sys.argv[1]), sys.argv[2], json.load(open(sys.argv[3]))
n = j["steps"]
calls = (j["kernel_launches"] + j["gemm_calls"] + j["copy_calls"]) / n
# ms_per_step leaves out step 1; with one step it is that step
print(f"dpc T={T} {label}: {j['ms_per_step']:.3f} ms/step, {calls:.0f} device calls a step "
      f"({j['kernel_launches'] / n:.0f} kernels, {j['copy_calls'] / n:.0f} copies), "
      f"{j['recomputed_steps'] / n:.0f} recomputed steps")
PY
}
for T in $sizes; do
	dpc "$T" fused "$dir/osc_$T" --steps "$steps"
	[ "$target" = cuda ] && dpc "$T" "fused, --graph" "$dir/osc_$T" --steps "$steps" --graph
	# unfused at 10^6: one step (millions of launches)
	dpc "$T" unfused "$dir/osc_${T}_nf" --steps $([ "$T" -ge 1000000 ] && echo 1 || echo "$steps")
	if [ "$target" = cuda ] || [ "$T" -lt 1000000 ] || [ "${TORCH_1E6:-0}" = 1 ]; then
		$py bench/sim_torch.py -T "$T" --device $dev --steps 1 2>&1 | tail -1
	fi
	if [ "$target" = cuda ]; then
		python3 bench/sim_jax.py -T "$T" --steps 3 2>&1 | tail -1
	fi
done
