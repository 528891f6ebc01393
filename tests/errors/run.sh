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

# Inputs too large to keep as files: each once crashed dpc (stack overflow,
# unbounded reads, overflowing sizes). Generated, then compiled.
g="$TEST_OUT/errors"
mkdir -p "$g"
python3 - "$g" <<'PY'
import sys
d = sys.argv[1]
hdr = "param W : f32[4, 1] = normal(0.1)\ninput x : f32[4, 1]\n"
def w(name, body):
    open(d + "/" + name + ".dp", "w").write(hdr + body)
w("parens", "loss { return mean(" + "(" * 20000 + "x" + ")" * 20000 + ") }\n")
w("neg", "loss { return mean(" + "-" * 50000 + "x) }\n")
w("fors", "loss { let h = x\n" + "for i in 0..2 {" * 10000 + "h = h * 2" + "}" * 10000 + "\nreturn mean(h) }\n")
w("sum", "loss { let h = x * W\nreturn mean(" + " + ".join(["h"] * 100000) + ") }\n")
w("constsum", "loss { return mean(x * W[" + "+".join(["0"] * 100000) + "]) }\n")
w("tape", "const N = 1099511627776\nloss {\n  let h = x\n  for i in 0..N { h = tanh(h * W) }\n  return mean(h) }\n")
# long programs that were quadratic to compile: 100,000 names in one scope,
# chained views, a 20,000-statement loop body, 50,000 chained values
w("lets", "loss {\n  let h0 = x * W\n" + "".join("  let h%d = reshape(h%d, [%s])\n" % (i, i - 1, "4, 1" if i % 2 == 0 else "1, 4")
  for i in range(1, 100000)) + "  return mean(h99999)\n}\n")
w("body", "loss {\n  let h = x\n  for i in 0..10 {\n" + "    h = tanh(h) * W\n" * 20000 + "  }\n  return mean(h)\n}\n")
w("chain", "loss {\n  let h0 = x * W\n" + "".join("  let h%d = tanh(h%d) * W\n" % (i, i - 1) for i in range(1, 50000)) +
  "  return mean(h49999)\n}\n")
# more parameters than the runtime's table holds (4096), and many more than it once held (256)
def params(name, n):
    open(d + "/" + name + ".dp", "w").write("".join("param p%d : f32[2] = normal(0.1)\n" % i for i in range(n)) +
        "input x : f32[2]\nloss {\n  return sum(x * (" + " + ".join("p%d" % i for i in range(n)) + "))\n}\n")
params("params4097", 4097)
params("params600", 600)
PY
expect errors/gen-parens-20000 1 "parens.dp:3:275: error: expression nested too deeply" "$DPC" --emit=ir "$g/parens.dp"
expect errors/gen-neg-50000 1 "neg.dp:3:275: error: expression nested too deeply" "$DPC" --emit=ir "$g/neg.dp"
expect errors/gen-for-10000 1 "fors.dp:4:3855: error: block nested too deeply" "$DPC" --emit=ir "$g/fors.dp"
# a flat chain of 100,000 terms is no nesting: it compiles, through every printed stage
for stage in ast ir grad stream; do
	check "errors/gen-sum-100000-$stage" "$DPC" --emit=$stage -o "$g/sum.$stage" "$g/sum.dp"
done
check errors/gen-sum-100000-terms test "$(grep -c '= add' "$g/sum.ir")" -eq 99999
# ... and to an executable that trains (issue 42: 4 minutes once, 220 s of it the host schedule's
# walks of in-place chains; about 13 s now): the timeout guards against that coming back
check errors/gen-sum-100000-executable sh -c 'timeout 120 "$1" --target cpu "$2.dp" -o "$2" && "$2" --steps 1 --quiet' _ "$DPC" "$g/sum"
check errors/gen-const-sum-100000 "$DPC" --emit=ir -o "$g/constsum.ir" "$g/constsum.dp"
expect errors/gen-tape-too-large 1 "tape.dp:6:7: error: the store-everything tape of 'h' over this loop would be f32\[1099511627776, 4, 1\], more than 2^40 elements; use --checkpoint binomial" \
	"$DPC" --emit=grad "$g/tape.dp"
expect errors/gen-tape-binomial-fits 0 "revolve" "$DPC" --emit=ckpt --checkpoint binomial --snapshots 4 "$g/tape.dp"
# These compile in about a second each. Before the fixes they took 170 to 360
# seconds: the timeout is a guard against that coming back, not a measure.
for t in lets body chain; do
	check "errors/gen-long-$t-compiles" timeout 120 "$DPC" --emit=stream -o "$g/$t.stream" "$g/$t.dp"
done
expect errors/gen-params-4097 1 "params4097.dp:4097:7: error: a model may have at most 4096 parameters and buffers" \
	"$DPC" --target cpu "$g/params4097.dp" -o "$g/params4097"
check errors/gen-params-600-trains sh -c '"$1" --target cpu "$2.dp" -o "$2" && "$2" --steps 2 --quiet --save "$2.st"' _ "$DPC" "$g/params600"
expect errors/source-limit 1 "dpc: error: /dev/zero: the source is larger than 64 MiB" timeout 60 "$DPC" --emit=ir /dev/zero
expect errors/directory 1 "cannot read tests/errors" "$DPC" --emit=ir tests/errors
finish
