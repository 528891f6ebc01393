#!/usr/bin/env bash
# Gradients against central finite differences, in float64 builds: one small
# program per op (tests/ops) and every sample. The executable's --gradcheck
# exits non-zero above the threshold; we also read the reported error.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
limit=1e-6
for dp in tests/ops/*.dp samples/*.dp; do
	name=$(basename "$dp" .dp)
	exe="$TEST_OUT/gc_$name"
	log="$exe.log"
	if ! "$DPC" --precision f64 "$dp" -o "$exe" >"$log" 2>&1; then
		notok "gradcheck/$name: compile" "$log"
		continue
	fi
	if ! "$exe" --gradcheck --gradcheck-threshold $limit >"$log" 2>&1; then
		notok "gradcheck/$name" "$log"
		continue
	fi
	err=$(sed -n 's/.*max relative error \([0-9.e+-]*\).*/\1/p' "$log" | tail -1)
	if [ -n "$err" ] && awk -v e="$err" -v l=$limit 'BEGIN { exit !(e < l) }'; then
		ok "gradcheck/$name (max rel. error $err)"
	else
		notok "gradcheck/$name: no error figure below $limit" "$log"
	fi
done
finish
