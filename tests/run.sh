#!/usr/bin/env bash
# The whole test suite. Every part prints "ok - NAME" or "not ok - NAME" per
# check; this runner shows each part's checks as the part ends and closes with
# "N passed, N failed". Parts run side by side, as many at once as the cores
# this process may use (nproc honours taskset and cpusets, not CPU quotas;
# TEST_JOBS sets it):
# each writes only under its own $TEST_OUT/NAME, and none asserts a time.
set -u
cd "$(dirname "$0")/.."
# DPC_BUILD: the output root of the build under test (make test-sanitize
# points it at build/san); bin/dpc, build/ and runtime/ are under it.
export DPC_BUILD="${DPC_BUILD:-$PWD}"
export DPC="$DPC_BUILD/bin/dpc"
# The suite trains on the CPU target; tests/ptx and tests/cli check cuda's
# executables and the default, tests/gpu runs them on a GPU.
export DPC_TARGET=cpu
export TEST_OUT="${TEST_OUT:-$PWD/tests/out}"
rm -rf "$TEST_OUT"
mkdir -p "$TEST_OUT"
jobs="${TEST_JOBS:-$(nproc)}"

# the longest first, so that the short ones fill the other cores beside them
# (by their seconds on 2 cores, 2026-12-06: ckpt 441, unit 336, least 318, kernels 175, gradcheck 166, ptx 158, ...;
# sanitized, ckpt 369, unit 311, kernels 311, import 164, ptx 158, train 129, least 123, ...)
parts=(tests/ckpt/run.sh tests/unit/run.sh tests/least/run.sh tests/kernels/run.sh tests/ptx/run.sh tests/gradcheck/run.sh
       tests/import/run.sh tests/train/run.sh tests/bf16/run.sh tests/threads/run.sh tests/dist/run.sh tests/stream/run.sh
       tests/hosts/run.sh tests/runtime/run.sh tests/errors/run.sh tests/fuse/run.sh tests/reference/run.sh tests/cli/run.sh
       tests/mixed/run.sh tests/observe/run.sh tests/golden/run.sh tests/python/run.sh tests/api/run.sh)
pass=0
fail=0
skip=0
log_of() { echo "$TEST_OUT/$(echo "$1" | tr / _).log"; }
# run PART: its checks into its log, then its status and seconds beside them
run() {
	local log start=$SECONDS
	log=$(log_of "$1")
	bash "$1" >"$log" 2>&1 </dev/null
	echo "$? $((SECONDS - start))" >"$log.rc"
}
# report PART: its checks shown and counted
report() {
	local log rc secs p f k
	log=$(log_of "$1")
	read -r rc secs <"$log.rc"
	echo "# $1 ($secs s)"
	grep -v -E '^[0-9]+ passed, [0-9]+ failed' "$log"
	p=$(grep -c '^ok - ' "$log")
	f=$(grep -c '^not ok - ' "$log")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - $1 exited with status $rc"
		f=1
	fi
	k=$(sed -n 's/^[0-9]* passed, [0-9]* failed, \([0-9]*\) skipped$/\1/p' "$log" | tail -1)
	skip=$((skip + ${k:-0}))
	pass=$((pass + p))
	fail=$((fail + f))
	# a part that passed leaves its log, not its files (the suite writes a few GB in all, and CI's disk can be
	# small); a failing part's stay for inspection, and TEST_KEEP=1 keeps every part's
	if [ "$f" -eq 0 ] && [ -z "${TEST_KEEP:-}" ]; then
		rm -rf "${TEST_OUT:?}/$(basename "$(dirname "$1")")"
	fi
}
declare -A part_of
running=0
reap() {
	local done_pid
	wait -n -p done_pid
	report "${part_of[$done_pid]}"
	running=$((running - 1))
}
for part in "${parts[@]}"; do
	if [ ! -f "$part" ]; then
		echo "not ok - $part is missing"
		fail=$((fail + 1))
		continue
	fi
	while [ "$running" -ge "$jobs" ]; do reap; done
	run "$part" &
	part_of[$!]=$part
	running=$((running + 1))
done
while [ "$running" -gt 0 ]; do reap; done
# the last line is always "N passed, N failed" (CI reads it); parts skipped where this machine cannot run
# them are counted on the line before
[ "$skip" -gt 0 ] && echo "# $skip skipped (each part says why above)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
