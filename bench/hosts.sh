#!/usr/bin/env bash
# Data parallelism across two hosts on this machine (docs/distributed.md, "Across machines"): two
# network namespaces joined by a veth pair (tests/hosts/net.sh), Open MPI over TCP between them.
#   bash bench/hosts.sh     as root: resmlp (H = 512, L = 16, 17 MiB of gradients, B = 64 a rank,
#                           one thread a rank, unbound: each namespace would bind its rank to
#                           core 0, the same core) as 2 ranks on one host and as 2 ranks on two hosts:
#                           the step times and their ratio, the time a step waited for the sums;
#                           then the link cut mid-run at a deadline of T s (T=10 by default):
#                           the seconds from the cut to mpirun's end and to both hosts being empty,
#                           against the deadline (the watcher adds at most 5 s, then its signal)
set -u
cd "$(dirname "$0")/.."
export TEST_OUT="${TEST_OUT:-/tmp/dpc_hosts_bench}"
mkdir -p "$TEST_OUT"
. tests/hosts/net.sh
if ! hosts_up; then
	echo "bench/hosts.sh: two hosts cannot be made here: $hosts_why" >&2
	exit 1
fi
trap hosts_down EXIT
steps=${STEPS:-40}
T=${T:-10}
exe=$TEST_OUT/dp
bin/dpc --target cpu -D H=512 -D L=16 samples/resmlp.dp -o $exe >/dev/null || exit 1
echo "$(date -u +%F) $(uname -m), $(nproc) cores; $exe, $steps steps; 2 ranks, one thread each"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mpi_hosts -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS --bind-to none -np 2 -H $NET.1,$NET.1 $exe --steps $steps --lr 0.001 --quiet \
	--summary-json $TEST_OUT/one_host.json >/dev/null || exit 1
mpi_hosts -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS --bind-to none -np 2 -H $NET.1,$NET.2 $exe --steps $steps --lr 0.001 --quiet \
	--summary-json $TEST_OUT/two_hosts.json >/dev/null || exit 1
python3 - "$TEST_OUT" <<'PY'
import json, sys
d = sys.argv[1]
runs = {n: json.load(open(f"{d}/{n}.json")) for n in ("one_host", "two_hosts")}
for n, j in runs.items():
    print(f"{n:9s}: {j['ms_per_step']:8.3f} ms/step, waited {1000 * j['allreduce_wait_s'] / j['steps']:.3f} ms a step "
          f"for the sums ({j['allreduce_bytes'] / j['steps'] / 2**20:.1f} MiB a step over TCP)")
print(f"two hosts / one host: {runs['two_hosts']['ms_per_step'] / runs['one_host']['ms_per_step']:.2f}")
PY
# the link cut mid-run
mpi_hosts -np 2 -H $NET.1,$NET.2 $exe --steps 100000000 --lr 0.001 --log-every 100000000 --collective-timeout $T \
	>$TEST_OUT/cut.log 2>&1 &
job=$!
sleep 5
start=$(date +%s.%N)
cut
wait $job
rc=$?
ended=$(python3 -c "print($(date +%s.%N) - $start)")
drain 30 >/dev/null
empty=$(python3 -c "print($(date +%s.%N) - $start)")
python3 -c "print(f'link cut at a deadline of $T s: mpirun ended after {$ended:.1f} s (status $rc; deadline + {$ended - $T:.1f} s), '
      f'both hosts empty after {$empty:.1f} s (deadline + {$empty - $T:.1f} s)')"
grep "error:" $TEST_OUT/cut.log
