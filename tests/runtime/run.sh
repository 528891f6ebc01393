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
make -s runtime/libdprt.a >/dev/null
build() { cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -O2 -pthread -Iruntime \
	tests/runtime/fake_model.c "$@" runtime/libdprt.a -lopenblas -lpthread -lm >>"$f.build.log" 2>&1; }
rm -f "$f.build.log"
if build -o "$f.f32" && build -DREAL=double -o "$f.f64" && build -DREAL=double -DBREAK_GRAD -o "$f.broken" &&
	build -DBAD_DESC -o "$f.baddesc" && [ ! -s "$f.build.log" ]; then
	ok "runtime/fake-build-without-warnings"
else
	notok "runtime/fake-build-without-warnings" "$f.build.log"
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
"$f.f32" --steps 300 --optimizer adam --lr 0.02 --quiet --summary-json "$f.adam.json" >/dev/null
check "runtime/fake-adam" summary "$f.adam.json" "loss_last < loss_first / 10 and
	peak_device_bytes == predicted_device_bytes == 680 + 2 * 40 and optimizer == 'adam'"
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

# command line and internal errors
expect "runtime/fake-unknown-option" 2 "unknown option '--bogus'" "$f.f32" --bogus
expect "runtime/fake-bad-lr" 2 "--lr needs a non-negative number" "$f.f32" --lr fast
expect "runtime/fake-missing-value" 2 "--steps needs a value" "$f.f32" --steps
expect "runtime/fake-non-finite" 1 "loss is not finite at step" "$f.f32" --steps 100 --lr 1e30 --summary-json "$f.nan.json"
check "runtime/fake-non-finite-summary" summary "$f.nan.json" "loss_last is None and steps < 100"
expect "runtime/fake-desc-mismatch" 70 "model description line 12 not understood: stream W 3" "$f.baddesc"


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
npy "$o/bad_label.npy" "<i4" 128 "[10] * n"
expect "runtime/label-out-of-range" 1 "bad_label.npy: entry 0 is 10, not a class in 0..9" "$o/cls" --steps 1 --labels "$o/bad_label.npy"
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
expect "runtime/safetensors-missing-tensor" 1 "no tensor named 'W_in'" "$o/resmlp" --steps 1 --init "$o/cls.safetensors"

# a wrong gradient fails the check; a diverging run stops with a clear error
expect "runtime/gradcheck-detects-mismatch" 1 "gradcheck: max relative error 1 (threshold 1e-06) FAIL" "$o/kink" --gradcheck
expect "runtime/gradcheck-f32-warning" 0 "not meaningful" "$o/resmlp" --gradcheck --gradcheck-samples 1 --gradcheck-threshold 10
expect "runtime/non-finite-loss" 1 "loss is not finite" "$o/resmlp" --steps 50 --lr 1e12
expect "runtime/bad-steps" 2 "--steps needs an integer" "$o/resmlp" --steps -3
expect "runtime/bad-optimizer" 2 "sgd or adam" "$o/resmlp" --optimizer rmsprop
expect "runtime/adam" 0 "adam state" "$o/resmlp" --steps 5 --optimizer adam
# --profile: the last step's calls summed by label; with one step, its GEMMs
# and kernels are the summary's counts. The per-layer weight and bias
# gradients are added by their GEMMs (beta = 1): no acc_slice kernel is left.
if "$DPC" samples/resmlp.dp -o "$o/prof" >"$o/prof.log" 2>&1 && "$o/prof" --steps 1 --profile --summary-json "$o/prof.json" >"$o/prof.log" 2>&1; then
	check "runtime/profile" python3 - "$o/prof.log" "$o/prof.json" <<'PY'
import json, re, sys
log, s = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
assert "profile of step 1 on the cpu device" in log, log
rows = re.findall(r"^ +([0-9.]+) +([0-9.]+) +(\d+)  (.+)$", log, re.M)
calls = {label: int(n) for _, _, n, label in rows}
gemms = sum(n for l, n in calls.items() if l.startswith("gemm"))
kernels = sum(n for l, n in calls.items() if not l.startswith(("gemm", "copy", "zero")))
assert gemms == s["gemm_calls"] and kernels == s["kernel_launches"], (calls, s)
assert not any(l.startswith("acc") for l in calls) and any(l.endswith("+=") for l in calls), calls
PY
else
	notok "runtime/profile" "$o/prof.log"
fi
finish
