#!/usr/bin/env bash
# Data parallelism over MPI (docs/distributed.md): 2 ranks under Open MPI's
# mpirun --oversubscribe on this CPU. Each variant trains resmlp (batch B =
# 64 per rank) for 5 steps on the same .npy set, and one process compiled
# with batch 2B trains on it too; the checks:
#   - the ranks' saved parameters are byte-identical to each other;
#   - they equal the single process's within 1e-12 relative in f64, 1e-5 in
#     f32 (only the order of the gradients' sums differs);
#   - the bytes summed across the ranks are those predicted.
# Then the ranks refuse to run on different settings, naming the field, and
# a rank killed with SIGKILL brings the other down within seconds.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/dist"
mkdir -p "$o"
# CI runs as root, which mpirun refuses unless told
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Under make test-sanitize: Open MPI's own allocations outlive MPI_Finalize (its plugins are
# unloaded by then, so LeakSanitizer cannot even name them), so the ranks run without the leak
# check; AddressSanitizer's other checks stay on, and the single-process suites leak-check the
# same runtime
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
mpi() { timeout 300 mpirun --oversubscribe -np 2 "$@"; }
if ! command -v mpirun >/dev/null; then
	notok "dist: mpirun is missing (make deps installs Open MPI)"
	finish
	exit 1
fi
python3 tests/dist/data.py "$o" 512
# the same set but one value's last bit
python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[-1] ^= 1; open(sys.argv[2], 'wb').write(b)" "$o/x.npy" "$o/x2.npy"
data="--data $o/x.npy --labels $o/y.npy"
for v in "f64|--precision f64||1e-12" "f32|||1e-5" "binomial|--precision f64 --checkpoint binomial --snapshots 3||1e-12" \
	"adamw|--precision f64 --optimizer adam|--optimizer adamw --weight-decay 0.1 --lr-schedule cosine --warmup 2|1e-12" \
	"clip-accum|--precision f64 --optimizer adam|--clip-grad 0.5 --accum 2|1e-12" \
	"streamed|--precision f64 --optimizer adam --stream params|--optimizer adamw --weight-decay 0.1|1e-12" \
	"streamed-deferred|--precision f64 --optimizer adam --stream params|--clip-grad 0.5 --accum 2|1e-12"; do
	IFS='|' read -r name flags args tol <<<"$v"
	l="$o/$name.log"
	if ! "$DPC" --target cpu $flags samples/resmlp.dp -o "$o/$name" >"$l" 2>&1 ||
		! "$DPC" --target cpu $flags -D B=128 samples/resmlp.dp -o "$o/$name.2b" >>"$l" 2>&1 ||
		! mpi "$o/$name" --steps 5 $data $args --save "$o/$name.%r.st" --summary-json "$o/$name.%r.json" >>"$l" 2>&1 ||
		! "$o/$name.2b" --steps 5 $data $args --save "$o/$name.one.st" --quiet >>"$l" 2>&1; then
		notok "dist/$name: compile and run" "$l"
		continue
	fi
	check "dist/$name: the 2 ranks' parameters byte-identical" cmp "$o/$name.0.st" "$o/$name.1.st"
	check "dist/$name: 2 ranks of B as one process of 2B, within $tol (norm by norm)" python3 tests/dist/compare.py "$o/$name.0.st" \
		"$o/$name.one.st" "$tol"
	check "dist/$name: the bytes summed across the ranks as predicted" python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j['ranks'] == 2 and j['allreduce_bytes'] == j['predicted_allreduce_bytes'] > 0, j" "$o/$name.0.json"
