#!/usr/bin/env bash
# The training executable's files and failure modes: .npy data, safetensors
# save / load / dump, atomic writes, gradient check failures, bad input.
# First the runtime alone under a hand-written model (fake_model.c), which
# needs no compiler; then under models that dpc compiled.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/rt"
mkdir -p "$o"
npy() { python3 tests/runtime/npy.py "$@"; }
# summary FILE PYTHON-EXPR: the expression, over the summary's keys, holds
summary() { python3 -c "import json,sys; s = json.load(open(sys.argv[1])); assert eval('(' + sys.argv[2] + ')', {}, s), s" "$@"; }

# ---- the runtime alone, under a hand-written model (fake_model.c) ----
f="$o/fake"
# the runtime of the build under test (DPC_BUILD: build/san for make test-sanitize)
rtlib="$DPC_BUILD/runtime/libdprt.a"
[ "$DPC_BUILD" -ef . ] && make -s runtime/libdprt.a >/dev/null
# CC, CFLAGS_EXTRA and LDFLAGS pass through (a sanitizer build of the runtime links this way too)
build() { ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -O2 -pthread -Iruntime ${CFLAGS_EXTRA:-} \
	tests/runtime/fake_model.c "$@" "$rtlib" ${LDFLAGS:-} -lopenblas -lpthread -lm >>"$f.build.log" 2>&1; }
rm -f "$f.build.log"
if build -o "$f.f32" && build -DREAL=double -o "$f.f64" && build -DREAL=double -DBREAK_GRAD -o "$f.broken" &&
	build -DBAD_DESC -o "$f.baddesc" && build -DSLOW_STEP -o "$f.slow" && build -DCOUNT_PARTS -o "$f.parts" &&
	build -DADAM -o "$f.adam" &&
	[ ! -s "$f.build.log" ]; then
	ok "runtime/fake-build-without-warnings"
else
	notok "runtime/fake-build-without-warnings" "$f.build.log"
fi

# the CPU device's copy stream (tensor streaming's transfers): a second thread, ordered by events
if ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -pthread -Iruntime ${CFLAGS_EXTRA:-} tests/runtime/copy_stream.c \
	"$rtlib" ${LDFLAGS:-} -lopenblas -lpthread -lm -o "$o/copy_stream" >"$o/copy_stream.log" 2>&1; then
	"$o/copy_stream" >"$o/copy_stream.out" 2>&1
	grep '^ok - \|^not ok - ' "$o/copy_stream.out" | while read -r line; do echo "$line"; done
	npass=$((npass + $(grep -c '^ok - ' "$o/copy_stream.out")))
	nfail=$((nfail + $(grep -c '^not ok - ' "$o/copy_stream.out")))
	if ! tail -1 "$o/copy_stream.out" | grep -q '^0 failed$'; then
		notok "runtime/copy-stream exited abnormally" "$o/copy_stream.out"
	fi
else
	notok "runtime/copy-stream: build" "$o/copy_stream.log"
fi

# training: the loss falls, and every counter is what the model implies
for p in f32 f64; do
	"$f.$p" --steps 200 --lr 0.05 --quiet --summary-json "$f.$p.json" >/dev/null
	check "runtime/fake-$p-loss-falls" summary "$f.$p.json" "loss_last < loss_first / 10"
done
# f32: 10 params (40 B) uploaded once; x and y (8*4 + 8*2 elements) every step; the loss read back;
# 2 GEMM calls and 4 model kernels + 2 sgd launches per step; one arena of 680 bytes
check "runtime/fake-counters" summary "$f.f32.json" "steps == 200 and h2d_bytes == 40 + 200 * 48 * 4 and
	d2h_bytes == 200 * 4 and gemm_calls == 400 and kernel_launches == 1200 and forward_steps == 200 and
	recomputed_steps == 0 and peak_device_bytes == predicted_device_bytes == 680 and precision == 'f32' and
	optimizer == 'sgd' and lr == 0.05 and model == 'fake' and wall_s >= 0 and setup_s >= 0 and save_s >= 0"
# adam is compiled in: its moments are in the planned arena (840 bytes), nothing is allocated beside it
"$f.adam" --steps 300 --lr 0.02 --quiet --summary-json "$f.adam.json" >/dev/null
check "runtime/fake-adam" summary "$f.adam.json" "loss_last < loss_first / 10 and
	peak_device_bytes == predicted_device_bytes == 840 and optimizer == 'adam' and lr == 0.02"
"$f.adam" --steps 2 --optimizer adam --quiet --summary-json "$f.adam2.json" >/dev/null
check "runtime/fake-adam-default-lr" summary "$f.adam2.json" "lr == 0.001 and optimizer == 'adam'"
expect "runtime/fake-optimizer-not-compiled" 2 "compiled for --optimizer sgd; to train with adam, compile it with dpc --optimizer adam" \
	"$f.f32" --steps 1 --optimizer adam
expect "runtime/fake-optimizer-sgd-on-adam" 2 "compiled for --optimizer adam" "$f.adam" --steps 1 --optimizer sgd
expect "runtime/fake-default-lr" 0 "step      10/10  loss" "$f.f32" --steps 10 --summary-json "$f.default.json"
check "runtime/fake-default-lr-value" summary "$f.default.json" "lr == 0.01 and steps == 10"
"$f.f64" --steps 5 --seed 7 --quiet --summary-json "$f.s7a.json" >/dev/null
"$f.f64" --steps 5 --seed 7 --quiet --summary-json "$f.s7b.json" >/dev/null
"$f.f64" --steps 5 --seed 8 --quiet --summary-json "$f.s8.json" >/dev/null
check "runtime/fake-seeded" python3 -c "import json
a, b, c = (json.load(open('$f.%s.json' % k)) for k in ('s7a', 's7b', 's8'))
assert a['loss_last'] == b['loss_last'] != c['loss_last']"
expect "runtime/fake-help" 0 "gradcheck-threshold" "$f.f32" --help
expect "runtime/fake-quiet" 0 "fake: 3 steps" "$f.f32" --steps 3 --quiet
check "runtime/fake-quiet-one-line" test "$("$f.f32" --steps 3 --quiet | wc -l)" -eq 1

# gradient check: AD against central differences
expect "runtime/fake-gradcheck-f64" 0 "gradcheck: max relative error .* (threshold 1e-06) OK" "$f.f64" --gradcheck
expect "runtime/fake-gradcheck-all-entries" 0 "b .*(entry [01] of 2)" "$f.f64" --gradcheck --gradcheck-samples 100
expect "runtime/fake-gradcheck-broken" 1 "FAIL" "$f.broken" --gradcheck
expect "runtime/fake-gradcheck-f32-warns" 0 "not meaningful" "$f.f32" --gradcheck --gradcheck-threshold 1

# parameters: save, init, save again gives the same bytes; F64 files load into an f32 model
for p in f32 f64; do
	"$f.$p" --steps 3 --quiet --save "$f.$p.a.st" >/dev/null
	"$f.$p" --steps 1 --lr 0 --quiet --init "$f.$p.a.st" --save "$f.$p.b.st" >/dev/null
	check "runtime/fake-$p-save-init-roundtrip" cmp "$f.$p.a.st" "$f.$p.b.st"
