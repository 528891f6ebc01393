#!/usr/bin/env bash
# The fast paths against the reference kernels (issue 25). The pools are one op
# each (issue 26), the reference an unfold and a max or mean per window. conv2d is one op
# whose gradients read its input and weight, run by oneDNN (f32) or the
# runtime's own unfold-per-image + GEMM path; attention on the CPU is tiles
# of GEMMs with an online softmax. --reference-kernels keeps conv2d as
# unfold + GEMM and attention as dpc's per-row kernels. GEMM tiling and
# another library change the order of sums, so the f32 gradients of both
# builds agree within 1e-4 of each tensor's largest entry, a tensor's scale
# at least 1e-4 of the largest entry of all (a gradient that is zero in
# exact arithmetic, the key bias's, holds rounding noise only), and the
# losses within 1e-4 relative; in f64 within 1e-10. f64 gradcheck and the
# interpreter check of the same programs are tests/gradcheck and tests/unit.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/reference"
mkdir -p "$o"
tol=1e-4 floor=1e-4

# both builds of a program, 2 steps each, first-step gradients compared;
# extra dpc flags after the name
pair() {
	local name=$1 dp=$2 log="$o/$1.log"
	shift 2
	: >"$log"
	"$DPC" --target cpu "$@" "$dp" -o "$o/$name.lib" >>"$log" 2>&1 &&
		"$DPC" --target cpu --reference-kernels "$@" "$dp" -o "$o/$name.ref" >>"$log" 2>&1 &&
		"$o/$name.lib" --steps 2 --quiet --dump-grads "$o/$name.lib.g" --summary-json "$o/$name.lib.json" >>"$log" 2>&1 &&
		"$o/$name.ref" --steps 2 --quiet --dump-grads "$o/$name.ref.g" --summary-json "$o/$name.ref.json" >>"$log" 2>&1 &&
		COMPARE_FLOOR=$floor python3 tests/unit/compare.py "$o/$name.lib.g" "$o/$name.ref.g" $tol "$(json "$o/$name.lib.json" loss_first)" \
			"$(json "$o/$name.ref.json" loss_first)" >>"$log" 2>&1
}

