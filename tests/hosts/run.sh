#!/usr/bin/env bash
# Data parallelism across two hosts (issue 63): two network namespaces joined by a veth pair stand for
# two machines (tests/hosts/net.sh), mpirun on host a starts the rank on host b through an rsh agent as
# ssh would, and the ranks talk over TCP. Checked:
#   - 2 hosts of batch B train as one process of 2B (f64, within 1e-12), the ranks' files identical, and
#     the sharded Adam bitwise the unsharded;
#   - a build that differs between the hosts is named at start, field and values;
#   - the link cut mid-run: each rank that can print names the step, the collective and the rank it
#     waited for, the job ends within the deadline and a few seconds, non-zero, nothing left running
#     on either host, and the state saved before the cut resumes, on the same hosts or on one,
#     byte-identical to the run that never failed;
#   - a rank killed on host b ends the job; a host that cannot be reached ends mpirun, naming it.
# Where the machine cannot make namespaces (not root, no iproute2), the part says why and skips.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/hosts"
mkdir -p "$o"
. tests/hosts/net.sh
if ! hosts_up; then
	echo "# two hosts in network namespaces cannot be made here ($hosts_why): skipped"
	echo "$npass passed, $nfail failed, 1 skipped"
	exit 0
fi
trap hosts_down EXIT
# the ranks run without the leak check under make test-sanitize, as in tests/dist (Open MPI's own)
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
A=$NET.1 B=$NET.2
python3 tests/dist/data.py "$o" 512
data="--data $o/x.npy --labels $o/y.npy"
l="$o/build.log"
if ! "$DPC" --target cpu --precision f64 samples/resmlp.dp -o "$o/f64" >"$l" 2>&1 ||
	! "$DPC" --target cpu --precision f64 -D B=128 samples/resmlp.dp -o "$o/f64.2b" >>"$l" 2>&1 ||
	! "$DPC" --target cpu --precision f64 -D H=64 samples/resmlp.dp -o "$o/h64" >>"$l" 2>&1 ||
	! "$DPC" --target cpu --precision f64 --optimizer adam samples/resmlp.dp -o "$o/adam" >>"$l" 2>&1 ||
	! "$DPC" --target cpu --precision f64 --optimizer adam --ranks 2 samples/resmlp.dp -o "$o/zero" >>"$l" 2>&1; then
	notok "hosts: compile" "$l"
	finish
	exit 1
fi
two() { mpi_hosts -np 2 -H $A,$B "$@"; }

# the same sums across hosts as on one
l="$o/equal.log"
if two "$o/f64" --steps 5 $data --save "$o/f64.%r.st" >"$l" 2>&1 &&
	"$o/f64.2b" --steps 5 $data --save "$o/f64.one.st" --quiet >>"$l" 2>&1; then
	check "hosts/equal: the ranks on hosta and hostb save the same bytes" cmp "$o/f64.0.st" "$o/f64.1.st"
	check "hosts/equal: 2 hosts of B as one process of 2B, within 1e-12" python3 tests/dist/compare.py "$o/f64.0.st" \
		"$o/f64.one.st" 1e-12
	check "hosts/equal: the ranks ran on two hosts" grep -q "2 ranks (mpirun)" "$l"
else
	notok "hosts/equal: run" "$l"
fi
l="$o/zero.log"
if two "$o/zero" --shard-optimizer --steps 5 $data --optimizer adamw --save "$o/zero.%r.st" >"$l" 2>&1 &&
	two "$o/adam" --steps 5 $data --optimizer adamw --save "$o/adam.%r.st" >>"$l" 2>&1; then
	check "hosts/zero: Adam's state sharded across the hosts, bitwise as unsharded" bash -c \
		"cmp '$o/zero.0.st' '$o/zero.1.st' && cmp '$o/zero.0.st' '$o/adam.0.st'"
else
	notok "hosts/zero: run" "$l"
fi

# a build that differs between the hosts: named at start
expect hosts/disagree-define 1 "-D H: 128 on rank 0, 64 on rank 1" mpi_hosts -np 1 -H $A "$o/f64" --steps 2 $data \
	: -np 1 -H $B "$o/h64" --steps 2 $data

