#!/usr/bin/env bash
# The whole test suite. Every part prints "ok - NAME" or "not ok - NAME" per
# check; this runner shows them and closes with "N passed, N failed".
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

parts=(tests/cli/run.sh tests/errors/run.sh tests/golden/run.sh tests/unit/run.sh tests/runtime/run.sh tests/ckpt/run.sh tests/ptx/run.sh tests/kernels/run.sh
       tests/stream/run.sh tests/fuse/run.sh tests/observe/run.sh tests/gradcheck/run.sh tests/train/run.sh tests/bf16/run.sh
       tests/reference/run.sh tests/threads/run.sh tests/dist/run.sh tests/import/run.sh)
pass=0
fail=0
skip=0
for part in "${parts[@]}"; do
	if [ ! -f "$part" ]; then
		echo "not ok - $part is missing"
		fail=$((fail + 1))
		continue
	fi
	echo "# $part"
	log="$TEST_OUT/$(echo "$part" | tr / _).log"
	bash "$part" >"$log" 2>&1
	rc=$?
	grep -v -E '^[0-9]+ passed, [0-9]+ failed' "$log"
	p=$(grep -c '^ok - ' "$log")
	f=$(grep -c '^not ok - ' "$log")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - $part exited with status $rc"
		f=1
	fi
	k=$(sed -n 's/^[0-9]* passed, [0-9]* failed, \([0-9]*\) skipped$/\1/p' "$log" | tail -1)
	skip=$((skip + ${k:-0}))
	pass=$((pass + p))
	fail=$((fail + f))
done
if [ "$skip" -gt 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" -eq 0 ]
