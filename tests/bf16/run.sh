#!/usr/bin/env bash
# --precision bf16 on the CPU: reals stored in 2 bytes, computed in f32. Rounding is to nearest even, in the runtime's
# conversions and in the kernels; every op program's gradients stay within
# 3% of the f32 build's at the same (bf16-exact) parameters; samples train
# in half the device memory.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/bf16"
mkdir -p "$o"

# the runtime's rounding: F32 values in, BF16 bits out (--init, then --save)
cat >"$o/round.dp" <<'DP'
param w : f32[6] = zeros
input x : f32[6]
loss { return sum(w * x * 1.00390625) }
DP
python3 - "$o" <<'PY'
import json, struct, sys
o = sys.argv[1]
# 1; a tie rounding down to even; a tie rounding up to even; just above a tie; -2.5; 1 + 2^-7
vals = [1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -2.5, 1 + 2**-7]
h = json.dumps({"w": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]}}).encode()
h += b" " * (-len(h) % 8)
open(f"{o}/round.st", "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<6f", *vals))
# x: ones, as a .npy of one row
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }"
hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
open(f"{o}/ones.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + struct.pack("<6f", *[1.0] * 6))
PY
if "$DPC" --target cpu --precision bf16 "$o/round.dp" -o "$o/round" >"$o/round.log" 2>&1 &&
	"$o/round" --steps 1 --lr 0 --quiet --init "$o/round.st" --input x="$o/ones.npy" --save "$o/round.out.st" \
		--dump-grads "$o/round.g.st" >>"$o/round.log" 2>&1; then
	check "bf16/rounding" python3 - "$o" <<'PY'
import json, struct, sys
o = sys.argv[1]
def bits(path, name):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    m = json.loads(b[8:8 + n])[name]
    assert m["dtype"] == "BF16", m
    a, e = m["data_offsets"]
    return struct.unpack("<%dH" % ((e - a) // 2), b[8 + n + a:8 + n + e])
w = bits(f"{o}/round.out.st", "w")
assert w == (0x3f80, 0x3f80, 0x3f82, 0x3f81, 0xc020, 0x3f81), [hex(x) for x in w]
# d/dw = x 1.00390625 = 1 + 2^-8, a tie: to even, 1.0
g = bits(f"{o}/round.g.st", "w")
assert g == (0x3f80,) * 6, [hex(x) for x in g]
PY
else
	notok "bf16/rounding" "$o/round.log"
fi
# the kernels round to nearest even too: t = (x 1.0078125) 1.00390625 at
# x = 1 is 1 + 3 2^-8 + 2^-15 in f32, above the tie between bf16 0x3f81 and
# 0x3f82; truncating would store 0x3f81. d/dw of sum(w t) is t as stored.
cat >"$o/kround.dp" <<'DP'
param w : f32[6] = zeros
input x : f32[6]
loss { return sum(w * ((x * 1.0078125) * 1.00390625)) }
DP
if "$DPC" --target cpu --precision bf16 "$o/kround.dp" -o "$o/kround" >"$o/kround.log" 2>&1 &&
	"$o/kround" --steps 1 --lr 0 --quiet --input x="$o/ones.npy" --dump-grads "$o/kround.g.st" >>"$o/kround.log" 2>&1; then
	check "bf16/kernel-rounding" python3 - "$o/kround.g.st" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
m = json.loads(b[8:8 + n])["w"]
a, e = m["data_offsets"]
g = struct.unpack("<6H", b[8 + n + a:8 + n + e])
assert g == (0x3f82,) * 6, [hex(x) for x in g]
PY
else
	notok "bf16/kernel-rounding" "$o/kround.log"
fi

# every op program: bf16 gradients against f32's at the bf16 run's parameters; then attention's again
# on GEMMs (DPC_ATTN_GEMM=5, the GPU's lowering: scores in f32, P and dS rounded to bf16), in blocks of 5
# rows, and on the GPU's tensor-core kernels, run on the SIMT emulator (DPC_SIMT=1: heads of 32 and 64,
# of 128 and 80 (past 48 KiB of shared memory on the GPU), and GPT's causal heads of 16, whose key bias's gradient, zero in exact arithmetic, is rounding noise
# up to 1e-4 of the largest; the executable must hold them)
# (under make test-sanitize attention on GEMMs on attention.dp alone, and the emulator on heads of 16 and GPT)
extra="attn-gemm:tests/ops/attention.dp attn-gemm:tests/ops/attention_heads16.dp attn-gemm:tests/ops/attention_tiles.dp
	simt:tests/ops/attention_heads16.dp simt:tests/ops/attention_heads128.dp simt-gpt:samples/gpt.dp"
$sanitized && extra="attn-gemm:tests/ops/attention.dp simt:tests/ops/attention_heads16.dp simt-gpt:samples/gpt.dp"
for dp in tests/ops/*.dp $extra; do
	gemm= simt= defs= floor=1e-6
	case $dp in
	attn-gemm:*) gemm=5 dp=${dp#attn-gemm:} ;;
	simt:*) simt=1 dp=${dp#simt:} ;;
	simt-gpt:*) simt=1 dp=${dp#simt-gpt:} defs="-D H=2" floor=1e-4 ;;
	esac
	n=$(basename "$dp" .dp)${gemm:+-gemm}${simt:+-simt}
	b="$o/b_$n" f="$o/f_$n"
	if DPC_ATTN_GEMM=$gemm DPC_SIMT=$simt "$DPC" --target cpu --precision bf16 $defs "$dp" -o "$b" >"$b.log" 2>&1 &&
		{ [ -z "$simt" ] || nm "$b" | grep -q 'attn_dq.*_thread' || { echo "no tensor-core kernel on the emulator" >>"$b.log"; false; }; } &&
		"$DPC" --target cpu $defs "$dp" -o "$f" >>"$b.log" 2>&1 &&
		"$b" --steps 1 --lr 0 --quiet --save "$b.p.st" --dump-grads "$b.g.st" >>"$b.log" 2>&1 &&
		"$f" --steps 1 --lr 0 --quiet --init "$b.p.st" --dump-grads "$f.g.st" >>"$b.log" 2>&1 &&
		COMPARE_FLOOR=$floor python3 tests/unit/compare.py "$b.g.st" "$f.g.st" 0.03 >>"$b.log" 2>&1; then
		ok "bf16/$n ($(tail -1 "$b.log"))"
	else
		notok "bf16/$n" "$b.log"
	fi
done

# samples train in bf16 (the mean loss of the last 10 of 60 steps 5% below the first 10's), in
# about half the device memory of f32
for s in resmlp classifier gpt resnet; do
	b="$o/train_$s"
	args="--steps 60 --lr 0.01"
	case $s in classifier) args="--steps 60 --lr 0.5" ;; gpt) args="--steps 60 --lr 0.03 --data docs/language.md" ;; resnet) args="--steps 60 --lr 0.1" ;; esac
	if "$DPC" --target cpu --precision bf16 "samples/$s.dp" -o "$b" >"$b.log" 2>&1 && "$DPC" --target cpu "samples/$s.dp" -o "$b.f32" >>"$b.log" 2>&1 &&
		"$b" $args --quiet --summary-json "$b.json" --log-json "$b.jsonl" >>"$b.log" 2>&1 &&
		"$b.f32" --steps 1 --quiet --summary-json "$b.f32.json" >>"$b.log" 2>&1; then
		check "bf16/train-$s" python3 - "$b.json" "$b.f32.json" "$b.jsonl" <<'PY'
import json, sys
s, f = (json.load(open(p)) for p in sys.argv[1:3])
assert s["precision"] == "bf16", s
# the loss falls: the last 10 steps' mean against the first 10's (one batch's loss is noisy in bf16)
loss = [json.loads(l)["loss"] for l in open(sys.argv[3])]
first, last = sum(loss[:10]) / 10, sum(loss[-10:]) / 10
assert len(loss) == 60 and last < 0.95 * first, (first, last)
assert s["peak_device_bytes"] == s["predicted_device_bytes"], s
assert s["peak_device_bytes"] < 0.6 * f["peak_device_bytes"], (s["peak_device_bytes"], f["peak_device_bytes"])
PY
	else
		notok "bf16/train-$s" "$b.log"
	fi
done
# checkpointing leaves bf16's bits as store-everything's: a fused kernel
# rounds each value it passes on as its storage would, so a value computed
# again beside its reader (min-memory) or in another run of ops is the
# same (before 2026-11-29, resmlp's and GPT's parameters differed after two
# steps under min-memory)
for s in resmlp gpt resnet; do
	c="$o/ck_$s"
	args="--steps 2 --lr 0.01 --quiet"
	if "$DPC" --target cpu --precision bf16 "samples/$s.dp" -o "$c.none" >"$c.log" 2>&1 &&
		"$c.none" $args --save "$c.none.st" >>"$c.log" 2>&1; then
		for ck in binomial min-memory auto; do
			check "bf16/checkpoint-$s: --checkpoint $ck bitwise as store-everything after two steps" bash -c \
				"'$DPC' --target cpu --precision bf16 --checkpoint $ck samples/$s.dp -o '$c.$ck' && '$c.$ck' $args --save '$c.$ck.st' && cmp '$c.none.st' '$c.$ck.st'"
		done
	else
		notok "bf16/checkpoint-$s" "$c.log"
	fi
done
# ---- element types per value: bf16 and f64 beside f32 in one program ----
# --precision bf16 is a rename: every f32 stored as bf16. The same program
# written with bf16 types and compiled at the default precision trains to
# the same bits.
for s in gpt resnet; do
	r="$o/rename_$s"
	sed 's/\bf32\b/bf16/g' "samples/$s.dp" >"$r.dp"
	args="--steps 3 --lr 0.01 --quiet"
	[ "$s" = gpt ] && args="$args --data docs/language.md"
	if "$DPC" --target cpu --precision bf16 "samples/$s.dp" -o "$r.a" >"$r.log" 2>&1 && "$DPC" --target cpu "$r.dp" -o "$r.b" >>"$r.log" 2>&1 &&
		"$r.a" $args --save "$r.a.st" --summary-json "$r.a.json" >>"$r.log" 2>&1 &&
		"$r.b" $args --save "$r.b.st" --summary-json "$r.b.json" >>"$r.log" 2>&1; then
		check "dtype/rename-$s" python3 - "$r" <<'PY'
import json, struct, sys
r = sys.argv[1]
a, b = (json.load(open(f"{r}.{k}.json")) for k in "ab")
assert a["loss_last"] == b["loss_last"] and a["loss_first"] == b["loss_first"], (a, b)
assert a["peak_device_bytes"] == b["peak_device_bytes"], (a["peak_device_bytes"], b["peak_device_bytes"])
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    del h["__metadata__"]  # names the model, which differs
    return h, b[8 + n:]
assert tensors(f"{r}.a.st") == tensors(f"{r}.b.st"), "saved parameters differ"
PY
	else
		notok "dtype/rename-$s" "$r.log"
	fi
done

# a mixed program (bf16 GEMM, f32 activations, f64 scale and loss): its
# gradients against the f64 build's at the same parameters, and each tensor
# saved in its own type
m="$o/mixed"
if "$DPC" --target cpu tests/ops/mixed.dp -o "$m" >"$m.log" 2>&1 && "$DPC" --target cpu --precision f64 tests/ops/mixed.dp -o "$m.f64" >>"$m.log" 2>&1 &&
	"$m" --steps 1 --lr 0 --quiet --save "$m.p.st" --dump-grads "$m.g.st" >>"$m.log" 2>&1 &&
	"$m.f64" --steps 1 --lr 0 --quiet --init "$m.p.st" --dump-grads "$m.f64.g.st" >>"$m.log" 2>&1 &&
	python3 tests/unit/compare.py "$m.g.st" "$m.f64.g.st" 0.03 >>"$m.log" 2>&1; then
	check "dtype/mixed ($(tail -1 "$m.log"))" python3 - "$m" <<'PY'
import json, struct, sys
m = sys.argv[1]
for f in ("p", "g"):
    b = open(f"{m}.{f}.st", "rb").read()
    h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
    got = {k: v["dtype"] for k, v in h.items() if k != "__metadata__"}
    assert got == {"W": "BF16", "b": "F32", "s": "F64", "P": "F64"}, got
PY
else
	notok "dtype/mixed" "$m.log"
fi

# exact bits: the gradient of a bf16 parameter read through cast(w, f32) is
# the f32 gradient rounded to nearest even (t = 1 + 3 2^-8 + 2^-15 lies above
# the tie between 0x3f81 and 0x3f82; truncation gives 0x3f81); an f64
# parameter keeps 1 + 2^-40 and its gradient 2v = 2 + 2^-39, which f32 would lose
c="$o/exact"
cat >"$c.dp" <<'DP'
param w : bf16[6] = zeros
param v : f64[2] = ones
input x : f32[6]
loss { return sum(cast(w, f32) * ((x * 1.0078125) * 1.00390625)) + cast(sum(v * v), f32) }
DP
python3 - "$c" <<'PY'
import json, struct, sys
c = sys.argv[1]
h = json.dumps({"v": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]},
                "w": {"dtype": "F32", "shape": [6], "data_offsets": [16, 40]}}).encode()
h += b" " * (-len(h) % 8)
open(f"{c}.init.st", "wb").write(struct.pack("<Q", len(h)) + h + struct.pack("<2d", 1 + 2**-40, 1 + 2**-40) + bytes(24))
PY
if "$DPC" --target cpu "$c.dp" -o "$c" >"$c.log" 2>&1 &&
	"$c" --steps 1 --lr 0 --quiet --init "$c.init.st" --input x="$o/ones.npy" --save "$c.p.st" --dump-grads "$c.g.st" >>"$c.log" 2>&1; then
	check "dtype/exact-bits" python3 - "$c" <<'PY'
import json, struct, sys
c = sys.argv[1]
def read(path, name, fmt):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    m = json.loads(b[8:8 + n])[name]
    a, e = m["data_offsets"]
    return m["dtype"], struct.unpack("<%d%s" % ((e - a) // struct.calcsize(fmt), fmt), b[8 + n + a:8 + n + e])
assert read(f"{c}.g.st", "w", "H") == ("BF16", (0x3f82,) * 6), read(f"{c}.g.st", "w", "H")
assert read(f"{c}.p.st", "v", "d") == ("F64", (1 + 2**-40,) * 2), read(f"{c}.p.st", "v", "d")
assert read(f"{c}.g.st", "v", "d") == ("F64", (2 + 2**-39,) * 2), read(f"{c}.g.st", "v", "d")
PY
else
	notok "dtype/exact-bits" "$c.log"
fi

expect "bf16/gradcheck-warns" 1 "in a bfloat16 build is not meaningful" "$o/train_classifier" --gradcheck
finish
