#!/usr/bin/env bash
# Golden outputs of the emitted stages of every sample. UPDATE=1 rewrites them
# (review the diff before committing: the files are the spec).
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
for dp in samples/*.dp; do
	s=$(basename "$dp" .dp)
	for stage in ast ir grad ckpt stream; do
		want="tests/golden/$s.$stage"
		got="$TEST_OUT/golden.$s.$stage"
		flags=""
		[ $stage = ckpt ] && flags="--checkpoint binomial --snapshots 3"
		if ! "$DPC" --emit=$stage $flags "$dp" -o "$got" 2>"$got.err"; then
			notok "golden/$s.$stage: dpc failed" "$got.err"
			continue
		fi
		if [ "${UPDATE:-0}" = 1 ]; then
			cp "$got" "$want"
		fi
		if [ ! -f "$want" ]; then
			notok "golden/$s.$stage: $want is missing (run UPDATE=1 bash tests/golden/run.sh)"
		elif diff -u "$want" "$got" >"$got.diff"; then
			ok "golden/$s.$stage"
		else
			notok "golden/$s.$stage differs" "$got.diff"
		fi
	done
done
finish
