#!/usr/bin/env bash
# Data parallelism's cost (docs/distributed.md).
#   bash bench/dp.sh        here, on the CPU: a wider resmlp (H = 512, L = 16,
#                           B = 64 a rank; 17 MiB of gradients) at 1 rank
#                           alone, 1 rank under mpirun and 2 ranks, each
#                           rank's threads pinned to one core; prints the
#                           step times, the ratio 2 ranks / 1 rank (weak
#                           scaling: each rank does the same work, 1.0 is
#                           perfect), and the time a step waited for the
#                           gradients' sums that the adjoint did not hide
#   bash bench/dp.sh gpu    on the GPU machine, after `bash tests/gpu/run.sh
#                           build` here (carry gpu_build/): the same model
#                           on one GPU alone and as one rank under mpirun
#                           (the NCCL path at world size 1)
set -u
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
steps=${STEPS:-40}
flags="-D H=512 -D L=16"
case "${1:-cpu}" in
gpu)
	exe=gpu_build/dp.cuda
	;;
*)
	exe=/tmp/dpc_dp_bench
	bin/dpc --target cpu $flags samples/resmlp.dp -o $exe || exit 1
	;;
esac
echo "$(date -u +%F) $(uname -m), $(nproc) cores; $exe, $steps steps"
run() { # NAME LAUNCH...
	local name=$1
	shift
	"$@" $exe --steps $steps --lr 0.001 --quiet --summary-json /tmp/dpc_dp_$name.json >/dev/null || exit 1
}
# each rank one thread: 2 ranks on 2 cores against 1 rank on 1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
run alone
run one mpirun -np 1 --bind-to core
[ "${1:-cpu}" = gpu ] || run two mpirun -np 2 --bind-to core
python3 - "${1:-cpu}" <<'PY'
import json, sys
runs = {n: json.load(open(f"/tmp/dpc_dp_{n}.json")) for n in (["alone", "one"] + (["two"] if sys.argv[1] != "gpu" else []))}
for n, j in runs.items():
    wait = 1000 * j["allreduce_wait_s"] / j["steps"]
    print(f"{n:6s} ranks {j['ranks']}: {j['ms_per_step']:8.3f} ms/step, summed {j['allreduce_bytes'] / j['steps'] / 2**20:.1f} "
          f"MiB a step, waited {wait:.3f} ms a step for the sums")
    assert j["allreduce_bytes"] == j["predicted_allreduce_bytes"]
if "two" in runs:
    a, b = runs["alone"], runs["two"]
    print(f"2 ranks / 1 rank, same work a rank: {b['ms_per_step'] / a['ms_per_step']:.2f} (1.0: perfect); "
          f"not hidden: {1000 * b['allreduce_wait_s'] / b['steps']:.3f} ms a step "
          f"({100 * b['allreduce_wait_s'] / b['wall_s']:.1f}% of the training time)")
PY
