#!/usr/bin/env bash
# Binomial checkpointing: gradients bitwise identical to store-everything on
# every sample and loop program, in both precisions and for several snapshot
# counts; recomputed steps equal to the closed form r n - C(s + r, r - 1)
# (computed here, in Python, from the loops the forward program shows); and
# device memory that stays flat as a loop grows from 10^4 to 10^6 steps.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/ckpt"
mkdir -p "$o"
predicted() { # FILE.dp SNAPSHOTS STEPS: recomputed steps of STEPS training steps
	"$DPC" --emit=ir "$1" | python3 -c "
import math, re, sys
s, steps, total = int(sys.argv[1]), int(sys.argv[2]), 0
for lo, hi in re.findall(r'^loop \S+ in (\d+)\.\.(\d+)', sys.stdin.read(), re.M):
    n = int(hi) - int(lo)
    k = s if s else math.ceil(math.sqrt(n)) + 1
    k = min(k, n)
    r = 0
    while math.comb(k + r, k) < n:
        r += 1
    total += r * n - math.comb(k + r, r - 1) if r else 0
print(total * steps)" "$2" "$3"
}
for dp in samples/*.dp tests/ops/loop.dp tests/ops/nested.dp; do
	name=$(basename "$dp" .dp)
	for prec in f32 f64; do
		"$DPC" --precision $prec "$dp" -o "$o/$name.none" || { notok "ckpt/$name: compile"; continue; }
		"$o/$name.none" --steps 2 --quiet --dump-grads "$o/$name.none.st" --save "$o/$name.none.p" >/dev/null
		for s in 1 2 3 0; do
			flag="--snapshots $s"
			[ $s = 0 ] && flag=""
			exe="$o/$name.b$s"
			if ! "$DPC" --precision $prec --checkpoint binomial $flag "$dp" -o "$exe" >"$exe.log" 2>&1 ||
				! "$exe" --steps 2 --quiet --dump-grads "$exe.st" --save "$exe.p" --summary-json "$exe.json" >>"$exe.log" 2>&1; then
				notok "ckpt/$name $prec s=${s/0/default}: run" "$exe.log"
				continue
			fi
			want=$(predicted "$dp" $s 2)
			got=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['recomputed_steps'])" "$exe.json")
			if cmp -s "$o/$name.none.st" "$exe.st" && cmp -s "$o/$name.none.p" "$exe.p" && [ "$got" = "$want" ]; then
				ok "ckpt/$name $prec s=${s/0/default}: gradients and parameters bitwise identical, $got recomputed steps"
			else
				echo "recomputed $got, formula $want" >>"$exe.log"
				cmp "$o/$name.none.st" "$exe.st" >>"$exe.log" 2>&1
				notok "ckpt/$name $prec s=${s/0/default}" "$exe.log"
			fi
		done
	done
done
# memory: flat under binomial with fixed snapshots, linear with store-everything
peak() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_device_bytes'])" "$1"; }
for T in 10000 100000 1000000; do
	"$DPC" -D T=$T --checkpoint binomial --snapshots 20 samples/oscillator.dp -o "$o/osc$T" &&
		"$o/osc$T" --steps 1 --quiet --summary-json "$o/osc$T.b.json" >/dev/null
	if [ $T -le 100000 ]; then
		"$DPC" -D T=$T samples/oscillator.dp -o "$o/oscn$T" && "$o/oscn$T" --steps 1 --quiet --summary-json "$o/osc$T.n.json" >/dev/null
	fi
done
b4=$(peak "$o/osc10000.b.json") b5=$(peak "$o/osc100000.b.json") b6=$(peak "$o/osc1000000.b.json")
n4=$(peak "$o/osc10000.n.json") n5=$(peak "$o/osc100000.n.json")
if [ "$b4" = "$b5" ] && [ "$b5" = "$b6" ]; then
	ok "ckpt/flat-memory: binomial peak $b4 bytes at 10^4, 10^5 and 10^6 steps"
else
	notok "ckpt/flat-memory: binomial peaks $b4, $b5, $b6"
fi
if [ "$n5" -gt $((5 * n4)) ]; then
	ok "ckpt/store-everything-grows: peak $n4 -> $n5 bytes from 10^4 to 10^5 steps"
else
	notok "ckpt/store-everything-grows: $n4 -> $n5"
fi
finish
