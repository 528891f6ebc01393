#!/usr/bin/env bash
# Programs that must fail: each gives `file:line:col: error: message` and
# exit status 1, never a crash. The expectation is the first line of the
# program (`# expect: LINE:COL: error: TEXT`) or, for files that cannot hold
# a comment (empty, binary), NAME.expect beside it.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
for dp in tests/errors/*.dp; do
	name=$(basename "$dp" .dp)
	exp="tests/errors/$name.expect"
	if [ -f "$exp" ]; then
		want=$(cat "$exp")
	else
		want=$(head -1 "$dp" | sed -n 's/^# expect: //p')
	fi
	if [ -z "$want" ]; then
		notok "errors/$name: no expectation"
		continue
	fi
	expect "errors/$name" 1 "$dp:$(printf '%s' "$want" | sed 's/[][\\.*^$]/\\&/g')" "$DPC" --emit=ir "$dp"
done
finish