done
# bf16-mixed across 2 ranks: each rank's f32 sums of its micro-batches' bf16 gradients are summed
# across the ranks (the streamed ones' on the host) before the f32 update; streamed bitwise as
# resident, the ranks' files byte-identical, the bytes summed as predicted
margs="--optimizer adamw --weight-decay 0.1 --clip-grad 0.5 --accum 2"
l="$o/mixed.log"
if "$DPC" --target cpu --precision bf16-mixed --optimizer adam samples/resmlp.dp -o "$o/mixed" >"$l" 2>&1 &&
	"$DPC" --target cpu --precision bf16-mixed --optimizer adam --stream params samples/resmlp.dp -o "$o/mixed-streamed" >>"$l" 2>&1 &&
	mpi "$o/mixed" --steps 5 $data $margs --save "$o/mixed.%r.st" --quiet >>"$l" 2>&1 &&
	mpi "$o/mixed-streamed" --steps 5 $data $margs --save "$o/mixed-streamed.%r.st" --summary-json "$o/mixed-streamed.%r.json" --quiet >>"$l" 2>&1; then
	check "dist/mixed: bf16-mixed, 2 ranks, streamed bitwise as resident, the ranks' files identical" bash -c \
		"cmp '$o/mixed.0.st' '$o/mixed.1.st' && cmp '$o/mixed-streamed.0.st' '$o/mixed-streamed.1.st' && cmp '$o/mixed.0.st' '$o/mixed-streamed.0.st'"
	check "dist/mixed: the f32 sums' bytes summed across the ranks as predicted" python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j['precision'] == 'bf16-mixed' and j['allreduce_bytes'] == j['predicted_allreduce_bytes'] > 0, j" "$o/mixed-streamed.0.json"
	# ZeRO stage 1 under bf16-mixed: each rank updates its share of the f32 master copies and moments, the
	# shares gathered and the bf16 copies made again
	check "dist/mixed: sharded (dpc --ranks 2) bitwise as unsharded" bash -c "mpi() { timeout 300 mpirun --oversubscribe -np 2 \"\$@\"; };
		'$DPC' --target cpu --precision bf16-mixed --optimizer adam --ranks 2 samples/resmlp.dp -o '$o/mixed-zero' &&
		mpi '$o/mixed-zero' --shard-optimizer --steps 5 $data $margs --save '$o/mixed-zero.%r.st' --quiet &&
		cmp '$o/mixed-zero.0.st' '$o/mixed-zero.1.st' && cmp '$o/mixed-zero.0.st' '$o/mixed.0.st'"
else
	notok "dist/mixed: compile and run" "$l"
fi
# ZeRO stage 1: dpc --ranks 2 plans one rank's share of Adam's state; under --shard-optimizer each rank
# updates its share of every resident parameter and the parameters are gathered. Bitwise as the
# unsharded 2 ranks (AdamW, clipped), less device memory, the gathered bytes as predicted; a state
# written and resumed sharded ends as the uninterrupted run
zargs="--optimizer adamw --weight-decay 0.1 --clip-grad 0.5"
l="$o/zero.log"
if "$DPC" --target cpu --precision f64 --optimizer adam --ranks 2 --schedule-json "$o/zero.sched" samples/resmlp.dp \
	-o "$o/zero" >"$l" 2>&1 && "$DPC" --target cpu --precision f64 --optimizer adam --schedule-json "$o/adamw.sched" \
	samples/resmlp.dp -o "$o/adamw.x" >>"$l" 2>&1 &&
	mpi "$o/zero" --shard-optimizer --steps 5 $data $zargs --save "$o/zero.%r.st" --summary-json "$o/zero.json" >>"$l" 2>&1 &&
	mpi "$o/adamw" --steps 5 $data $zargs --save "$o/zref.%r.st" >>"$l" 2>&1; then
	check "dist/zero: sharded parameters byte-identical across the ranks and to the unsharded run's" bash -c \
		"cmp '$o/zero.0.st' '$o/zero.1.st' && cmp '$o/zero.0.st' '$o/zref.0.st'"
	check "dist/zero: half of Adam's state a rank, the peak as planned, gathered bytes as predicted" python3 -c "
import json, sys
z, a, j = (json.load(open(f)) for f in sys.argv[1:4])
assert z['ranks'] == 2 and 2 * z['peak_device_bytes']['optimizer'] <= a['peak_device_bytes']['optimizer'] + 4 * 256, (z, a)
assert j['peak_device_bytes'] == j['predicted_device_bytes'] == z['peak_device_bytes']['total'], j
assert j['allgather_bytes'] == j['predicted_allgather_bytes'] == 5 * z['allgather_bytes_per_step'] > 0, (j, z)
assert j['allreduce_bytes'] == j['predicted_allreduce_bytes'] == 5 * z['allreduce_bytes_per_step'], (j, z)
" "$o/zero.sched" "$o/adamw.sched" "$o/zero.json"
	check "dist/zero: a state saved sharded at step 3, resumed, ends byte-identical" bash -c "mpi() { timeout 300 mpirun --oversubscribe -np 2 \"\$@\"; };
		mpi '$o/zero' --shard-optimizer --steps 3 $data $zargs --save-state '$o/zero.state' --quiet &&
		mpi '$o/zero' --shard-optimizer --steps 5 $data $zargs --resume '$o/zero.state' --save '$o/zero.res.st' --quiet &&
		cmp '$o/zero.res.st' '$o/zero.0.st'"
