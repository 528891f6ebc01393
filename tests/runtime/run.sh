#!/usr/bin/env bash
# The training executable's files and failure modes: .npy data, safetensors
# save / load / dump, atomic writes, gradient check failures, bad input.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/rt"
mkdir -p "$o"
npy() { python3 tests/runtime/npy.py "$@"; }


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
finish
