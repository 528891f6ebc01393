#!/usr/bin/env bash
# The short GPU script (issue 39): on the GPU machine, from the gpu_build/
# that `bash tests/gpu/run.sh build` made here (carry gpu_build/), most
# important first, within 8 minutes on one H100 or H200:
#  0. first, 30 s of correctness: the GPT sample's --gradcheck in f64 on the
#     GPU, and attention's fused passes bitwise as the passes apart (on GEMMs
#     in f32 and bf16, and on the tensor-core kernels), and the GEMMs'
#     epilogues (cuBLASLt) against apart;
#  1. GPT-2 124M fp32 (B = 8): dpc, PyTorch eager and torch.compile;
#  2. GPT-2 124M bf16 (B = 32): the same;
#  3. ResNet-56 (B = 128): the same;
#  4. GPT-2's GEMMs one a call (the default) against strided-batched calls
#     (DPC_GEMM_BATCHED=1); the cost model's choices in 1 and 2 against the
#     other way: fp32 attention on GEMMs against dpc's FMA kernels, bf16 on
#     dpc's tensor-core kernels against GEMMs, bf16's vocabulary GEMMs split
#     at 50,256 against whole (DPC_GEMM_SPLIT=off), and each with its GEMMs'
#     epilogues (bias, GELU, GELU's derivative: cuBLASLt) against apart
#     (DPC_EPILOGUE=off);
#  5. the streamed resmlp (1 GiB of weights in 128 MiB) against
#     max(resident, bytes / link);
#  6. predicted against measured, per kernel, for 1 to 3 (dpc --profile
#     beside the cost model's plan, bench/kernels_vs.py);
#  7. PyTorch eager's GPT-2 steps by kind of kernel (GEMMs, attention, the
#     rest: bench/nets_torch.py --profile), beside dpc's.
# Every figure goes to one markdown file, $OUT/gpu_quick.md (else
# /tmp/gpu_quick.md), that bench/RESULTS.md can take as it is. Each part has
# a time limit, so that a slow one leaves time for the rest.
#   QUICK_STEPS (default 10): timed steps of each run
set -u
cd "$(dirname "$0")/.."
B=gpu_build
steps=${QUICK_STEPS:-10}
out=${OUT:-/tmp}/gpu_quick.md
log=${OUT:-/tmp}/gpu_quick.log
: >"$out"
: >"$log"
say() { echo "$*" | tee -a "$out"; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$gpu" in *H200*) kind=h200 ;; *) kind=h100 ;; esac
say "## bench/gpu_quick.sh — $(date -u +%Y-%m-%d), one ${gpu:-unknown GPU} (driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1))"
say ""
say "PyTorch $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo missing); $steps timed steps each; the cost model's predictions for the $kind."
say ""

field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }

# first, whether what is timed computes the right thing: the GPT sample's gradients against finite
# differences in f64 on the GPU, and attention's fused passes bitwise as the passes apart
say "### correctness first"
say ""
if timeout 60 "$B/gpt.cuda64" --gradcheck >>"$log" 2>&1; then say "- gpt --gradcheck in f64 on the GPU: passed"; else say "- gpt --gradcheck in f64 on the GPU: **FAILED** (gpu_quick.log)"; fi
for x in cuda cudabf cudabf_mma cuda_fma cuda_tf32; do
	if timeout 30 "$B/gpt.$x" --steps 3 --lr 0.01 --quiet --save /tmp/q_ga.p >>"$log" 2>&1 &&
		timeout 30 "$B/gpt.${x}_apart" --steps 3 --lr 0.01 --quiet --save /tmp/q_gap.p >>"$log" 2>&1 && cmp -s /tmp/q_ga.p /tmp/q_gap.p; then
		say "- gpt.$x: attention's kept log-sum-exp and attn_dkv bitwise as the passes apart"
	else
		say "- gpt.$x: attention's fused passes **differ** from the passes apart, or did not run (gpu_quick.log)"
	fi