for p in conv2d:tests/ops/conv2d.dp conv2d_groups:tests/ops/conv2d_groups.dp conv2d_strided:tests/ops/conv2d_strided.dp \
	attention:tests/ops/attention.dp attention_tiles:tests/ops/attention_tiles.dp \
	pool:tests/ops/pool.dp inception:samples/inception.dp resnet:samples/resnet.dp dranet:samples/dranet.dp gpt:samples/gpt.dp; do
	name=${p%%:*} dp=${p#*:}
	# the strided convolution's pieces on 3 threads at once, whatever the cores (OMP_NUM_THREADS is taken as given)
	if (if [ "$name" = conv2d_strided ]; then export OMP_NUM_THREADS=3; fi; pair "$name" "$dp"); then
		ok "reference/$name: library and tiled paths within $tol of the reference kernels ($(tail -1 "$o/$name.log"))"
	else
		notok "reference/$name" "$o/$name.log"
	fi
done
# GPT at a length that fills the CPU's 64-row tiles and leaves a partial one;
# and in f64, where the two orders of summation agree to rounding
if pair gpt_tiles samples/gpt.dp -D T=100 -D D=64 -D H=2 -D L=1; then
	ok "reference/gpt_tiles: T=100 in 64-row tiles, within $tol ($(tail -1 "$o/gpt_tiles.log"))"
else
	notok "reference/gpt_tiles" "$o/gpt_tiles.log"
fi
tol=1e-10 floor=1e-6
for p in conv2d:tests/ops/conv2d.dp conv2d_groups:tests/ops/conv2d_groups.dp attention_tiles:tests/ops/attention_tiles.dp gpt_tiles:samples/gpt.dp; do
	name=${p%%:*} dp=${p#*:} size=()
	[ $name = gpt_tiles ] && size=(-D T=100 -D D=64 -D H=2 -D L=1)
	if pair "$name.f64" "$dp" --precision f64 "${size[@]}"; then
		ok "reference/$name.f64: within $tol of the reference kernels in f64 ($(tail -1 "$o/$name.f64.log"))"
	else
		notok "reference/$name.f64" "$o/$name.f64.log"
	fi
done
tol=1e-4 floor=1e-4

# the calls the runtime counted in 2 steps: conv2d.dp has 3 convolutions
# forward and, of its gradients, conv2d_dw for each weight and conv2d_dx for
# the one input that is not the data: 7 a step; attention.dp's two attentions
# with 4 gradient ops each (stats, dq, dk, dv): 10 a step; the reference
# builds none
check "reference/calls: conv2d 7 and attention 10 a step, none in the reference builds" python3 - "$o" <<'PY'
import json, sys
o = sys.argv[1]
j = lambda f: json.load(open(f"{o}/{f}"))
assert j("conv2d.lib.json")["conv_calls"] == 14, j("conv2d.lib.json")["conv_calls"]
assert j("conv2d.ref.json")["conv_calls"] == 0
n = j("attention.lib.json")["attention_calls"]
assert n == 20, n
assert j("attention.ref.json")["attention_calls"] == 0
PY

# the IR: conv2d and its gradient ops, no unfold and no unfolded value kept;
# the reference keeps the unfold
"$DPC" --target cpu --emit=stream tests/ops/conv2d.dp -o "$o/conv.stream" 2>"$o/conv.stream.err"
"$DPC" --target cpu --reference-kernels --emit=grad tests/ops/conv2d.dp -o "$o/conv.ref.grad" 2>>"$o/conv.stream.err"
if grep -q "conv2d_dx" "$o/conv.stream" && grep -q "conv2d_dw" "$o/conv.stream" && ! grep -q "unfold\|fold " "$o/conv.stream" &&
	grep -q "unfold" "$o/conv.ref.grad"; then
	ok "reference/conv-ir: conv2d, conv2d_dx and conv2d_dw, nothing unfolded; the reference unfolds"
else
	notok "reference/conv-ir" "$o/conv.stream.err"
fi
# resnet's store-everything plan keeps no value of an unfolded shape ([N, Ho Wo, C kh kw])
"$DPC" --target cpu --emit=stream samples/resnet.dp -o "$o/resnet.stream" 2>"$o/resnet.stream.err"
"$DPC" --target cpu --reference-kernels --emit=stream samples/resnet.dp -o "$o/resnet.ref.stream" 2>>"$o/resnet.stream.err"
check "reference/resnet-plan: the tape holds no unfolded input, and is smaller than the reference's" python3 - "$o" <<'PY'
import re, sys
o = sys.argv[1]
def plan(f):
    s = open(f"{o}/{f}").read()
    tapes = re.findall(r"^var %tape\S* : \S+\[(.*)\]$", s, re.M)
    return s, tapes, int(re.search(r"tape (\d+)", s).group(1))
s, tapes, tape = plan("resnet.stream")
r, rtapes, rtape = plan("resnet.ref.stream")
# an unfolded value: its last axis C kh kw (36, 72 or 144 in the sample), none of them kept
assert not any(t.split(", ")[-1] in ("36", "72", "144") for t in tapes), tapes
assert any(t.split(", ")[-1] in ("36", "72", "144") for t in rtapes), rtapes
assert tape < rtape, (tape, rtape)
print(tape, rtape)
PY

# dpc's own convolution path (f64, bf16, or f32 without oneDNN) against oneDNN,
# and a missing oneDNN: a warning naming it, then the own path's very bits
if DPC_CONV=own "$o/resnet.lib" --steps 2 --quiet --dump-grads "$o/resnet.own.g" --summary-json "$o/resnet.own.json" \
	>"$o/own.log" 2>&1 && python3 tests/unit/compare.py "$o/resnet.own.g" "$o/resnet.lib.g" $tol >>"$o/own.log" 2>&1; then
	ok "reference/own-conv: dpc's own convolutions within $tol of oneDNN's"
else
	notok "reference/own-conv" "$o/own.log"
fi
DPC_ONEDNN=/nonexistent/libdnnl.so.2 "$o/resnet.lib" --steps 2 --quiet --dump-grads "$o/resnet.missing.g" >"$o/missing.log" 2>&1
if grep -q "warning: oneDNN (libdnnl.so.2.*cannot be opened; convolutions run on dpc's own" "$o/missing.log" &&
	cmp -s "$o/resnet.missing.g" "$o/resnet.own.g"; then
	ok "reference/missing-onednn: a warning naming libdnnl.so.2, then the own path's gradients bit for bit"
else
	notok "reference/missing-onednn" "$o/missing.log"
fi

# attention's tiles are split between threads, each computed whole by one:
# the same bits at 1 and 2 threads
OMP_NUM_THREADS=1 "$o/attention_tiles.lib" --steps 2 --quiet --dump-grads "$o/at1.g" >"$o/threads.log" 2>&1
OMP_NUM_THREADS=2 "$o/attention_tiles.lib" --steps 2 --quiet --dump-grads "$o/at2.g" >>"$o/threads.log" 2>&1
check "reference/attention-threads: the same bits on 1 and 2 threads" cmp "$o/at1.g" "$o/at2.g"

# a convolution cuDNN cannot describe (2^31 elements or more) takes unfold +
# GEMM on the cuda target, and -v says where and why; on the CPU it stays one op
cat >"$o/huge.dp" <<'DP'
param w : f32[1, 1, 3, 3] = normal(0.1)
input x : f32[1, 1, 65536, 32768]
loss {
  let y = conv2d(x, w, pad=1)
  return mean(y)
}
DP
expect "reference/refused-conv: -v names the convolution that takes the reference path" 0 \
	"huge.dp:4:11: note: conv2d as unfold + GEMM: f32\[1, 1, 65536, 32768\] has 2^31 or more elements, more than cuDNN takes" \
	"$DPC" --target cuda -v --emit=ir "$o/huge.dp" -o "$o/huge.ir"
if grep -q "unfold" "$o/huge.ir" && "$DPC" --target cpu --emit=ir "$o/huge.dp" -o "$o/huge.cpu.ir" 2>/dev/null &&
	grep -q "conv2d" "$o/huge.cpu.ir" && ! grep -q "unfold" "$o/huge.cpu.ir"; then
	ok "reference/refused-conv-ir: unfold on cuda, one conv2d op on the CPU"
else
	notok "reference/refused-conv-ir"
fi

# on the GPU attention goes where the cost model prices it cheaper, and -v says which (f32 here: dpc's
# FMA kernels; DPC_ATTN_GEMM=on takes GEMMs); with dpc's own kernels (DPC_ATTN_GEMM=off), -v names an
# attention that they do not take (bf16 heads of 2 here), and none in bf16 at heads 32 and 64 wide
DPC_ATTN_GEMM=off expect "reference/attention-note: -v names an attention on the tiled kernels" 0 \
	"attention.dp:11:11: note: attention on dpc's tiled kernels (DPC_ATTN_GEMM=off): the tensor-core kernels take bf16 heads of 16 to 128 elements, a multiple of 16, and these are 2 wide" \
	"$DPC" --target cuda -v --precision bf16 --emit=obj tests/ops/attention.dp -o "$o/att.o"
"$DPC" --target cuda -v --emit=obj tests/ops/attention.dp -o "$o/att32.o" >"$o/att32.log" 2>&1
if grep -q "attention.dp:11:11: note: attention on FMA kernels: the cost model's" "$o/att32.log" &&
	grep -q "rt_gemm_items" <(DPC_ATTN_GEMM=on "$DPC" --target cuda --emit=llvm tests/ops/attention.dp) &&
	! grep -q "rt_gemm_items" <("$DPC" --target cuda --emit=llvm tests/ops/attention.dp); then
	ok "reference/attention-gemm: f32 attention on the GPU where the cost model says, -v saying so; GEMMs with DPC_ATTN_GEMM=on"
else
	notok "reference/attention-gemm" "$o/att32.log"
fi
DPC_ATTN_GEMM=off "$DPC" --target cuda -v --precision bf16 --emit=obj tests/ops/attention_heads16.dp -o "$o/ah.o" >"$o/ah.log" 2>&1
if ! grep -q "note: attention" "$o/ah.log" && grep -q "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" \
	<(DPC_ATTN_GEMM=off "$DPC" --target cuda --precision bf16 --emit=ptx tests/ops/attention_heads16.dp); then
	ok "reference/attention-mma: bf16 heads of 32 and 64 on tensor cores (mma.sync m16n8k16 in the PTX), no note"
else
	notok "reference/attention-mma" "$o/ah.log"
fi

# the executables' summary and --profile name the library calls
"$o/conv2d.lib" --steps 2 --quiet --profile >"$o/profile.log" 2>&1
"$o/attention.lib" --steps 2 --quiet --profile >>"$o/profile.log" 2>&1
if grep -q "conv2d_dw \[2,3,7,6\] -> \[2,4,7,6\] 3x3/1" "$o/profile.log" && grep -q "attn_dk \[" "$o/profile.log"; then
	ok "reference/profile: --profile lists conv2d_dw and attn_dk with their shapes"
else
	notok "reference/profile" "$o/profile.log"
fi
finish