else
	notok "dist/zero: compile and run" "$l"
fi
expect dist/zero-needs-flag 2 "run it under mpirun with --shard-optimizer" timeout 300 mpirun --oversubscribe -np 2 "$o/zero" --steps 1 $data
expect dist/zero-needs-ranks 2 "compile it with dpc --optimizer adam --ranks N" timeout 300 mpirun --oversubscribe -np 2 "$o/adamw" --steps 1 $data --shard-optimizer
expect dist/zero-other-count 2 "compiled with dpc --ranks 2 and runs as 1 rank" "$o/zero" --steps 1 $data --shard-optimizer
# one rank under mpirun goes through every sum (a world of one): bitwise as the process alone, whether
# mpirun binds the rank to one core (its default for 2 ranks or fewer: one thread) or not (as many as the
# process alone); docs/threads.md
for name in f32 streamed-deferred; do
	args=""
	[ $name = streamed-deferred ] && args="--clip-grad 0.5 --accum 2"
	"$o/$name" --steps 5 $data $args --save "$o/$name.alone.st" --quiet >/dev/null
	for bind in core none; do
		check "dist/$name: one rank under mpirun --bind-to $bind bitwise as alone" bash -c "timeout 300 mpirun --bind-to $bind \
			-np 1 '$o/$name' --steps 5 $data $args --save '$o/$name.world1.$bind.st' --quiet &&
			cmp '$o/$name.world1.$bind.st' '$o/$name.alone.st'"
	done
done
check "dist/f32: a rank bound to a core runs one thread, an unbound one all the process may use" bash -c "
	timeout 300 mpirun --bind-to core -np 1 '$o/f32' --steps 1 $data --summary-json '$o/bound.json' --quiet &&
	timeout 300 mpirun --bind-to none -np 1 '$o/f32' --steps 1 $data --summary-json '$o/unbound.json' --quiet &&
	python3 -c \"import json; assert json.load(open('$o/bound.json'))['threads'] == 1 and json.load(open('$o/unbound.json'))['threads'] == $(nproc)\""
# outputs: rank 0 writes a path without %r, alone
check "dist/outputs: rank 0 alone writes a path without %r" bash -c "mpi() { timeout 300 mpirun --oversubscribe -np 2 \"\$@\"; };
	rm -f '$o/one.st'; mpi '$o/f64' --steps 2 $data --save '$o/one.st' --quiet && test -f '$o/one.st' && ! ls '$o'/one.st.tmp.* 2>/dev/null"
# a state saved by 2 ranks resumes on 1 and on 2 (the global batch then the new ranks' B)
check "dist/resume: a state of 2 ranks resumed on 1 and on 2" bash -c "mpi() { timeout 300 mpirun --oversubscribe -np 2 \"\$@\"; };
	mpi '$o/adamw' --steps 3 $data --optimizer adamw --save-state '$o/st.st' --quiet &&
	'$o/adamw' --steps 5 $data --optimizer adamw --resume '$o/st.st' --quiet --summary-json '$o/r1.json' &&
	mpi '$o/adamw' --steps 5 $data --optimizer adamw --resume '$o/st.st' --quiet --save '$o/r2.%r.st' --summary-json '$o/r2.json' &&
	cmp '$o/r2.0.st' '$o/r2.1.st' && python3 -c \"import json; assert json.load(open('$o/r1.json'))['steps'] == 2 == json.load(open('$o/r2.json'))['steps']\""
# the ranks must agree: another learning rate on rank 1 is refused, naming it
expect dist/disagree 1 "--lr: 0.01 on rank 0, 0.02 on rank 1" timeout 300 mpirun --oversubscribe -np 1 "$o/f64" --steps 2 $data --lr 0.01 : \
	-np 1 "$o/f64" --steps 2 $data --lr 0.02