done
# the GEMMs' epilogues (cuBLASLt; tests/gpu/run.sh checks them further): GPT at D = 128, its first gradients
# against the same plan apart at the same parameters
for pr in f32 bf16; do
	tol=1e-3
	[ $pr = bf16 ] && tol=0.03
	if timeout 30 "$B/gpt_ep.$pr" --steps 1 --lr 0 --quiet --save /tmp/q_ge.p --dump-grads /tmp/q_ge.g >>"$log" 2>&1 &&
		timeout 30 "$B/gpt_ep.$pr.off" --steps 1 --lr 0 --quiet --init /tmp/q_ge.p --dump-grads /tmp/q_ge_off.g >>"$log" 2>&1 &&
		COMPARE_FLOOR=1e-4 python3 "$B/compare.py" /tmp/q_ge.g /tmp/q_ge_off.g $tol >>"$log" 2>&1; then
		say "- gpt_ep.$pr: the GEMMs' epilogues (cuBLASLt) within $tol of apart"
	else
		say "- gpt_ep.$pr: the GEMMs' epilogues **differ** from apart by more than $tol, or did not run (gpu_quick.log)"
	fi
done
# f32 attention as 3xTF32 (GPT-2's default since 2026-12-06) against the CPU's f32 at the same parameters
if timeout 30 "$B/gpt.cuda_tf32" --steps 1 --lr 0 --quiet --save /tmp/q_gt.p --dump-grads /tmp/q_gt.g >>"$log" 2>&1 &&
	timeout 30 "$B/gpt_h2.cpu" --steps 1 --lr 0 --quiet --init /tmp/q_gt.p --dump-grads /tmp/q_gt_cpu.g >>"$log" 2>&1 &&
	COMPARE_FLOOR=1e-4 python3 "$B/compare.py" /tmp/q_gt.g /tmp/q_gt_cpu.g 1e-4 >>"$log" 2>&1; then
	say "- gpt.cuda_tf32: attention as 3xTF32 on tensor cores within 1e-4 of the CPU's f32"
else
	say "- gpt.cuda_tf32: attention as 3xTF32 **differs** from the CPU's f32 by more than 1e-4, or did not run (gpu_quick.log)"
fi
say ""

# net NAME EXE LIMIT TORCH-ARGS...: dpc's ms/step (60 s at most), then PyTorch's eager and
# compile (LIMIT seconds in all, torch.compile's compilation included), and the ratios
net() {
	local name=$1 exe=$2 limit=$3
	shift 3
	say "### $name"
	say ""
	if timeout 60 "$B/$exe" --steps "$steps" --lr 1e-4 --quiet --summary-json "/tmp/q_$name.json" >>"$log" 2>&1; then
		local ms peak
		ms=$(field "/tmp/q_$name.json" ms_per_step)
		peak=$(field "/tmp/q_$name.json" peak_device_bytes)
		say "- dpc: $(printf %.2f "$ms") ms/step, peak $(python3 -c "print(f'{$peak / 2**30:.2f}')") GiB, loss $(printf %.4f "$(field "/tmp/q_$name.json" loss_first)") -> $(printf %.4f "$(field "/tmp/q_$name.json" loss_last)"); predicted $(printf %.2f "$(field "$B/kernels/$name.$kind.json" predicted_step_ms)") ms/step"
		echo "$ms" >"/tmp/q_$name.ms"
	else
		say "- dpc: failed or over 60 s (status $?; the log: gpu_quick.log)"
		rm -f "/tmp/q_$name.ms"
	fi
	timeout "$limit" python3 bench/nets_torch.py "$@" --steps "$steps" 2>>"$log" | while read -r line; do
		say "- $line"
		local tms
		tms=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) ms\/step.*/\1/p')
		[ -n "$tms" ] && [ -f "/tmp/q_$name.ms" ] &&
			say "  - dpc / this: $(python3 -c "print(f'{$(cat /tmp/q_$name.ms) / $tms:.2f}')")"
	done
	say ""
}
gpt2="-L 12 -D 768 -H 12 -T 1024 -V 50257"
net gpt2 gpt2.cuda 150 gpt $gpt2 -B 8
net gpt2bf gpt2bf.cuda 120 gpt $gpt2 -B 32 --bf16
net resnet56 resnet56.cuda 80 resnet -B 128 -S 32 -C 16 -N 9

# the same executables with every GEMM through cuBLAS's strided-batched calls, as before 2026-11-28
# (DPC_GEMM_BATCHED=1), against one product a call (cublasSgemm, cublasGemmEx) as PyTorch's matmul
say "### GEMMs one a call against strided-batched calls"
say ""
for name in gpt2 gpt2bf; do
	if [ -f "/tmp/q_$name.ms" ] && DPC_GEMM_BATCHED=1 timeout 60 "$B/$name.cuda" --steps "$steps" --lr 1e-4 --quiet \
		--summary-json "/tmp/q_${name}_batched.json" >>"$log" 2>&1; then
		bt=$(field "/tmp/q_${name}_batched.json" ms_per_step)
		say "- $name: $(printf %.2f "$(cat "/tmp/q_$name.ms")") ms/step one a call, $(printf %.2f "$bt") strided-batched"
	else
		say "- $name: the strided-batched run failed or did not start"
	fi
