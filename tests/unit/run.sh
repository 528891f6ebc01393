#!/usr/bin/env bash
# The adjoint programs that ad_transform writes, run in the reference
# interpreter on the memory plan's layout, against finite differences; then
# the compiled float64 executable, given the interpreter's parameters and
# inputs, must reproduce its loss and gradients (codegen, fusion, plan and
# runtime against the IR's meaning).
# Attention's programs again on GEMMs (DPC_ATTN_GEMM=5: the GPU's lowering,
# here in blocks of 5 query rows, so that every block path runs), and every
# program with its reductions in parts (DPC_CPU_SPLITS=1: the GPU's two
# launches for reductions that would leave it short of threads).
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
# taken FROM TO: the interpreter's dump in FROM (its parameters, gradients, loss and inputs) copied to TO
taken() {
	local f
	cp "$1/params.safetensors" "$1/grads.safetensors" "$1/loss" "$2/" || return 1
	for f in "$1"/*.npy; do
		[ ! -f "$f" ] || cp "$f" "$2/" || return 1
	done
}
# unit PREFIX DP...: each program through irgrad and the compiled executable.
# With $from set, the interpreter's run of the same program under the prefix
# $from is taken instead of running it again (DPC_CPU_SPLITS changes code
# generation only: irgrad's lowering and arithmetic are the same there).
unit() {
	local prefix=$1 name d log dp npy inputs
	shift
	for dp in "$@"; do
		name=$prefix$(basename "$dp" .dp)
		d="$TEST_OUT/irgrad_$name"
		mkdir -p "$d"
		log="$d/log"
		if [ -n "${from+x}" ]; then
			if ! taken "$TEST_OUT/irgrad_$from$(basename "$dp" .dp)" "$d" >"$log" 2>&1; then
				notok "irgrad/$name: the interpreter's run under '$from' not there to take" "$log"
				continue
			fi
		elif "$DPC_BUILD/build/irgrad" "$dp" --dump "$d" >"$log" 2>&1; then
			ok "irgrad/$name: $(sed -n 's/.*\(max relative error .*\)/\1/p' "$log")"
		else
			notok "irgrad/$name" "$log"
			continue
		fi
		inputs=()
		for npy in "$d"/*.npy; do
			[ -f "$npy" ] && inputs+=(--input "$(basename "$npy" .npy)=$npy")
		done
		if "$DPC" --precision f64 "$dp" -o "$d/exe" >"$log" 2>&1 &&
			"$d/exe" --steps 1 --lr 0 --quiet --init "$d/params.safetensors" "${inputs[@]}" \
				--dump-grads "$d/g.safetensors" --summary-json "$d/s.json" >>"$log" 2>&1 &&
			python3 tests/unit/compare.py "$d/g.safetensors" "$d/grads.safetensors" 1e-10 \
				"$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['loss_first'])" "$d/s.json")" \
				"$(cat "$d/loss")" >>"$log" 2>&1; then
			ok "compiled-vs-interpreter/$name: $(tail -1 "$log")"
		else
			notok "compiled-vs-interpreter/$name" "$log"
		fi
	done
}
unit "" tests/ops/*.dp samples/*.dp
# (under make test-sanitize attention.dp and GPT alone: the interpreter on the others takes minutes there)
if $sanitized; then
	DPC_ATTN_GEMM=5 unit attn-gemm- tests/ops/attention.dp samples/gpt.dp
else
	DPC_ATTN_GEMM=5 unit attn-gemm- tests/ops/attention*.dp samples/gpt.dp
fi
# On GEMMs the forward's softmax rows write each row's log-sum-exp (attn_lse,
# kept for the adjoint's stats), and attn_dkv computes dk and dv in one pass
# over the scores: the same bits as attn_lse computed by a pass of its own
# and attn_dk and attn_dv apart (DPC_ATTN_APART=1), and through binomial,
# min-memory and auto schedules, which recompute the attention and its
# attn_lse (f32, 3 steps). The same for the GPU's tensor-core kernels in
# bf16 (Attr.attn.flash: heads of 16 here) on the SIMT emulator, whose
# forward writes the log-sum-exp as it goes, for the GPU's FMA kernels
# in f32 (the same order and ops, attn_fma.c), and for f32 on the tensor
# cores as 3xTF32 (DPC_ATTN_TF32=on, heads of 16).
lse_run() { # NAME DPC-ARGS...: compile and train GPT as $lse_env says, parameters and first gradients kept
	local name=$1 d="$TEST_OUT/$lse_dir"
	shift
	mkdir -p "$d"
	env $lse_env "$DPC" --target cpu "$@" samples/gpt.dp -o "$d/$name" >"$d/$name.log" 2>&1 &&
		"$d/$name" --steps 3 --lr 0.01 --quiet --save "$d/$name.p" --dump-grads "$d/$name.g" >>"$d/$name.log" 2>&1
}
lse_same() { lse_run "$@" && cmp "$TEST_OUT/$lse_dir/$1.p" "$TEST_OUT/$lse_dir/fused.p" && cmp "$TEST_OUT/$lse_dir/$1.g" "$TEST_OUT/$lse_dir/fused.g"; }
for lse_dir in attn_lse attn_flash attn_fma attn_tf32; do
	case $lse_dir in
	attn_lse) lse_env=DPC_ATTN_GEMM=5 lse_args= what="on GEMMs" ;;
	attn_flash) lse_env=DPC_SIMT=1 lse_args="--precision bf16 -D H=2" what="on tensor cores (SIMT)" ;;
	attn_fma) lse_env=DPC_SIMT=1 lse_args= what="in FMA (SIMT)" ;;
	attn_tf32) lse_env="DPC_SIMT=1 DPC_ATTN_TF32=on" lse_args="-D H=2" what="in f32 on tensor cores as 3xTF32 (SIMT)" ;;
	esac
	if lse_run fused $lse_args; then
		DPC_ATTN_APART=1 check "$lse_dir: $what, written by the forward, and attn_dkv, bitwise as their passes apart" \
			lse_same apart $lse_args
		# (under make test-sanitize the schedules on GEMMs alone: the emulator's kernels are the same in each)
		cks="binomial min-memory auto"
		$sanitized && [ $lse_dir != attn_lse ] && cks=
		for ck in $cks; do
			check "$lse_dir: $what, --checkpoint $ck bitwise as store-everything" lse_same $ck $lse_args --checkpoint $ck
		done
	else
		notok "$lse_dir: GPT $what" "$TEST_OUT/$lse_dir/fused.log"
	fi
done
# every reduction in two launches, as the GPU's that leave it short of threads (DPC_CPU_SPLITS)
# (under make test-sanitize on the op programs alone: the samples' reductions are the same kernels)
# (the interpreter's runs are those above)
if $sanitized; then
	from= DPC_CPU_SPLITS=1 unit split- tests/ops/*.dp
else
	from= DPC_CPU_SPLITS=1 unit split- tests/ops/*.dp samples/*.dp
fi
# the binomial checkpoint schedule: valid, optimal, and equal to the closed form
if "$DPC_BUILD/build/binomial" >"$TEST_OUT/binomial.log" 2>&1; then
	grep '^ok' "$TEST_OUT/binomial.log" | sed 's/^ok - /ok - /'
	npass=$((npass + $(grep -c '^ok' "$TEST_OUT/binomial.log")))
else
	notok "binomial" "$TEST_OUT/binomial.log"
fi
# straight-line code's kept set: the fit against every subset
# and what a loop's rows keep (the state replayed or not), against every subset and every (snapshots, rows) shape
if "$DPC_BUILD/build/graph" tests/ckpt/graph.dp tests/ckpt/graph_skip.dp --rows tests/ckpt/rows.dp --rows tests/ckpt/rows_relu.dp \
	--rows tests/ckpt/replay.dp --rows tests/ckpt/replay2.dp >"$TEST_OUT/graph.log" 2>&1; then
	grep '^ok' "$TEST_OUT/graph.log"
	npass=$((npass + $(grep -c '^ok' "$TEST_OUT/graph.log")))
else
	notok "graph" "$TEST_OUT/graph.log"
fi
# the SIMT emulator that runs the GPU's warp-level kernels on the CPU (DPC_SIMT), against the PTX ISA
if "$DPC_BUILD/build/simt" >"$TEST_OUT/simt.log" 2>&1; then
	grep '^ok' "$TEST_OUT/simt.log"
	npass=$((npass + $(grep -c '^ok' "$TEST_OUT/simt.log")))
else
	notok "simt" "$TEST_OUT/simt.log"
fi
# the optimiser of what the adjoint keeps, against brute force on random DAGs (a quarter of them under make test-sanitize)
quick=
$sanitized && quick=--quick
if "$DPC_BUILD/build/select" $quick >"$TEST_OUT/select.log" 2>&1; then
	grep '^ok' "$TEST_OUT/select.log"
	npass=$((npass + $(grep -c '^ok' "$TEST_OUT/select.log")))
else
	notok "select" "$TEST_OUT/select.log"
fi
finish
