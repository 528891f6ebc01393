#!/usr/bin/env bash
# Gradients against central finite differences, in float64 builds: one small
# program per op (tests/ops) and every sample. The executable's --gradcheck
# exits non-zero above the threshold; we also read the reported error.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
limit=1e-6
# (under make test-sanitize the op programs and GPT: tests/unit builds and runs every sample in f64 there)
programs="tests/ops/*.dp samples/*.dp"
$sanitized && programs="tests/ops/*.dp samples/gpt.dp"
for dp in $programs; do
	name=$(basename "$dp" .dp)
	exe="$TEST_OUT/gc_$name"
	log="$exe.log"
	if ! "$DPC" --precision f64 "$dp" -o "$exe" >"$log" 2>&1; then
		notok "gradcheck/$name: compile" "$log"
		continue
	fi
	if ! "$exe" --gradcheck --gradcheck-threshold $limit >"$log" 2>&1; then
		notok "gradcheck/$name" "$log"
		continue
	fi
	err=$(sed -n 's/.*max relative error \([0-9.e+-]*\).*/\1/p' "$log" | tail -1)
	if [ -n "$err" ] && awk -v e="$err" -v l=$limit 'BEGIN { exit !(e < l) }'; then
		ok "gradcheck/$name (max rel. error $err)"
	else
		notok "gradcheck/$name: no error figure below $limit" "$log"
	fi
done

# simt LABEL SYMBOLS DP...: each program's kernels as the GPU runs them, on the SIMT emulator
# (DPC_SIMT=1, docs/codegen.md; SYMBOLS: a pattern its executable's emulated threads match): against
# finite differences in f64, and their gradients against the CPU's own kernels' (f64 within 1e-12, f32
# within 1e-5 of the largest)
simt() {
	local label=$1 symbols=$2 dp name exe log
	shift 2
	for dp in "$@"; do
		name=$(basename "$dp" .dp)
		exe="$TEST_OUT/simt_$name"
		log="$exe.log"
		if DPC_SIMT=1 "$DPC" --precision f64 "$dp" -o "$exe" >"$log" 2>&1 &&
			nm "$exe" | grep -Eq "$symbols" &&
			"$exe" --gradcheck --gradcheck-threshold $limit >>"$log" 2>&1 &&
			"$DPC" --precision f64 "$dp" -o "$exe.cpu" >>"$log" 2>&1 &&
			"$exe" --steps 1 --lr 0 --quiet --dump-grads "$exe.g" >>"$log" 2>&1 &&
			"$exe.cpu" --steps 1 --lr 0 --quiet --dump-grads "$exe.cpu.g" >>"$log" 2>&1 &&
			python3 tests/unit/compare.py "$exe.g" "$exe.cpu.g" 1e-12 >>"$log" 2>&1 &&
			DPC_SIMT=1 "$DPC" "$dp" -o "$exe.f32" >>"$log" 2>&1 &&
			"$DPC" "$dp" -o "$exe.f32.cpu" >>"$log" 2>&1 &&
			"$exe.f32" --steps 1 --lr 0 --quiet --dump-grads "$exe.f32.g" >>"$log" 2>&1 &&
			"$exe.f32.cpu" --steps 1 --lr 0 --quiet --dump-grads "$exe.f32.cpu.g" >>"$log" 2>&1 &&
			COMPARE_FLOOR=1e-4 python3 tests/unit/compare.py "$exe.f32.g" "$exe.f32.cpu.g" 1e-5 >>"$log" 2>&1; then
			ok "gradcheck/$label on the SIMT emulator: $name ($(sed -n 's/.*max relative error \([0-9.e+-]*\) (threshold.*/\1/p' "$log" | tail -1); f64 $(grep 'max difference' "$log" | head -1 | cut -d' ' -f3), f32 $(grep 'max difference' "$log" | tail -1 | cut -d' ' -f3) from the CPU's)"
		else
			notok "gradcheck/$label on the SIMT emulator: $name" "$log"
		fi
	done
}
# The GPU's row kernels (softmax, log_softmax, layernorm and their gradients, cross_entropy's gradient),
# their lanes sharing each row, 16-byte vectors where a row is aligned and elements where not; under
# make test-sanitize rows.dp and GPT alone (rows.dp has every one of these kernels at every width)
simt_rows="tests/ops/rows.dp tests/ops/layernorm.dp tests/ops/softmax.dp tests/ops/log_softmax.dp tests/ops/cross_entropy.dp tests/ops/next_token.dp samples/gpt.dp"
$sanitized && simt_rows="tests/ops/rows.dp samples/gpt.dp"
simt rows '_(layernorm|softmax|log_softmax|cross_entropy_grad)[^ ]*_thread$' $simt_rows
# The GPU's attention in FMA (f32 and f64, attn_fma.c: the forward with its log-sum-exp, attn_dkv,
# attn_dq), heads of 2 and 3 (causal and not), 8, 16 and 128 (and 80), rows past a tile's end, lanes
# 1 to 32 a row; GPT's above; under make test-sanitize attention.dp and attention_tiles.dp alone
simt_attn="tests/ops/attention.dp tests/ops/attention_tiles.dp tests/ops/attention_heads16.dp tests/ops/attention_heads128.dp"
$sanitized && simt_attn="tests/ops/attention.dp tests/ops/attention_tiles.dp"
simt "attention in FMA" '_attn_dkv[^ ]*_thread$' $simt_attn
# f32 attention on tensor cores as 3xTF32 (DPC_ATTN_TF32=on, attention.c; heads of 16 to 112, a
# multiple of 16: the two programs' heads of 32, 64 and 80, GPT's of 16): no f64 of it, so against the
# CPU's own kernels in f32 alone, within 1e-5 of the largest (each product of TF32's high parts alone,
# 1xTF32, is 6e-4 off on attention_heads16.dp)
simt_tf32() { # NAME DP DEFS...
	local name=$1 dp=$2 exe="$TEST_OUT/tf32_$1" log="$TEST_OUT/tf32_$1.log"
	shift 2
	if DPC_SIMT=1 DPC_ATTN_TF32=on "$DPC" "$@" "$dp" -o "$exe" >"$log" 2>&1 &&
		nm "$exe" | grep -q rt_simt_mma_tf32 &&
		"$DPC" "$@" "$dp" -o "$exe.cpu" >>"$log" 2>&1 &&
		"$exe" --steps 1 --lr 0 --quiet --dump-grads "$exe.g" >>"$log" 2>&1 &&
		"$exe.cpu" --steps 1 --lr 0 --quiet --dump-grads "$exe.cpu.g" >>"$log" 2>&1 &&
		COMPARE_FLOOR=1e-4 python3 tests/unit/compare.py "$exe.g" "$exe.cpu.g" 1e-5 >>"$log" 2>&1; then
		ok "gradcheck/attention as 3xTF32 on the SIMT emulator: $name (f32 $(grep 'max difference' "$log" | tail -1 | cut -d' ' -f3) from the CPU's)"
	else
		notok "gradcheck/attention as 3xTF32 on the SIMT emulator: $name" "$log"
	fi
}
simt_tf32 attention_heads16 tests/ops/attention_heads16.dp
$sanitized || simt_tf32 attention_heads128 tests/ops/attention_heads128.dp
$sanitized || simt_tf32 gpt samples/gpt.dp -D H=2
finish