# The link cut mid-run. T: the deadline; the job must end within it and the watcher's 5 s and a few more
T=4
l="$o/cut.log"
rm -f "$o/cut.st"
two "$o/f64" --steps 100000000 --log-every 100000000 $data --collective-timeout $T --save-state "$o/cut.st" \
	--save-every 40 >"$l" 2>&1 &
job=$!
for i in $(seq 1 600); do
	[ -f "$o/cut.st" ] && break
	sleep 0.1
done
sleep 0.5
start=$(date +%s.%N)
cut
wait $job
rc=$?
took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
# host b, which hears nothing from host a, ends on its own: its rank at its deadline, then the daemon
# by the rank's watcher (its 5 s, then SIGTERM)
rest=$(drain 20)
empty=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && python3 -c "import sys; sys.exit(not $took <= $T + 10 and $empty <= $T + 15)" &&
	[ -z "$rest" ] && grep -q "rank 0 (hosta) waited $T s in .* at step [0-9]* for rank 1 (hostb: not heard from); the job ends" "$l"; then
	ok "hosts/cut: the link cut, mpirun ended ${took}s after with status $rc and the message, both hosts empty at ${empty}s"
else
	notok "hosts/cut: status $rc after ${took}s; at ${empty}s left running: ${rest:-nothing}" "$l"
fi
mend || notok "hosts: the link came back up"
# the state saved before the cut resumes byte-identically to a run that never failed: on both hosts again,
# and on host a alone (the global batch the same: 2 ranks)
s=$(python3 -c "
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
print(json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])['__metadata__']['step'])" "$o/cut.st" 2>/dev/null)
l="$o/resume.log"
if [ -n "$s" ] && two "$o/f64" --steps $((s + 20)) $data --save "$o/full.st" >"$l" 2>&1 &&
	two "$o/f64" --steps $((s + 20)) $data --resume "$o/cut.st" --save "$o/resumed.st" >>"$l" 2>&1 &&
	mpi_hosts -np 2 -H $A,$A "$o/f64" --steps $((s + 20)) $data --resume "$o/cut.st" --save "$o/resumed1.st" >>"$l" 2>&1; then
	check "hosts/resume: the state of step $s saved before the cut, resumed on the two hosts, ends byte-identical" \
		cmp "$o/full.st" "$o/resumed.st"
	check "hosts/resume: and resumed on one host" cmp "$o/full.st" "$o/resumed1.st"
else
	notok "hosts/resume: state step '$s'" "$l"
fi

# a rank killed on host b: the job ends, non-zero, nothing left
l="$o/kill.log"
two "$o/f64" --steps 100000000 --log-every 100000000 $data >"$l" 2>&1 &
job=$!
victim=""
for i in $(seq 1 100); do
	victim=$(ip netns pids "$NS_B" | xargs -r ps -o pid=,args= -p | awk -v e="$o/f64" '$2 == e { print $1 }')
	[ -n "$victim" ] && break
	sleep 0.1
done
sleep 1
start=$(date +%s)
[ -n "$victim" ] && kill -9 $victim
wait $job
rc=$?
took=$(($(date +%s) - start))
sleep 1
rest=$(left)
if [ -n "$victim" ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -le 30 ] && [ -z "$rest" ]; then
	ok "hosts/kill: the rank on hostb killed, the job ended in ${took}s with status $rc, nothing left"
else
	notok "hosts/kill: victim '$victim', status $rc after ${took}s; left running: ${rest:-nothing}" "$l"
fi

# a host that cannot be reached: mpirun ends, naming it
l="$o/unreachable.log"
start=$(date +%s)
mpi_hosts -np 2 -H $A,$NET.3 "$o/f64" --steps 2 $data >"$l" 2>&1
rc=$?
took=$(($(date +%s) - start))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "$NET.3" "$l" && [ -z "$(left)" ]; then
	ok "hosts/unreachable: a host that cannot be reached named, mpirun ended in ${took}s with status $rc"
else
	notok "hosts/unreachable: status $rc after ${took}s" "$l"
fi
finish
