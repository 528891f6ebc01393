#!/usr/bin/env bash
# make check, what CI runs: the test suite, the fuzzers for FUZZ_TIME seconds
# each, then the whole suite again under AddressSanitizer and
# UndefinedBehaviorSanitizer. The last line sums the three.
set -u
cd "$(dirname "$0")/.."
pass=0
fail=0
part() {
	local name=$1 log="$PWD/build/check.$1.log"
	shift
	echo "## $name: $*"
	mkdir -p build
	"$@" 2>&1 | tee "$log"
	local last p f
	last=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
	if [ -z "$last" ]; then
		echo "not ok - check/$name did not finish (no summary line)"
		fail=$((fail + 1))
		return
	fi
	p=${last%% passed*}
	f=${last#* passed, }
	f=${f%% failed*}
	pass=$((pass + p))
	fail=$((fail + f))
}
part suite bash tests/run.sh
part fuzz make -s fuzz
part sanitize make -s test-sanitize
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