expect dist/disagree-data 1 "the data of input x: 512 rows, hash" timeout 300 mpirun --oversubscribe -np 1 "$o/f64" --steps 2 \
	$data : -np 1 "$o/f64" --steps 2 --data "$o/x2.npy" --labels "$o/y.npy"
# every difference at start named by its field, with each rank's value (issue 63): the build (-D constants,
# dpc's options), the starting point (--init, --resume's step), saves; an option given on one rank that
# is the other's default builds the same model and runs
"$DPC" --target cpu --precision f64 -D H=64 samples/resmlp.dp -o "$o/h64" >/dev/null 2>&1
"$DPC" --target cpu --precision f64 --checkpoint binomial samples/resmlp.dp -o "$o/f64b" >/dev/null 2>&1
"$DPC" --target cpu --precision f64 --checkpoint none samples/resmlp.dp -o "$o/f64none" >/dev/null 2>&1
two() { timeout 300 mpirun --oversubscribe -np 1 "$@"; }
expect dist/disagree-define 1 "-D H: 128 on rank 0, 64 on rank 1" two "$o/f64" --steps 2 $data : -np 1 "$o/h64" --steps 2 $data
expect dist/disagree-option 1 "dpc --checkpoint: not given on rank 0, binomial on rank 1" two "$o/f64" --steps 2 $data : \
	-np 1 "$o/f64b" --steps 2 $data
expect dist/default-given 0 "2 steps" two "$o/f64" --steps 2 $data : -np 1 "$o/f64none" --steps 2 $data
"$o/f64" --steps 2 $data --save "$o/init2.st" --quiet && "$o/f64" --steps 3 $data --save "$o/init3.st" --quiet
expect dist/disagree-init 1 "the starting point: hash [0-9a-f]* (--init init2.st) on rank 0, hash [0-9a-f]* (--init init3.st) on rank 1" \
	two "$o/f64" --steps 4 $data --init "$o/init2.st" : -np 1 "$o/f64" --steps 4 $data --init "$o/init3.st"
"$o/f64" --steps 3 $data --save-state "$o/s3.st" --quiet && "$o/f64" --steps 2 $data --save-state "$o/s2.st" --quiet
expect dist/disagree-resume 1 "--resume: step 3 on rank 0, step 2 on rank 1" two "$o/f64" --steps 5 $data --resume "$o/s3.st" : \
	-np 1 "$o/f64" --steps 5 $data --resume "$o/s2.st"
expect dist/disagree-resume-one 1 "--resume: step 3 on rank 0, not given on rank 1" two "$o/f64" --steps 5 $data --resume "$o/s3.st" : \
	-np 1 "$o/f64" --steps 5 $data
expect dist/disagree-save 1 "--save-state: given on rank 0, not given on rank 1" two "$o/f64" --steps 2 $data --save-state "$o/s.%r.st" : \
	-np 1 "$o/f64" --steps 2 $data
expect dist/timeout-zero 2 "--collective-timeout needs a number of seconds above 0" "$o/f64" --steps 1 --collective-timeout 0
expect dist/not-mpirun 1 "mpirun did not start it" env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 "$o/f64" --steps 1
# progress under mpirun: each rank's output is a terminal of Open MPI's, but a log is lines at --log-every
l="$o/progress.log"
if mpi "$o/f32" --steps 100 --log-every 50 $data >"$l" 2>&1; then
	check "dist/progress: lines at --log-every under mpirun, no carriage returns or escapes" python3 -c "
import sys
t = open(sys.argv[1], 'rb').read()
assert b'\r' not in t and b'\x1b' not in t, t[:300]
steps = [l for l in t.split(b'\n') if l.startswith(b'step ')]
assert len(steps) == 2 and b'50/100' in steps[0] and b'100/100' in steps[1], steps" "$l"
else
	notok "dist/progress: run" "$l"