done
expect "runtime/fake-init-converts-f64" 0 "fake: 1 steps" "$f.f32" --steps 1 --quiet --init "$f.f64.a.st"

# known data and parameters in, the first step's gradients out, checked by hand in Python
npy "$f.x.npy" "<f8" 8,4 "[((k * 37) % 11) / 11 - 0.5 for k in range(n)]"
npy "$f.y.npy" "<f4" 8,2 "[((k * 13) % 7) / 7 - 0.5 for k in range(n)]"
python3 - "$f.init.st" <<'PY'
import json, struct, sys
w = [0.1 * (k - 3) for k in range(8)]
b = [0.25, -0.5]
h = json.dumps({"W": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]},
                "b": {"dtype": "F64", "shape": [2], "data_offsets": [32, 48]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<8f", *w) + struct.pack("<2d", *b))
PY
"$f.f64" --steps 1 --quiet --data "$f.x.npy" --labels "$f.y.npy" --init "$f.init.st" --dump-grads "$f.g.st" >/dev/null
check "runtime/fake-dump-grads" python3 - "$f.g.st" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
def tensor(name, shape):
    t = h[name]
    assert t["dtype"] == "F64" and t["shape"] == shape, t
    a, e = t["data_offsets"]
    return struct.unpack("<%dd" % ((e - a) // 8), b[8 + n + a:8 + n + e])
gw, gb = tensor("W", [4, 2]), tensor("b", [2])
x = [((k * 37) % 11) / 11 - 0.5 for k in range(32)]
y = [struct.unpack("<f", struct.pack("<f", ((k * 13) % 7) / 7 - 0.5))[0] for k in range(16)]
w = [struct.unpack("<f", struct.pack("<f", 0.1 * (k - 3)))[0] for k in range(8)]
bias = [0.25, -0.5]
dz = [2 * (sum(x[r * 4 + q] * w[q * 2 + j] for q in range(4)) + bias[j] - y[r * 2 + j]) / 16
      for r in range(8) for j in range(2)]
want_w = [sum(x[r * 4 + q] * dz[r * 2 + j] for r in range(8)) for q in range(4) for j in range(2)]
want_b = [sum(dz[r * 2 + j] for r in range(8)) for j in range(2)]
for got, want in zip(gw + gb, want_w + want_b):
    assert abs(got - want) < 1e-12, (got, want)
assert len(b) == 8 + n + 80
PY

# data: rows cycle when N is not a multiple of the batch; integer files feed real inputs
npy "$f.x13.npy" "<f4" 13,4 "[k / n for k in range(n)]"
npy "$f.y13.npy" "<i8" 13,2 "[k % 3 for k in range(n)]"
expect "runtime/fake-npy-13-rows" 0 "fake: 4 steps" "$f.f32" --steps 4 --quiet --input x="$f.x13.npy" --input y="$f.y13.npy"
npy "$f.xw.npy" "<f4" 13,5 "[0.0] * n"
expect "runtime/fake-npy-shape" 1 "xw.npy: shape \[13, 5\] does not fit input 'x' of shape \[8, 4\]" "$f.f32" --data "$f.xw.npy"
expect "runtime/fake-npy-missing" 1 "cannot open $f.none.npy" "$f.f32" --labels "$f.none.npy"
echo "not numpy" >"$f.junk.npy"
expect "runtime/fake-npy-bad-magic" 1 "junk.npy: not a .npy file" "$f.f32" --data "$f.junk.npy"
head -c 150 "$f.x13.npy" >"$f.cut.npy"
expect "runtime/fake-npy-truncated" 1 "cut.npy: truncated data" "$f.f32" --data "$f.cut.npy"
npy "$f.fo.npy" "<f4" 8,4 "[0.0] * n" fortran
expect "runtime/fake-npy-fortran" 1 "fo.npy: Fortran-ordered" "$f.f32" --data "$f.fo.npy"
npy "$f.half.npy" "<f2" 8,4 "[0.0] * n"
expect "runtime/fake-npy-dtype" 1 "half.npy: unsupported dtype '<f2'" "$f.f32" --data "$f.half.npy"

# parameter files
head -c 60 "$f.f32.a.st" >"$f.cut.st"
expect "runtime/fake-safetensors-truncated" 1 "cut.st" "$f.f32" --init "$f.cut.st"
printf '\x10\x00\x00\x00\x00\x00\x00\x00{"W":{"dtype":"F' >"$f.junk.st"
expect "runtime/fake-safetensors-corrupt" 1 "junk.st: corrupt safetensors header" "$f.f32" --init "$f.junk.st"
python3 - "$f.shape.st" <<'PY'
import json, struct, sys
h = json.dumps({"W": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 32]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [32, 40]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(40))
h = json.dumps({"W": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]}}).encode()
open(sys.argv[1] + ".nob", "wb").write(struct.pack("<Q", len(h)) + h + bytes(32))
PY
expect "runtime/fake-safetensors-missing" 1 "shape.st.nob: no tensor named 'b'" "$f.f32" --init "$f.shape.st.nob"
expect "runtime/fake-safetensors-shape" 1 "shape.st: tensor 'W' has shape \[2, 4\], the model's is \[4, 2\]" "$f.f32" --init "$f.shape.st"

# files that lie: sizes that overflow, headers cut short, values the model cannot hold
# rawnpy OUT VERSION HEADER-TEXT [DATA-BYTES]: a .npy file with this header, as is
rawnpy() { python3 -c "import struct, sys
v, h = int(sys.argv[2]), sys.argv[3].encode()
open(sys.argv[1], 'wb').write(b'\x93NUMPY' + bytes([v, 0]) + (struct.pack('<H', len(h)) if v == 1 else struct.pack('<I', len(h))) + h + bytes(int(sys.argv[4]) if len(sys.argv) > 4 else 64))" "$@"; }
rawnpy "$f.ovf.npy" 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 32), }"
expect "runtime/fake-npy-shape-overflow-wraps" 1 "ovf.npy: shape \[4611686018427387904, 32\] has more elements than fit in memory" "$f.f32" --data "$f.ovf.npy"
rawnpy "$f.ovf2.npy" 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775807, 32), }"
expect "runtime/fake-npy-shape-overflow-negative" 1 "ovf2.npy: shape \[9223372036854775807, 32\] has more elements than fit in memory" "$f.f32" --data "$f.ovf2.npy"
rawnpy "$f.ovf3.npy" 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 32), }"
expect "runtime/fake-npy-dim-out-of-range" 1 "ovf3.npy: .npy shape dimension 99999999999999999999 is out of range" "$f.f32" --data "$f.ovf3.npy"
rawnpy "$f.nobrace.npy" 1 "{'descr': '<f4', 'fortran_order': False, 'shape': (8, 4), " 128
expect "runtime/fake-npy-no-closing-brace" 1 "nobrace.npy: malformed .npy header" "$f.f32" --data "$f.nobrace.npy"
rawnpy "$f.v4.npy" 4 "{'descr': '<f4', 'fortran_order': False, 'shape': (8, 4), }" 128
expect "runtime/fake-npy-version" 1 "v4.npy: unsupported .npy format version 4" "$f.f32" --data "$f.v4.npy"
rawnpy "$f.v2.npy" 2 "{'descr': '<f4', 'fortran_order': False, 'shape': (8, 4), }" 128
expect "runtime/fake-npy-version-2" 0 "fake: 1 steps" "$f.f32" --steps 1 --quiet --data "$f.v2.npy" --labels "$f.y.npy"
npy "$f.big.npy" "<f8" 8,4 "[1e100 if k == 5 else 0.0 for k in range(n)]"
expect "runtime/fake-npy-f64-beyond-f32" 1 "big.npy: entry 5 is 1e+100, out of the f32 range of input 'x'" "$f.f32" --data "$f.big.npy"
expect "runtime/fake-npy-f64-in-f64" 0 "fake: 1 steps" "$f.f64" --steps 1 --quiet --lr 0 --data "$f.big.npy" --labels "$f.y.npy"
# st OUT JSON-HEADER DATA-PYTHON-EXPR: a safetensors file with this header
st() { python3 -c "import struct, sys
h = sys.argv[2].encode()
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + eval(sys.argv[3], {'struct': struct}))" "$@"; }
okhdr='"W": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [32, 40]}'
st "$f.extra.st" "{\"__metadata__\": {\"format\": \"pt\"}, $okhdr, \"extra\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [40, 44]}}" "bytes(44)"
expect "runtime/fake-safetensors-extra-tensor" 1 "extra.st: tensor 'extra' is not a parameter of model fake" "$f.f32" --init "$f.extra.st"
st "$f.meta.st" "{\"__metadata__\": {\"format\": \"pt\"}, $okhdr}" "bytes(40)"
expect "runtime/fake-safetensors-metadata" 0 "fake: 1 steps" "$f.f32" --steps 1 --quiet --init "$f.meta.st"
st "$f.nan.st" "{$okhdr}" "struct.pack('<10f', 0, 0, 0, 0, 0, float('nan'), 0, 0, 0, 0)"
expect "runtime/fake-safetensors-nan" 1 "nan.st: tensor 'W' entry 5 is nan, not a finite number" "$f.f32" --init "$f.nan.st"
st "$f.inf.st" "{$okhdr}" "struct.pack('<10f', 0, 0, 0, 0, 0, 0, 0, 0, 0, float('-inf'))"
expect "runtime/fake-safetensors-inf" 1 "inf.st: tensor 'b' entry 1 is -inf, not a finite number" "$f.f64" --init "$f.inf.st"
st "$f.f64big.st" '{"W": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]}, "b": {"dtype": "F64", "shape": [2], "data_offsets": [32, 48]}}' "bytes(32) + struct.pack('<2d', 0, 1e100)"
expect "runtime/fake-safetensors-f64-beyond-f32" 1 "f64big.st: tensor 'b' entry 1 is 1e+100, out of the range of its f32" "$f.f32" --init "$f.f64big.st"
expect "runtime/fake-safetensors-f64-in-f64" 0 "fake: 1 steps" "$f.f64" --steps 1 --quiet --init "$f.f64big.st"
# bad_w NAME SHAPE OFFSETS MESSAGE: a file whose tensor W has this shape and
# these data offsets is refused with MESSAGE
bad_w() {
	st "$f.$1.st" "{\"W\": {\"dtype\": \"F32\", \"shape\": $2, \"data_offsets\": $3}}" "bytes(32)"
	expect "runtime/fake-safetensors-$1" 1 "$1.st: $4" "$f.f32" --init "$f.$1.st"
}
bad_w shape-overflow "[4611686018427387904, 32]" "[0, 32]" "tensor 'W' of shape \[4611686018427387904, 32\] has more elements than fit in memory"
bad_w negative-dim "[-4, -2]" "[0, 32]" "tensor 'W' has a negative dimension -4"
bad_w negative-offset "[4, 2]" "[-32, 0]" "tensor 'W' has negative data offsets \[-32, 0\]"
bad_w offset-out-of-range "[4, 2]" "[0, 99999999999999999999]" "a number in the safetensors header is out of range"
bad_w offset-beyond-file "[4, 2]" "[9223372036854775807, 9223372036854775807]" \
	"tensor 'W': data offsets \[9223372036854775807, 9223372036854775807\] do not fit"