done
say ""

# each GPT-2 (1 and 2 above: the cost model's choices) against the same plan with one choice the other way:
# fp32's attention on dpc's 3xTF32 tensor-core kernels (the model's choice since 2026-12-06) against GEMMs
# (its choice from 2026-12-04) and against dpc's FMA kernels; bf16's on dpc's
# tensor-core kernels in FlashAttention-2's order against cuBLAS's GEMMs (DPC_ATTN_GEMM=on), and its
# vocabulary's GEMMs split at 50,256 (since 2026-12-04) against whole (DPC_GEMM_SPLIT=off). This says whether
# the model chose right and what each choice is worth
say "### the cost model's choices against the other way"
say ""
# other NAME OTHER LABEL: NAME's step (above) against OTHER's, each beside its prediction; NAME's --profile
# lines for attention and the vocabulary's GEMMs
other() {
	local name=$1 alt=$2 label=$3 ot
	if timeout 60 "$B/$alt.cuda" --steps "$steps" --lr 1e-4 --quiet \
		--summary-json "/tmp/q_$alt.json" >>"$log" 2>&1; then
		ot=$(field "/tmp/q_$alt.json" ms_per_step)
		say "- $label: $(printf %.2f "$(cat "/tmp/q_$name.ms" 2>/dev/null || echo 0)") ms/step as the model chose (predicted $(printf %.2f "$(field "$B/kernels/$name.$kind.json" predicted_step_ms)")), $(printf %.2f "$ot") the other way (predicted $(printf %.2f "$(field "$B/kernels/$alt.$kind.json" predicted_step_ms)")), loss $(printf %.4f "$(field "/tmp/q_$alt.json" loss_first)") -> $(printf %.4f "$(field "/tmp/q_$alt.json" loss_last)")"
		timeout 30 "$B/$alt.cuda" --steps 2 --lr 1e-4 --quiet --profile 2>>"$log" | grep -E "attention|attn_|5025|gemm\+" | head -12 >>"$out"
	else
		say "- $alt: failed or did not start (gpu_quick.log)"
	fi
}
other gpt2 gpt2_gemm "gpt2 (fp32): attention as 3xTF32 on tensor cores against GEMMs"
other gpt2 gpt2_fma "gpt2 (fp32): attention as 3xTF32 on tensor cores against the FMA kernels"
other gpt2bf gpt2bf_gemm "gpt2bf: attention on the tensor-core kernels against GEMMs"
other gpt2bf gpt2bf_whole "gpt2bf: the vocabulary's GEMMs split against whole"
other gpt2bf gpt2bf_apart "gpt2bf: the GEMMs' epilogues (cuBLASLt) against apart"
other gpt2 gpt2_apart "gpt2 (fp32): the GEMMs' epilogues (cuBLASLt) against apart"
say ""

say "### streaming"
say ""
# its first two parts; the model larger than the GPU does not fit this script's time
timeout 60 bash bench/stream.sh 2>>"$log" | while read -r line; do say "- $line"; done
say ""

say "### the cost model: predicted against measured, one step's milliseconds by launch"
say ""
for name in gpt2 gpt2bf resnet56; do
	exe=$B/$name.cuda
	if timeout 30 "$exe" --steps 2 --lr 1e-4 --quiet --profile >"/tmp/q_$name.prof" 2>>"$log"; then
		say "$name ($kind plan):"
		say ""
		python3 bench/kernels_vs.py "/tmp/q_$name.prof" "$B/kernels/$name.$kind.json" \
			$(cat "/tmp/q_$name.ms" 2>/dev/null) | tee -a "$out"
		say ""
		{ echo "## $name: --profile"; cat "/tmp/q_$name.prof"; } >>"$log" # the raw profile, each GEMM shape's line

	else
		say "$name: --profile failed or timed out"
	fi
done
# where PyTorch's step goes, beside dpc's profile above: its GEMMs, attention and the rest
say "### PyTorch eager's kernels by kind (torch.profiler, two steps)"
say ""
for bf in "" --bf16; do
	b=8
	[ -n "$bf" ] && b=32
	timeout 60 python3 bench/nets_torch.py gpt $gpt2 -B $b $bf --profile --steps 3 2>>"$log" |
		while read -r line; do say "- $line"; done
done
echo "written to $out"
