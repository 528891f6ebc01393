#!/usr/bin/env bash
# Runs each libFuzzer target (built by `make fuzz-build`) for FUZZ_TIME
# seconds, both at once. A crash, a sanitizer report, a leak or a timeout
# fails the check; the failing input is printed in base64 and replayed, so the
# test log carries both the input and the report.
#   fuzz_dpc    .dp programs through the frontend and every pass before codegen;
#               seeds: every .dp file in the repository
#   fuzz_files  the runtime's .npy and safetensors readers; seeds: tests/fuzz/corpus_files
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
T=${FUZZ_TIME:-120}
o="$TEST_OUT/fuzz"
mkdir -p "$o"

# seeds are copied so that what the fuzzer adds never lands in the tree
seeds() {
	local target=$1 dir="$o/seed_$1"
	rm -rf "$dir"
	mkdir -p "$dir"
	if [ "$target" = dpc ]; then
		git ls-files '*.dp' | while read -r f; do cp "$f" "$dir/$(echo "$f" | tr / _)"; done
	else
		cp tests/fuzz/corpus_files/* "$dir/"
	fi
}

run() {
	local target=$1 bin="build/fuzz/fuzz_$1"
	mkdir -p "build/fuzz/corpus_$target" "$o/$target"
	rm -f "$o/$target"/crash-* "$o/$target"/leak-* "$o/$target"/timeout-* "$o/$target"/oom-* "$o/$target"/slow-unit-*
	local extra=()
	[ "$target" = dpc ] && extra=(-dict=tests/fuzz/dp.dict)
	# a unit slower than 10 s is written out as slow-unit-*, which the check
	# below would count: a sanitized samples/unet.dp takes 15 s through the
	# four pipelines, so only the timeout (25 s) is a finding
	"$bin" -max_total_time="$T" -timeout=25 -report_slow_units=25 -rss_limit_mb=2048 -close_fd_mask=2 "${extra[@]}" \
		-artifact_prefix="$o/$target/" "build/fuzz/corpus_$target" "$o/seed_$target" >"$o/$target.log" 2>&1
	echo $? >"$o/$target.rc"
}

for t in dpc files; do
	if [ ! -x "build/fuzz/fuzz_$t" ]; then
		notok "fuzz/$t: build/fuzz/fuzz_$t is missing (make fuzz-build)"
		continue
	fi
	seeds "$t"
	run "$t" &
done
wait

for t in dpc files; do
	[ -f "$o/$t.rc" ] || continue
	rc=$(cat "$o/$t.rc")
	runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$o/$t.log" | tail -1)
	found=$(ls "$o/$t"/ 2>/dev/null | head -1)
	if [ "$rc" -eq 0 ] && [ -z "$found" ]; then
		ok "fuzz/$t: ${runs:-?} runs in ${T} s, no crash"
		continue
	fi
	{
		tail -20 "$o/$t.log"
		for f in "$o/$t"/*; do
			[ -f "$f" ] || continue
			echo "failing input $(basename "$f") ($(wc -c <"$f") bytes), base64:"
			base64 "$f"
			echo "replayed:"
			"build/fuzz/fuzz_$t" -runs=1 "$f" 2>&1 | grep -v '^INFO' | head -60
		done
	} >"$o/$t.report"
	notok "fuzz/$t: exit status $rc after ${runs:-?} runs"
	sed 's/^/    /' "$o/$t.report" | head -300
done
finish