# output paths are checked before the first step, and nothing is left behind
mkdir -p "$o/outdir" && rm -rf "$o/outdir"/* && : >"$o/outdir/plainfile"
for opt in --save --dump-grads --summary-json; do
	expect "runtime/fake-early-check$opt-missing-dir" 1 "cannot write $o/nodir/p: No such file or directory" "$f.f32" --steps 3 "$opt" "$o/nodir/p"
	check "runtime/fake-early-check$opt-before-training" bash -c "! '$f.f32' --steps 3 $opt '$o/outdir/plainfile/p' 2>&1 | grep -E 'loss|parameter tensors'"
done
expect "runtime/fake-early-check-directory" 1 "cannot write $o/outdir: it is a directory" "$f.f32" --steps 3 --save "$o/outdir"
"$f.f32" --steps 1 --quiet --save "$o/outdir/ok.st" --summary-json "$o/outdir/ok.json" >/dev/null
check "runtime/fake-early-check-leaves-nothing" test "$(ls "$o/outdir" | tr '\n' ' ')" = "ok.json ok.st plainfile "

# a save cut short by a signal leaves no temporary file; one left by a dead process is removed at start
rm -f "$f.stale.st"* && : >"$f.stale.st.tmp.999999" && : >"$f.stale.st.tmp.$$"
expect "runtime/fake-stale-temporary-reported" 0 "removing stale temporary file .*stale.st.tmp.999999 left by an interrupted save" "$f.f32" --steps 1 --save "$f.stale.st"
check "runtime/fake-stale-temporary-removed" test ! -e "$f.stale.st.tmp.999999" -a -e "$f.stale.st.tmp.$$" -a -s "$f.stale.st"
rm -f "$f.stale.st.tmp.$$" "$f.sig.st"*
# the save's temporary file is a FIFO made beforehand, so the save blocks opening it until the signal
bash -c 'mkfifo "$0.tmp.$$" && exec "$1" --steps 1 --quiet --save "$0"' "$f.sig.st" "$f.f32" >/dev/null 2>&1 &
sigpid=$!
for _ in $(seq 50); do [ "$(readlink "/proc/$sigpid/exe")" = "$(readlink -f "$f.f32")" ] && break; sleep 0.1; done
sleep 1
kill -TERM "$sigpid"
wait "$sigpid"
sigrc=$?
check "runtime/fake-sigterm-during-save" test "$sigrc" -eq 143 -a ! -e "$f.sig.st.tmp.$sigpid" -a ! -e "$f.sig.st"

# kernel threads: --threads, then OMP_NUM_THREADS, else the cores this process may run on (OPENBLAS_NUM_THREADS
# is not read); garbage is ignored (tests/threads: the count's report and bad counts)
expect "runtime/fake-threads-omp" 0 "split into 3 parts" env OMP_NUM_THREADS=3 OPENBLAS_NUM_THREADS=5 "$f.parts" --steps 1
expect "runtime/fake-threads-flag" 0 "split into 1 parts" env OMP_NUM_THREADS=3 "$f.parts" --steps 1 --threads 1
cores=$(nproc)
[ "$cores" -gt 64 ] && cores=64 # 2^20 elements: parts of at least 16K
expect "runtime/fake-threads-openblas-unread" 0 "split into $cores parts" env -u OMP_NUM_THREADS OPENBLAS_NUM_THREADS=5 "$f.parts" --steps 1
expect "runtime/fake-threads-cores" 0 "split into $cores parts" env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS "$f.parts" --steps 1
expect "runtime/fake-threads-affinity" 0 "split into 1 parts" env -u OMP_NUM_THREADS taskset -c 0 "$f.parts" --steps 1
expect "runtime/fake-threads-garbage" 0 "ignoring OMP_NUM_THREADS=lots" env OMP_NUM_THREADS=lots "$f.parts" --steps 1
expect "runtime/fake-threads-capped" 0 "split into 64 parts" env OMP_NUM_THREADS=100000 "$f.parts" --steps 1

# the progress line's ms/step is the time of the steps it reports: step 3 takes 300 ms more
"$f.slow" --steps 4 --log-every 1 >"$f.slow.log" 2>&1
check "runtime/fake-ms-per-step-aligned" python3 - "$f.slow.log" <<'EOF'
import re, sys
ms = {int(s): float(t) for s, t in re.findall(r"step +(\d+)/4 .* ([0-9.]+) ms/step", open(sys.argv[1]).read())}
assert ms[3] > 250 and ms[1] < 150 and ms[2] < 150 and ms[4] < 150, ms
EOF
"$f.slow" --steps 4 --log-every 2 >"$f.slow2.log" 2>&1
check "runtime/fake-ms-per-step-interval" python3 - "$f.slow2.log" <<'EOF'
import re, sys
ms = {int(s): float(t) for s, t in re.findall(r"step +(\d+)/4 .* ([0-9.]+) ms/step", open(sys.argv[1]).read())}
assert ms[2] < 75 and 125 < ms[4] < 250, ms
EOF

# a normal run gives back every buffer: a LeakSanitizer build of the runtime and the fake model is clean
if command -v clang >/dev/null && echo 'int main(void){return 0;}' | clang -x c -fsanitize=address,undefined - -o "$f.asan-probe" 2>/dev/null; then
	if clang -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=address,undefined -pthread -Iruntime runtime/*.c runtime/cpu/*.c \
		common/*.c tests/runtime/fake_model.c -DADAM -o "$f.asan" -lopenblas -lm >"$f.asan.log" 2>&1; then
		check "runtime/fake-asan-no-leaks" bash -c "ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 '$f.asan' --steps 5 --optimizer adam --profile \
			--input x='$f.x13.npy' --input y='$f.y13.npy' --save '$f.asan.st' --dump-grads '$f.asan.g.st' --summary-json '$f.asan.json' 2>&1 &&
			ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 '$f.asan' --steps 2 --init '$f.asan.st' --quiet 2>&1 &&
			ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 '$f.asan' --gradcheck --gradcheck-threshold 10 2>&1"
	else
		notok "runtime/fake-asan-no-leaks: build" "$f.asan.log"
	fi
fi

# the file readers' fuzz target replays its seeds (and any regression inputs) without a finding
if command -v clang >/dev/null && echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){return 0;}' |
	clang -x c -fsanitize=fuzzer,address,undefined - -o "$f.fuzz-probe" 2>/dev/null; then
	if clang -g -O1 -fsanitize=fuzzer,address,undefined -Iruntime tests/fuzz/fuzz_files.c runtime/files.c runtime/desc.c -lm \
		-o "$f.fuzz_files" >"$f.fuzz.log" 2>&1; then
		check "runtime/fuzz-files-corpus" "$f.fuzz_files" -runs=0 tests/fuzz/corpus_files
	else
		notok "runtime/fuzz-files-corpus: build" "$f.fuzz.log"
	fi
fi

# command line and internal errors
expect "runtime/fake-unknown-option" 2 "unknown option '--bogus'" "$f.f32" --bogus
expect "runtime/fake-bad-lr" 2 "--lr needs a non-negative number" "$f.f32" --lr fast
expect "runtime/fake-missing-value" 2 "--steps needs a value" "$f.f32" --steps
# integers out of range are refused, not clamped (timeout: a clamped --steps would train for ever)
expect "runtime/fake-steps-overflow" 2 "--steps needs an integer in 1..1000000000, not '99999999999999999999'" timeout 20 "$f.f32" --steps 99999999999999999999
expect "runtime/fake-steps-too-many" 2 "--steps needs an integer in 1..1000000000" timeout 20 "$f.f32" --steps 1000000001
expect "runtime/fake-steps-zero" 2 "--steps needs an integer in 1..1000000000" "$f.f32" --steps 0
expect "runtime/fake-steps-not-a-number" 2 "--steps needs an integer" "$f.f32" --steps 1e3
expect "runtime/fake-seed-overflow" 2 "--seed needs an integer in 0..9223372036854775807, not '9223372036854775808'" "$f.f32" --seed 9223372036854775808
expect "runtime/fake-seed-negative" 2 "--seed needs an integer in 0..9223372036854775807, not '-1'" "$f.f32" --seed -1
expect "runtime/fake-seed-largest" 0 "fake: 1 steps" "$f.f32" --steps 1 --quiet --seed 9223372036854775807
expect "runtime/fake-log-every-overflow" 2 "--log-every needs an integer in 1..1000000000" "$f.f32" --log-every 18446744073709551617
expect "runtime/fake-gradcheck-samples-range" 2 "--gradcheck-samples needs an integer in 1..1000000000" "$f.f64" --gradcheck --gradcheck-samples -5
expect "runtime/fake-steps-in-help" 0 "training steps, 1 to 10^9" "$f.f32" --help
expect "runtime/fake-non-finite" 1 "loss is not finite at step" "$f.f32" --steps 100 --lr 1e30 --summary-json "$f.nan.json"
check "runtime/fake-non-finite-summary" summary "$f.nan.json" "loss_last is None and steps < 100"
expect "runtime/fake-desc-mismatch" 70 "model description line 15 not understood: stream W 3" "$f.baddesc"


"$DPC" samples/resmlp.dp -o "$o/resmlp" && "$DPC" samples/classifier.dp -o "$o/cls" &&
	"$DPC" --precision f64 tests/runtime/kink.dp -o "$o/kink" || { notok "runtime: compile"; finish; exit; }

# parameters: save, load and save again gives the same bytes (lr 0 leaves them as they are)
"$o/resmlp" --steps 3 --quiet --save "$o/a.safetensors" >/dev/null
"$o/resmlp" --steps 1 --lr 0 --quiet --init "$o/a.safetensors" --save "$o/b.safetensors" >/dev/null
check "runtime/save-init-roundtrip" cmp "$o/a.safetensors" "$o/b.safetensors"
check "runtime/no-temporary-left" bash -c "! ls '$o'/*.tmp.* 2>/dev/null | grep -q ."
expect "runtime/save-unwritable" 1 "cannot write" "$o/resmlp" --steps 1 --quiet --save /nonexistent/dir/p.safetensors

# gradients of the first step, readable as safetensors
"$o/resmlp" --steps 2 --quiet --dump-grads "$o/g.safetensors" >/dev/null
check "runtime/dump-grads-readable" python3 - "$o/g.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
want = {"W_in": [32, 128], "W": [8, 128, 128], "b": [8, 128], "W_out": [128, 1]}
for k, shape in want.items():
    assert h[k]["shape"] == shape and h[k]["dtype"] == "F32", h[k]
    a, e = h[k]["data_offsets"]
    vals = struct.unpack("<%df" % ((e - a) // 4), b[8 + n + a:8 + n + e])
    assert any(v != 0 for v in vals), k + " is all zero"
assert len(b) == 8 + n + max(v["data_offsets"][1] for k, v in h.items() if k != "__metadata__")
PY

# data from .npy files, of either float width, and class labels
npy "$o/x.npy" "<f4" 256,32 "[((k * 37) % 11) / 11 - 0.5 for k in range(n)]"
npy "$o/y.npy" "<f8" 256,1 "[((k * 13) % 7) / 7 - 0.5 for k in range(n)]"
expect "runtime/npy-data" 0 "loss" "$o/resmlp" --steps 5 --data "$o/x.npy" --labels "$o/y.npy"
npy "$o/cx.npy" "<f8" 128,20 "[((k * 7) % 5) - 2.0 for k in range(n)]"
npy "$o/cy.npy" "<i8" 128 "[k % 10 for k in range(n)]"
expect "runtime/npy-labels" 0 "loss" "$o/cls" --steps 5 --input x="$o/cx.npy" --input y="$o/cy.npy"
# inputs bind by role (issue 61): --data the one input the loss computes from, --labels the one it reads only as
# labels; a model with an attention mask beside its data takes them by name, and refuses to start with data
# left out, or given twice, rather than train on synthetic data; with no data option at all, the first line
# says every input is synthetic
cat >"$o/masked.dp" <<'DP'
param W : f32[4, 3] = normal(0.5)
input x : f32[8, 4]
input mask : f32[8, 4]
input y : i32[8]
loss { return cross_entropy((x * mask) @ W, y) }
DP
"$DPC" --target cpu "$o/masked.dp" -o "$o/masked" >"$o/masked.log" 2>&1
npy "$o/mx.npy" "<f4" 8,4 "[k / n for k in range(n)]"
npy "$o/mm.npy" "<f4" 8,4 "[1.0] * n"
npy "$o/my.npy" "<i4" 8 "[k % 3 for k in range(n)]"
expect "runtime/bind-data-which" 2 "--data .*mx.npy: the model has 2 inputs that the loss computes from (x, mask): give each by name" \
	"$o/masked" --steps 1 --data "$o/mx.npy" --labels "$o/my.npy"
expect "runtime/bind-missing" 2 "input 'mask' has no data: give it with --input mask=FILE" "$o/masked" --steps 1 \
	--input x="$o/mx.npy" --labels "$o/my.npy"
expect "runtime/bind-twice" 2 "input 'y' is given twice, by --labels and by --input" "$o/masked" --steps 1 \
	--input x="$o/mx.npy" --input mask="$o/mm.npy" --labels "$o/my.npy" --input y="$o/my.npy"
expect "runtime/bind-by-role" 0 "masked: 1 steps" "$o/masked" --steps 1 --input x="$o/mx.npy" --input mask="$o/mm.npy" \
	--labels "$o/my.npy"
expect "runtime/bind-synthetic" 0 "masked: no --data, --labels or --input: training on synthetic data (x, mask, y" \
	"$o/masked" --steps 1
# a model whose loss reads no input only as labels (a language model's tokens are both)
"$DPC" --target cpu samples/gpt.dp -o "$o/gpt_bind" >>"$o/masked.log" 2>&1
expect "runtime/bind-no-labels" 2 "--labels .*: the model has no input that its loss reads only as its labels" \
	"$o/gpt_bind" --steps 1 --labels "$o/my.npy"
npy "$o/bad_label.npy" "<i4" 128 "[10] * n"
expect "runtime/label-out-of-range" 1 "bad_label.npy: entry 0 is 10, not an id in 0..9" "$o/cls" --steps 1 --labels "$o/bad_label.npy"
# i32 ids from a text file, as bytes; ids beyond an embedding's table are refused with their place
cat >"$o/bytes.dp" <<'DP'
param table : f32[256, 4] = normal(1)
input ids : i32[2, 8]
loss { return sum(embed(table, ids) * embed(table, ids)) }
DP
printf 'abababababababababababababababab' >"$o/ab.txt"
if "$DPC" "$o/bytes.dp" -o "$o/bytes" >"$o/bytes.log" 2>&1 &&
	"$o/bytes" --steps 1 --lr 0 --quiet --data "$o/ab.txt" --dump-grads "$o/bytes.grads" >>"$o/bytes.log" 2>&1 &&
	python3 - "$o/bytes.grads" >>"$o/bytes.log" 2>&1 <<'PY'; then
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
a, e = h["table"]["data_offsets"]
fmt = "<%d%s" % ((e - a) // (4 if h["table"]["dtype"] == "F32" else 8), "f" if h["table"]["dtype"] == "F32" else "d")
g = struct.unpack(fmt, b[8 + n + a:8 + n + e])
rows = sorted({i // 4 for i, v in enumerate(g) if v != 0})
assert rows == [97, 98], rows
PY
	ok "runtime/text-ids: the gradient reaches exactly the table rows of the bytes in the text"
else
	notok "runtime/text-ids" "$o/bytes.log"
fi
# padding_idx: the same program with and without it, the ids of "abab..." reaching the loss: the
# forward and the loss are the same, row 98 ('b') of the table's gradient is exactly zero with it,
# and every other row has the same bits (finite differences, tests/ops/embed_padding.dp, cannot see
# a gradient that is not the derivative)
for pad in "" ", padding_idx=98"; do
	n=pad${pad:+ded}
	sed "s/embed(table, ids)/embed(table, ids$pad)/g" "$o/bytes.dp" >"$o/$n.dp"
	"$DPC" "$o/$n.dp" -o "$o/$n" >>"$o/padding.log" 2>&1 &&
		"$o/$n" --steps 1 --lr 0 --quiet --data "$o/ab.txt" --dump-grads "$o/$n.grads" --summary-json "$o/$n.json" >>"$o/padding.log" 2>&1
done
if python3 - "$o/pad" "$o/padded" >>"$o/padding.log" 2>&1 <<'PY'; then
import json, struct, sys
def table(path):
    b = open(path + ".grads", "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    m = json.loads(b[8:8 + n])["table"]
    a, e = m["data_offsets"]
    g = struct.unpack("<%df" % ((e - a) // 4), b[8 + n + a:8 + n + e])
    return [g[r * 4:r * 4 + 4] for r in range(256)], json.load(open(path + ".json"))["loss_first"]
(plain, lp), (padded, lq) = table(sys.argv[1]), table(sys.argv[2])
assert lp == lq, (lp, lq)
assert any(plain[98]) and not any(padded[98]), (plain[98], padded[98])
assert any(plain[97]) and all(plain[r] == padded[r] for r in range(256) if r != 98)
PY
	ok "runtime/embed-padding: padding_idx's row has a zero gradient, the loss and the other rows the same bits"
else
	notok "runtime/embed-padding" "$o/padding.log"
fi
"$DPC" tests/ops/embed.dp -o "$o/embed5" >/dev/null 2>&1
expect "runtime/text-id-out-of-range" 1 "ab.txt: entry 0 is 97, not an id in 0..4 of input 'ids'" "$o/embed5" --steps 1 --data "$o/ab.txt"
printf 'abc' >"$o/short.txt"
expect "runtime/text-too-short" 1 "short.txt: 3 bytes do not fill one row of 8 ids of input 'ids'" "$o/bytes" --steps 1 --data "$o/short.txt"
npy "$o/wide.npy" "<f4" 256,31 "[0.0] * n"
expect "runtime/npy-shape-mismatch" 1 "shape \[256, 31\] does not fit input 'x' of shape \[64, 32\]" "$o/resmlp" --steps 1 --data "$o/wide.npy"
npy "$o/half.npy" "<f2" 256,32 "[0.0] * n"
expect "runtime/npy-dtype" 1 "unsupported dtype '<f2'" "$o/resmlp" --steps 1 --data "$o/half.npy"
npy "$o/fortran.npy" "<f4" 256,32 "[0.0] * n" fortran
expect "runtime/npy-fortran" 1 "Fortran-ordered" "$o/resmlp" --steps 1 --data "$o/fortran.npy"
head -c 300 "$o/x.npy" >"$o/short.npy"
expect "runtime/npy-truncated" 1 "short.npy: truncated data" "$o/resmlp" --steps 1 --data "$o/short.npy"
echo "not numpy at all" >"$o/junk.npy"
expect "runtime/npy-bad-magic" 1 "junk.npy: not a .npy file" "$o/resmlp" --steps 1 --data "$o/junk.npy"
expect "runtime/npy-missing" 1 "cannot open $o/missing.npy" "$o/resmlp" --steps 1 --data "$o/missing.npy"
expect "runtime/input-unknown-name" 2 "no input named 'z'" "$o/resmlp" --steps 1 --input z="$o/x.npy"

# corrupt or mismatched parameter files
head -c 100 "$o/a.safetensors" >"$o/cut.safetensors"
expect "runtime/safetensors-truncated" 1 "cut.safetensors" "$o/resmlp" --steps 1 --init "$o/cut.safetensors"
printf '\x0e\x00\x00\x00\x00\x00\x00\x00{"W_in": [1, 2' >"$o/junk.safetensors"
expect "runtime/safetensors-corrupt" 1 "junk.safetensors: corrupt safetensors header" "$o/resmlp" --steps 1 --init "$o/junk.safetensors"
"$o/cls" --steps 1 --quiet --save "$o/cls.safetensors" >/dev/null
expect "runtime/safetensors-foreign-tensor" 1 "cls.safetensors: tensor '.*' is not a parameter of model resmlp" "$o/resmlp" --steps 1 --init "$o/cls.safetensors"

# a wrong gradient fails the check; a diverging run stops with a clear error
expect "runtime/gradcheck-detects-mismatch" 1 "gradcheck: max relative error 1 (threshold 1e-06) FAIL" "$o/kink" --gradcheck
expect "runtime/gradcheck-f32-warning" 0 "not meaningful" "$o/resmlp" --gradcheck --gradcheck-samples 1 --gradcheck-threshold 10
expect "runtime/non-finite-loss" 1 "loss is not finite" "$o/resmlp" --steps 50 --lr 1e12
expect "runtime/bad-steps" 2 "--steps needs an integer" "$o/resmlp" --steps -3
expect "runtime/bad-optimizer" 2 "sgd, adam or adamw" "$o/resmlp" --optimizer rmsprop
expect "runtime/adam-not-compiled" 2 "compile it with dpc --optimizer adam" "$o/resmlp" --steps 5 --optimizer adam
if "$DPC" --optimizer adam samples/resmlp.dp -o "$o/resmlp_adam" >"$o/adam.log" 2>&1; then
	expect "runtime/adam" 0 "adam state" "$o/resmlp_adam" --steps 5 --summary-json "$o/adam.json"
	"$o/resmlp" --steps 1 --quiet --summary-json "$o/sgd.json" >/dev/null
	"$DPC" --emit=schedule --schedule-json "$o/adam.sched.json" --optimizer adam samples/resmlp.dp >/dev/null
	# the moments are planned: the arena grows by two copies of the parameter region, and the
	# executable allocates exactly the plan
	check "runtime/adam-state-planned" python3 -c "import json
a, s, plan = (json.load(open(f)) for f in ('$o/adam.json', '$o/sgd.json', '$o/adam.sched.json'))
peak = plan['peak_device_bytes']
assert a['optimizer'] == 'adam' and plan['optimizer'] == 'adam', a
assert a['peak_device_bytes'] == a['predicted_device_bytes'] == peak['total'], (a, peak)
assert peak['optimizer'] == 2 * peak['params'] > 0, peak
assert a['predicted_device_bytes'] - s['predicted_device_bytes'] == peak['optimizer'], (a, s, peak)"
else
	notok "runtime/adam: compile" "$o/adam.log"
fi
# --profile: the last step's calls summed by label; with one step, its GEMMs
# and kernels are the summary's counts. The unstacked weights' gradients are
# added by the kernels that make them (no acc kernel); a layer's weight and
# bias gradients are made on their own and added by an acc_slice kernel
# each (ir_may_absorb): 2 a layer, 8 layers.
if "$DPC" samples/resmlp.dp -o "$o/prof" >"$o/prof.log" 2>&1 && "$o/prof" --steps 1 --profile --summary-json "$o/prof.json" >"$o/prof.log" 2>&1; then
	check "runtime/profile" python3 - "$o/prof.log" "$o/prof.json" <<'PY'
import json, re, sys
log, s = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
assert "profile of step 1 on the cpu device" in log, log
rows = re.findall(r"^ +([0-9.]+) +([0-9.]+) +(\d+)  (.+)$", log, re.M)
calls = {label: int(n) for _, _, n, label in rows}
gemms = sum(n for l, n in calls.items() if l.startswith("gemm"))
kernels = sum(n for l, n in calls.items() if not l.startswith(("gemm", "copy", "zero", "h2d", "d2h")))
# the step's transfers: its inputs up, its loss down
assert calls.get("h2d input x") == calls.get("h2d input y") == calls.get("d2h loss") == 1, calls
assert gemms == s["gemm_calls"] and kernels == s["kernel_launches"], (calls, s)
assert calls.get("copy", 0) == s["copy_calls"], (calls, s)
assert sum(n for l, n in calls.items() if l.startswith("acc_slice")) == 16, calls
assert not any(l.startswith("acc[") for l in calls), calls
PY
else
	notok "runtime/profile" "$o/prof.log"
fi
# dropout: the share of elements kept is 1 - p, the mask changes with the
# step and the seed and not otherwise; the kept ones carry 1 / (1 - p)
cat >"$o/drop.dp" <<'DP'
const N = 100000
param w : f32[N] = ones
loss { return mean(dropout(w, 0.3)) }
DP
if "$DPC" "$o/drop.dp" -o "$o/drop" >"$o/drop.log" 2>&1 &&
	"$o/drop" --steps 2 --lr 0 --quiet --summary-json "$o/drop.a.json" --dump-grads "$o/drop.g.st" >>"$o/drop.log" 2>&1 &&
	"$o/drop" --steps 2 --lr 0 --quiet --summary-json "$o/drop.b.json" >>"$o/drop.log" 2>&1 &&
	"$o/drop" --steps 2 --lr 0 --quiet --seed 7 --summary-json "$o/drop.c.json" >>"$o/drop.log" 2>&1; then
	check "runtime/dropout-draws" python3 - "$o" <<'PY'
import json, struct, sys
o = sys.argv[1]
a, b, c = (json.load(open(f"{o}/drop.{k}.json")) for k in "abc")
raw = open(f"{o}/drop.g.st", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
m = json.loads(raw[8:8 + n])["w"]
lo, hi = m["data_offsets"]
g = struct.unpack("<%df" % ((hi - lo) // 4), raw[8 + n + lo:8 + n + hi])
kept = [x for x in g if x != 0]
share = len(kept) / len(g)
assert abs(share - 0.7) < 0.01, share
want = 1 / 0.7 / len(g)
assert all(abs(x - want) <= 1e-6 * want for x in kept), (min(kept), max(kept), want)
assert a["loss_first"] == b["loss_first"] and a["loss_last"] == b["loss_last"], (a, b)
assert a["loss_first"] != a["loss_last"], a
assert c["loss_first"] != a["loss_first"], (a, c)
assert abs(a["loss_first"] - 1) < 0.02, a
PY
else
	notok "runtime/dropout-draws" "$o/drop.log"
fi
# report: scalars beside the loss, read after every step into the line and
# the summary; their bytes count in the predicted transfers
cat >"$o/rep.dp" <<'DP'
const B = 16, C = 4
param W : f32[8, C] = normal(0.3)
input x : f32[B, 8]
input y : i32[B]
loss {
  let logits = x @ W
  report two = sum(x * 0) + 2
  report accuracy = mean(cast(argmax(logits), f32) == cast(y, f32))
  return cross_entropy(logits, y)
}
DP
if "$DPC" "$o/rep.dp" -o "$o/rep" >"$o/rep.log" 2>&1 &&
	"$o/rep" --steps 3 --summary-json "$o/rep.json" >"$o/rep.log" 2>&1; then
	check "runtime/report" python3 - "$o/rep.json" "$o/rep.log" <<'PY'
import json, re, sys
s, log = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
r = s["reports"]
assert set(r) == {"two", "accuracy"}, r
assert r["two"] == 2, r
assert 0 <= r["accuracy"] <= 1 and (r["accuracy"] * 16) % 1 == 0, r
line = re.search(r"^step +3/3 .* two 2  accuracy ([0-9.e-]+)$", log, re.M)
assert line and float(line.group(1)) == r["accuracy"], log
assert s["d2h_bytes"] == s["predicted_d2h_bytes"], s
PY
else
	notok "runtime/report" "$o/rep.log"
fi
# --eval: the forward program on every batch, dropout off, nothing updated:
# with dropout it equals the same model without; a trained model evaluates lower
cat >"$o/ev.dp" <<'DP'
const B = 8, H = 16, C = 4
param W : f32[H, C] = normal(0.3)
input x : f32[B, H]
input y : i32[B]
loss {
  let logits = dropout(x, 0.5) @ W
  report accuracy = mean(cast(argmax(logits), f32) == cast(y, f32))
  return cross_entropy(logits, y)
}
DP
sed 's/dropout(x, 0.5)/x/' "$o/ev.dp" >"$o/ev0.dp"
if "$DPC" "$o/ev.dp" -o "$o/ev" >"$o/ev.log" 2>&1 && "$DPC" "$o/ev0.dp" -o "$o/ev0" >>"$o/ev.log" 2>&1 &&
	"$o/ev" --eval --summary-json "$o/ev.a.json" >>"$o/ev.log" 2>&1 &&
	"$o/ev0" --eval --summary-json "$o/ev.b.json" >>"$o/ev.log" 2>&1 &&
	"$o/ev" --steps 200 --lr 0.5 --quiet --save "$o/ev.st" >>"$o/ev.log" 2>&1 &&
	"$o/ev" --eval --init "$o/ev.st" --summary-json "$o/ev.c.json" >>"$o/ev.log" 2>&1 &&
	"$o/ev" --eval --steps 3 --summary-json "$o/ev.d.json" >>"$o/ev.log" 2>&1; then
	check "runtime/eval" python3 - "$o" <<'PY'
import json, sys
o = sys.argv[1]
a, b, c, d = (json.load(open(f"{o}/ev.{k}.json")) for k in "abcd")
assert a["mode"] == "eval" and a["batches"] == 16 and d["batches"] == 3, (a, d)
assert a["loss"] == b["loss"] and a["reports"] == b["reports"], (a, b)
assert c["loss"] < 0.8 * a["loss"], (a, c)
assert c["reports"]["accuracy"] > a["reports"]["accuracy"], (a, c)
PY
else
	notok "runtime/eval" "$o/ev.log"
fi
# buffers: saved and loaded with the parameters, never trained, absent from
# the gradients; `update` applies after each training step and not in --eval;
# training() is 1 in a step and 0 in evaluation. With --lr 0 and one batch,
# an exponential average of a fixed value has a closed form.
cat >"$o/buf.dp" <<'DP'
const B = 4, D = 3
param W : f32[D, D] = normal(0.5)
buffer count : f32[] = zeros
buffer avg : f32[D] = zeros
input x : f32[B, D]
loss {
  let h = x @ W
  update count = count + 1
  update avg = 0.5 * avg + 0.5 * mean(h, 0)
  report seen = count
  report train = training()
  return mse(h, x)
}
DP
npy "$o/buf.x.npy" "<f4" 4,3 "[((k * 7) % 5) / 5 - 0.4 for k in range(n)]"
if "$DPC" "$o/buf.dp" -o "$o/buf" >"$o/buf.log" 2>&1 &&
	"$o/buf" --data "$o/buf.x.npy" --steps 5 --lr 0 --save "$o/buf.st" --dump-grads "$o/buf.g.st" \
		--summary-json "$o/buf.a.json" >>"$o/buf.log" 2>&1 &&
	"$o/buf" --data "$o/buf.x.npy" --eval --init "$o/buf.st" --summary-json "$o/buf.b.json" >>"$o/buf.log" 2>&1 &&
	"$o/buf" --data "$o/buf.x.npy" --steps 2 --lr 0 --init "$o/buf.st" --save "$o/buf.2.st" --quiet >>"$o/buf.log" 2>&1; then
	check "runtime/buffer" python3 - "$o" <<'PY'
import json, struct, sys
o = sys.argv[1]
def st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return {k: struct.unpack("<%df" % ((v["data_offsets"][1] - v["data_offsets"][0]) // 4),
                             b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
p, g, p2 = st(f"{o}/buf.st"), st(f"{o}/buf.g.st"), st(f"{o}/buf.2.st")
a, e = json.load(open(f"{o}/buf.a.json")), json.load(open(f"{o}/buf.b.json"))
log = open(f"{o}/buf.log").read()
assert set(p) == {"W", "count", "avg"} and set(g) == {"W"}, (p.keys(), g.keys())
assert p["count"] == (5.0,) and p2["count"] == (7.0,), (p["count"], p2["count"])
x = [((k * 7) % 5) / 5 - 0.4 for k in range(12)]
W = p["W"]
mean = [sum(x[r * 3 + i] * W[i * 3 + c] for r in range(4) for i in range(3)) / 4 for c in range(3)]
for c in range(3):
    want = (1 - 0.5 ** 5) * mean[c]
    assert abs(p["avg"][c] - want) <= 1e-6 + 1e-5 * abs(want), (p["avg"], want)
assert a["reports"] == {"seen": 4, "train": 1}, a["reports"]
assert e["reports"] == {"seen": 5, "train": 0}, e["reports"]
assert "1 parameter tensors and 2 buffers" in log, log
PY
else
	notok "runtime/buffer" "$o/buf.log"
fi
# update B[l] in a loop: each layer from its own iteration; a layer the loop
# does not reach keeps its value; binomial checkpointing and streaming
# (which recompute the iterations) leave every saved byte the same
cat >"$o/bufl.dp" <<'DP'
const B = 4, H = 3, L = 5
param W : f32[L][H, H] = normal(0.5)
buffer avg : f32[L][H] = zeros
buffer seen : f32[L] = ones
input x : f32[B, H]
loss {
  let h = x
  for l in 0..L {
    h = tanh(h @ W[l])
    update avg[l] = 0.5 * avg[l] + 0.5 * mean(h, 0)
    update seen[l] = seen[l] + 1
  }
  return mse(h, x)
}
DP
sed 's/for l in 0..L {/for l in 0..L - 1 {/' "$o/bufl.dp" >"$o/bufp.dp"
run_bufl() { # NAME DP DPC-FLAGS...
	local name=$1 dp=$2
	shift 2
	"$DPC" "$dp" -o "$o/bufl.$name" "$@" >>"$o/bufl.log" 2>&1 &&
		"$o/bufl.$name" --data "$o/buf.x.npy" --steps 5 --lr "$lr" --quiet --save "$o/bufl.$name.st" >>"$o/bufl.log" 2>&1
}
rm -f "$o/bufl.log"
if lr=0.05 run_bufl none "$o/bufl.dp" --checkpoint none && lr=0.05 run_bufl bin "$o/bufl.dp" --checkpoint binomial --snapshots 2 &&
	lr=0.05 run_bufl str "$o/bufl.dp" --checkpoint binomial --snapshots 2 --stream params &&
	lr=0 run_bufl part "$o/bufp.dp" --checkpoint binomial --snapshots 1 &&
	cmp "$o/bufl.none.st" "$o/bufl.bin.st" >>"$o/bufl.log" 2>&1 && cmp "$o/bufl.none.st" "$o/bufl.str.st" >>"$o/bufl.log" 2>&1; then
	check "runtime/buffer-layers" python3 - "$o" <<'PY'
import json, math, struct, sys
o = sys.argv[1]
b = open(f"{o}/bufl.part.st", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h.pop("__metadata__", None)
p = {k: struct.unpack("<%df" % ((v["data_offsets"][1] - v["data_offsets"][0]) // 4),
                      b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items()}
assert p["seen"] == (6.0, 6.0, 6.0, 6.0, 1.0), p["seen"]
x = [[((r * 3 + c) * 7 % 5) / 5 - 0.4 for c in range(3)] for r in range(4)]
W = p["W"]
for l in range(5):
    if l < 4:
        x = [[math.tanh(sum(row[i] * W[l * 9 + i * 3 + c] for i in range(3))) for c in range(3)] for row in x]
    for c in range(3):
        want = (1 - 0.5 ** 5) * sum(row[c] for row in x) / 4 if l < 4 else 0.0
        got = p["avg"][l * 3 + c]
        assert abs(got - want) <= 1e-6 + 1e-5 * abs(want), (l, c, got, want)
PY
else
	notok "runtime/buffer-layers" "$o/bufl.log"
fi
# the forward program writes the layers; the adjoint and the recomputations
# do not, so nothing is recomputed for the update alone
"$DPC" --emit=grad "$o/bufl.dp" -o "$o/bufl.grad.txt" >>"$o/bufl.log" 2>&1
"$DPC" --emit=ckpt --checkpoint binomial --snapshots 2 "$o/bufl.dp" -o "$o/bufl.ckpt.txt" >>"$o/bufl.log" 2>&1
if [ "$(grep -c 'store_slice %update_' "$o/bufl.grad.txt")" = 2 ] &&
	[ "$(grep -c 'store_slice %update_' "$o/bufl.ckpt.txt")" = 2 ] &&
	! sed -n '/# adjoint/,$p' "$o/bufl.grad.txt" | grep -q tanh; then
	ok "runtime/buffer-layers-forward-only"
else
	notok "runtime/buffer-layers-forward-only" "$o/bufl.grad.txt"
fi
# an update's value may be a loop's result (its carried storage: copied)
cat >"$o/bufc.dp" <<'DP'
const B = 4, H = 3, L = 3
param W : f32[L][H, H] = normal(0.5)
buffer last : f32[B, H] = zeros
input x : f32[B, H]
loss {
  let h = x
  for l in 0..L { h = tanh(h @ W[l]) }
  update last = h
  return mse(h, x)
}
DP
expect "runtime/buffer-loop-result" 0 "bufc: 2 steps" sh -c "'$DPC' '$o/bufc.dp' -o '$o/bufc' && '$o/bufc' --steps 2"
finish
