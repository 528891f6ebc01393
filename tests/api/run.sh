#!/usr/bin/env bash
# The C API (runtime/dpc.h): dpc --emit=lib builds the classifier as a library exporting dpc.h's calls
# alone; api_test.c calls every one, each refusal between the steps of a run, and the parameters after
# 5 steps on a batch put through the API are the executable's on the same batch, byte for byte, as
# are those from the options' data, a second session's and a resumed one's; the executable's exit
# statuses and messages for its own errors are as before.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/api"
mkdir -p "$o"
CC_=${CC:-cc}

check "dpc --emit=lib builds a library" "$DPC" --target cpu --optimizer adam samples/classifier.dp --emit=lib -o "$o/libclassifier.so"
check "dpc --emit=lib's default name is libMODEL.so" bash -c "cd '$o' && '$DPC' --target cpu '$PWD/samples/classifier.dp' --emit=lib && test -f libclassifier.so"
"$DPC" --target cpu --optimizer adam samples/classifier.dp --emit=lib -o "$o/libclassifier.so" >/dev/null 2>&1
# only dpc.h's calls are exported
nm -D --defined-only "$o/libclassifier.so" | awk '$2 ~ /[TDBR]/ {print $3}' | sed 's/@.*//' >"$o/exports"
if [ -s "$o/exports" ] && ! grep -v '^dpc_' "$o/exports" >/dev/null; then ok "the library exports dpc_ calls alone"
else notok "the library exports dpc_ calls alone" "$o/exports"; fi
check "dpc.h compiles as C++ too" bash -c "echo '#include \"dpc.h\"' | ${CXX:-c++} -x c++ -fsyntax-only -Wall -Wextra -Iruntime -"

# one batch of the classifier's inputs: .npy for the executable, raw for the host program
python3 - "$o" <<'PY'
import sys, numpy as np
d = sys.argv[1]
r = np.random.default_rng(11)
x = r.standard_normal((128, 20)).astype(np.float32)
y = r.integers(0, 10, 128).astype(np.int32)
np.save(d + "/x.npy", x); np.save(d + "/y.npy", y)
x.tofile(d + "/x.bin"); y.tofile(d + "/y.bin")
PY
"$DPC" --target cpu --optimizer adam samples/classifier.dp -o "$o/classifier" >/dev/null 2>&1
"$o/classifier" --seed 3 --quiet --steps 5 --input x="$o/x.npy" --input y="$o/y.npy" --save "$o/cli.safetensors" >"$o/cli.log" 2>&1 ||
	notok "the executable trains" "$o/cli.log"

if $CC_ -std=c11 -Wall -Wextra -Werror -Iruntime -o "$o/api_test" tests/api/api_test.c -L"$o" -lclassifier -Wl,-rpath,"$o" -lm \
	>"$o/cc.log" 2>&1; then
	ok "a host program compiles and links against the library"
	"$o/api_test" "$o" >"$o/api.log" 2>&1
	rc=$?
	grep -E '^(not )?ok - |^    ' "$o/api.log"
	# a status without a failed check is the process's own end (a sanitizer's report: a leak)
	[ $rc -eq 0 ] || grep -q '^not ok - ' "$o/api.log" || notok "api_test exited with status $rc" "$o/api.log"
	npass=$((npass + $(grep -c '^ok - ' "$o/api.log")))
	nfail=$((nfail + $(grep -c '^not ok - ' "$o/api.log")))
else
	notok "a host program compiles and links against the library" "$o/cc.log"
fi
for f in api files resumed; do
	if cmp -s "$o/cli.safetensors" "$o/$f.safetensors"; then ok "$f.safetensors: the executable's parameters, byte for byte"
	else notok "$f.safetensors: the executable's parameters, byte for byte"; fi
done
# dpc_eval's loss is the executable's --eval on the same parameters and batch
"$o/classifier" --quiet --eval --init "$o/cli.safetensors" --input x="$o/x.npy" --input y="$o/y.npy" >"$o/eval.log" 2>&1
want=$(sed -n 's/.*eval on 1 batches, loss \([^ ,]*\).*/\1/p' "$o/eval.log")
got=$(cat "$o/eval.txt" 2>/dev/null)
if [ -n "$want" ] && [ "$want" = "$got" ]; then ok "dpc_eval's loss is --eval's ($got)"
else echo "    --eval: '$want', dpc_eval: '$got'"; notok "dpc_eval's loss is --eval's" "$o/eval.log"; fi

# the executable, a client of the same API: its errors as before
expect "the executable: a bad option's message and --help's pointer" 2 "(classifier --help lists the options)" "$o/classifier" --steps x
expect "the executable: a missing file" 1 "classifier: error: cannot open /nonexistent.npy" "$o/classifier" --data /nonexistent.npy
expect "the executable: --help" 0 "usage: classifier" "$o/classifier" --help
finish
