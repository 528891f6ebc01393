#!/usr/bin/env bash
# The adjoint programs that ad_transform writes, run in the reference
# interpreter on the memory plan's layout, against finite differences.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
for dp in tests/ops/*.dp samples/*.dp; do
	name=$(basename "$dp" .dp)
	log="$TEST_OUT/irgrad_$name.log"
	if build/irgrad "$dp" >"$log" 2>&1; then
		ok "irgrad/$name: $(sed -n 's/.*\(max relative error .*\)/\1/p' "$log")"
	else
		notok "irgrad/$name" "$log"
	fi
done
finish
