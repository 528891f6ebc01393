#!/usr/bin/env bash
# Two builds of dpc, each with its own runtime beside it, compared on what a
# user sees: --emit=schedule, --emit=stream and --emit=llvm (cpu and cuda) on
# every sample and on the checkpoint tests' programs, under no budget, a
# budget and min-memory; then each sample trained 3 steps by each build's
# executable, the saved parameters compared byte for byte. For a change
# that must alter nothing (issue 41's redesign):
#   bash tools/compare-builds.sh OLD/bin/dpc NEW/bin/dpc
set -u
old=$1 new=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 bad=0
same() { # what, then the arguments to both builds
	local what=$1
	shift
	n=$((n + 1))
	"$old" "$@" >"$tmp/a" 2>&1
	"$new" "$@" >"$tmp/b" 2>&1
	cmp -s "$tmp/a" "$tmp/b" || { bad=$((bad + 1)); echo "differs: $what: $*"; }
}
programs="samples/*.dp tests/ckpt/*.dp"
for f in $programs; do
	for args in "" "--device-mem 1M" "--checkpoint min-memory --stream none"; do
		for e in schedule stream; do
			same "$e" --target cpu $args --emit=$e "$f"
		done
	done
	same llvm --target cpu --emit=llvm -o - "$f"
	same llvm-cuda --target cuda --emit=llvm -o - "$f"
done
for f in samples/*.dp; do
	s=$(basename "$f" .dp)
	n=$((n + 1))
	if "$old" --target cpu "$f" -o "$tmp/$s.old" >/dev/null 2>&1 && "$new" --target cpu "$f" -o "$tmp/$s.new" >/dev/null 2>&1 &&
		"$tmp/$s.old" --steps 3 --quiet --threads 1 --save "$tmp/$s.old.st" >/dev/null 2>&1 &&
		"$tmp/$s.new" --steps 3 --quiet --threads 1 --save "$tmp/$s.new.st" >/dev/null 2>&1 &&
		cmp -s "$tmp/$s.old.st" "$tmp/$s.new.st"; then
		:
	else
		bad=$((bad + 1))
		echo "differs: $s's saved parameters after 3 steps"
	fi
done
echo "$n compared, $bad differ"
[ "$bad" = 0 ]
