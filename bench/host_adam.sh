#!/usr/bin/env bash
# The host update against DeepSpeed's CPU Adam (issue 60, item 5), one run:
# dpc's (runtime/host_step.c, as the executables link it: -O3, no FMA
# contraction, the CPU's widest vectors) and DeepSpeedCPUAdam's AdamW step
# on the same N f32 parameters and gradients, in parameters a second at 1
# and 2 threads, their ratio, dpc's bf16-mixed step beside (f32 master copy
# and moments, bf16 gradient, the bf16 copy written), and the memory
# bandwidth an in-place update reaches at the same threads. Needs a venv with
# torch and deepspeed (python3 -m venv V && V/bin/pip install torch deepspeed;
# DeepSpeed builds its CPU Adam at the first step, about 4 minutes):
#   bash bench/host_adam.sh V/bin/python [N]      (N default 2^25)
set -eu
cd "$(dirname "$0")/.."
py=${1:?usage: bench/host_adam.sh PYTHON_WITH_DEEPSPEED [N]}
n=${2:-33554432}
exe=$(mktemp)
trap 'rm -f "$exe"' EXIT
cc -std=c11 -D_GNU_SOURCE -O3 -ffp-contract=off -fno-math-errno -pthread bench/host_adam.c runtime/host_step.c -lm -o "$exe"
echo "## the host update against DeepSpeed's CPU Adam — $(date -u +%Y-%m-%d), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
echo
echo "AdamW over $n f32 parameters (f32 gradients), the best of 5 steps; G parameters a second"
echo
echo "| threads | dpc | DeepSpeed | dpc / DeepSpeed | dpc bf16-mixed | dpc's bytes a second | the streams alone |"
echo "|---|---|---|---|---|---|---|"
for t in 1 2; do
	read -r _ _ d db bw <<<"$("$exe" "$n" "$t" f32)"
	read -r _ _ dm _ _ <<<"$("$exe" "$n" "$t" mixed)"
	read -r _ _ ds <<<"$("$py" bench/host_adam_ds.py "$n" "$t" 2>/dev/null | tail -1)"
	python3 -c "import sys; d, ds, dm, db, bw = map(float, sys.argv[2:]); print(f'| {sys.argv[1]} | {d / 1e9:.3f} | {ds / 1e9:.3f} | {d / ds:.2f} | {dm / 1e9:.3f} | {db / 1e9:.1f} GB/s | {bw / 1e9:.1f} GB/s |')" \
		"$t" "$d" "$ds" "$dm" "$db" "$bw"
done
