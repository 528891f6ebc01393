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
	log="$TEST_OUT/err_$name.log"
	if [ -z "$want" ]; then
		notok "errors/$name: no expectation"
		continue
	fi
	"$DPC" --emit=ir "$dp" >/dev/null 2>"$log"
	rc=$?
	if [ $rc -ne 1 ]; then
		echo "exit status $rc, expected 1" >>"$log"
		notok "errors/$name" "$log"
	elif ! grep -qF -- "$dp:$want" "$log"; then
		echo "expected: $dp:$want" >>"$log"
		notok "errors/$name" "$log"
	elif grep -q "internal compiler error" "$log"; then
		notok "errors/$name: internal error" "$log"
	else
		ok "errors/$name"
	fi
done
finish