fi
# -v: each rank's host, cores and threads; a rank bound to fewer cores than the launcher may use is warned of
l="$o/binding.log"
timeout 300 mpirun --bind-to core -np 1 "$o/f32" --steps 1 $data -v >"$l" 2>&1
if [ "$(nproc)" -gt 1 ]; then
	check "dist/binding: -v names the rank's host and cores; one core of $(nproc) warned of" bash -c "grep -q 'rank 0 on .*, bound to core [0-9]* (1 of its $(nproc), 1 rank there): 1 thread' '$l' &&
		grep -q 'warning: 1 of the 1 ranks run on fewer cores than their host.s share' '$l'"
else
	check "dist/binding: -v names the rank's host and cores; one core of one, no warning" bash -c "grep -q 'rank 0 on .*, bound to core [0-9]* (1 of its 1, 1 rank there)' '$l' && ! grep -q warning '$l'"
fi
# a rank stopped (SIGSTOP): the others wait at most --collective-timeout, then those that can still print name the step,
# the collective and the ranks they waited for (rank 0 may be past the stopped one's collective), and the job ends, non-zero, with no process left
l="$o/stop.log"
start=$(date +%s)
timeout 120 mpirun --oversubscribe -np 3 "$o/f32" --steps 100000000 --log-every 1000000 $data --collective-timeout 3 >"$l" 2>&1 &
job=$!
victim=""
for i in $(seq 1 100); do
	[ "$(pgrep -f "^$o/f32 --steps 100000000" | wc -l)" -ge 3 ] && break
	sleep 0.1
done
sleep 1
for p in $(pgrep -f "^$o/f32 --steps 100000000"); do
	grep -qz '^OMPI_COMM_WORLD_RANK=2$' /proc/$p/environ 2>/dev/null && victim=$p
done
[ -n "$victim" ] && kill -STOP $victim
wait $job
rc=$?
took=$(($(date +%s) - start))
sleep 1
if [ -n "$victim" ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -lt 40 ] && ! pgrep -f "^$o/f32 --steps 100000000" >/dev/null &&
	grep -q "rank [01] ([^)]*) waited 3 s in .* at step [0-9]* for ranks\? \(.*, \)\?2 ([^)]*: not heard from)" "$l"; then
	ok "dist/stopped: a rank stopped, the job ended in ${took}s with status $rc, rank 2 named"
else
	notok "dist/stopped: victim '$victim', status $rc after ${took}s" "$l"
	pkill -9 -f "^$o/f32 --steps 100000000"
fi
# a rank paused below the deadline (SIGSTOP, 3 s, SIGCONT): the other waits, tells it which sum it waits
# in, and the run ends as any other, its notes withdrawn at MPI_Finalize
l="$o/pause.log"
timeout 300 mpirun --oversubscribe -np 2 "$o/f32" --steps 3000 --log-every 3000 $data --collective-timeout 60 --save "$o/pause.st" >"$l" 2>&1 &
job=$!
sleep 2
victim=$(pgrep -f "^$o/f32 --steps 3000 " | tail -1)
[ -n "$victim" ] && kill -STOP $victim && sleep 3 && kill -CONT $victim
wait $job
rc=$?
if [ -n "$victim" ] && [ $rc -eq 0 ] && [ -f "$o/pause.st" ]; then
	ok "dist/pause: a rank paused 3 s below the deadline, the run ended as any other"
else
	notok "dist/pause: victim '$victim', status $rc" "$l"
fi
# a rank killed with SIGKILL: the other does not hang; mpirun ends the job, non-zero, within 60 s
l="$o/kill.log"
start=$(date +%s)
mpi "$o/f32" --steps 100000000 $data --quiet >"$l" 2>&1 &
job=$!
victim=""
for i in $(seq 1 100); do
	victim=$(pgrep -f "^$o/f32 --steps 100000000" | tail -1)
	[ -n "$victim" ] && [ "$(pgrep -f "^$o/f32 --steps 100000000" | wc -l)" -ge 2 ] && break
	sleep 0.1
done
sleep 1
kill -9 $victim 2>/dev/null
wait $job
rc=$?
took=$(($(date +%s) - start))
if [ -n "$victim" ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $took -lt 60 ] && ! pgrep -f "^$o/f32 --steps 100000000" >/dev/null; then
	ok "dist/kill: a rank killed, the job ended in ${took}s with status $rc"
else
	notok "dist/kill: victim '$victim', status $rc after ${took}s" "$l"
	pkill -9 -f "^$o/f32 --steps 100000000"
fi
finish
