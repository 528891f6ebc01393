#!/usr/bin/env bash
# GPU checks, in two halves because the GPU machine has no LLVM:
#   bash tests/gpu/run.sh build    here: compile every sample for cuda and cpu into gpu_build/
#   bash tests/gpu/run.sh run      on the GPU machine (carry gpu_build/): run both, compare
# Compares loss trajectories (relative 1e-4 in fp32) and first-step gradients,
# runs --gradcheck on the GPU in f64 builds, and one sample under compute-sanitizer.
# Every op program (tests/ops) runs too: first-step gradients against the CPU
# and --gradcheck in f64, and the wide one under each compute-sanitizer tool.
set -u
cd "$(dirname "$0")/../.."
B=gpu_build
# the x86 code of every executable built here runs on the GPU machine's CPU
export DPC_CPU=generic
# bench/gpu_scale.sh's GPT: 48 layers 2560 wide (3.8 billion parameters), one sequence of 1024
GPT_SCALE="-D L=48 -D D=2560 -D H=20 -D T=1024 -D V=50257 -D B=1"
case "${1:-}" in
build)
	rm -rf $B && mkdir -p $B/lib
	for dp in samples/*.dp; do
		s=$(basename "$dp" .dp)
		bin/dpc --target cuda "$dp" -o $B/$s.cuda || exit 1
		bin/dpc --target cpu "$dp" -o $B/$s.cpu || exit 1
		bin/dpc --target cuda --precision f64 "$dp" -o $B/$s.cuda64 || exit 1
	done
	bin/dpc --target cuda bench/resmlp_big.dp -o $B/resmlp_big.cuda || exit 1
	bin/dpc --target cuda --checkpoint binomial --snapshots 100 bench/longstack.dp -o $B/longstack.cuda || exit 1
	bin/dpc --target cuda -D L=10000 bench/longstack.dp -o $B/longstack_short.cuda || exit 1
	bin/dpc --target cuda -D L=1024 bench/resmlp_big.dp -o $B/resmlp_1024.cuda || exit 1
	bin/dpc --target cuda -D L=1024 --checkpoint binomial --snapshots 33 bench/resmlp_big.dp -o $B/resmlp_1024_binomial.cuda || exit 1
	for s in 64 128 256; do
		bin/dpc --target cuda -D L=1024 --checkpoint binomial --snapshots $s bench/resmlp_big.dp -o $B/resmlp_1024_binomial$s.cuda || exit 1
	done
	bin/dpc --target cuda -D L=1024 --checkpoint auto --snapshots 32 bench/resmlp_big.dp -o $B/resmlp_1024_auto.cuda || exit 1
	# issue 11's targets: auto (pooled rows, relu masks in bits) at checkpoint_sequential(32)'s memory
	# (32 boundaries and 32 layers of 8 MiB beyond parameters, gradients and work) and at a quarter of it
	bin/dpc --target cuda -D L=1024 --device-mem 9034551552 bench/resmlp_big.dp -o $B/resmlp_1024_torchmem.cuda || exit 1
	bin/dpc --target cuda -D L=1024 --device-mem 8733610240 bench/resmlp_big.dp -o $B/resmlp_1024_quarter.cuda || exit 1
	bash bench/tradeoff.sh build || exit 1
	bash bench/sim.sh build || exit 1
	bash bench/graphs.sh build || exit 1
	for dp in samples/*.dp; do
		bin/dpc --target cuda --checkpoint binomial "$dp" -o $B/$(basename "$dp" .dp).cudab || exit 1
		bin/dpc --target cuda --checkpoint auto "$dp" -o $B/$(basename "$dp" .dp).cudaa || exit 1
	done
	# rows that keep less: the adjoint step computes the layernorm, GEMM or gelu again
	bin/dpc --target cuda --schedule-json $B/rows_none.json tests/ckpt/rows.dp -o $B/rows_none.gpu || exit 1
	# half the tape's bytes out (as tests/ckpt's rows check; at 80% of the peak the loop now sweeps
	# without rows, since each loop's slots are fitted to the budget)
	budget=$(python3 -c "import json,sys; b = json.load(open(sys.argv[1]))['peak_device_bytes']; print(b['total'] - b['tape'] // 2)" $B/rows_none.json)
	bin/dpc --target cuda --stream none --device-mem $budget --schedule-json $B/rows_drop.json \
		tests/ckpt/rows.dp -o $B/rows_drop.gpu || exit 1
	python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['loops'][0]['row_recomputed']" $B/rows_drop.json || exit 1
	# rows without the state: the adjoint's state replayed from a taped run's first (issue 62, item 1)
	bin/dpc --target cuda tests/ckpt/replay.dp -o $B/replay_none.gpu || exit 1
	bin/dpc --target cuda --stream none --device-mem 720000 --schedule-json $B/replay.json tests/ckpt/replay.dp \
		-o $B/replay.gpu || exit 1
	python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['loops'][0]['state_replays'] > 0" $B/replay.json || exit 1
	# straight-line values offloaded to the host pool and fetched back: DenseNet at its least with offloading
	bin/dpc --target cuda -D B=8 -D S=32 samples/densenet.dp -o $B/offload_none.gpu || exit 1
	bin/dpc --target cuda -D B=8 -D S=32 --checkpoint min-memory --device-mem 1G --schedule-json $B/offload.json \
		samples/densenet.dp -o $B/offload.gpu || exit 1
	python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['straight_line']['offloaded_bytes'] > 0" $B/offload.json || exit 1
	# the C API (dpc --emit=lib): the classifier as a library for each target, for tests/gpu/api_gpu.py
	mkdir -p $B/api
	bin/dpc --target cuda samples/classifier.dp --emit=lib -o $B/api/libclassifier_cuda.so || exit 1
	bin/dpc --target cpu samples/classifier.dp --emit=lib -o $B/api/libclassifier_cpu.so || exit 1
	# streaming: resmlp with every stackable parameter streamed, against resident (tolerance 0)
	mkdir -p $B/stream
	for opt in sgd adam; do
		for ck in none binomial; do
			bin/dpc --target cuda --optimizer $opt --checkpoint $ck samples/resmlp.dp -o $B/stream/res.$opt.$ck || exit 1
			bin/dpc --target cuda --optimizer $opt --checkpoint $ck --stream params samples/resmlp.dp -o $B/stream/str.$opt.$ck || exit 1
		done
	done
	# data parallelism's NCCL path, at world size 1 (bench/dp.sh gpu times it)
	bin/dpc --target cuda -D H=512 -D L=16 samples/resmlp.dp -o $B/dp.cuda || exit 1
	# and 5 of 8 binomial snapshots in host memory (the budgets tests/stream/run.sh derives)
	bin/dpc --target cuda --checkpoint binomial --snapshots 8 samples/resmlp.dp -o $B/stream/res.sgd.hs || exit 1
	bin/dpc --target cuda --checkpoint binomial --snapshots 8 --stream params --device-mem 601600 samples/resmlp.dp \
		-o $B/stream/str.sgd.hs || exit 1
	bin/dpc --target cuda --optimizer adam --checkpoint binomial --snapshots 8 samples/resmlp.dp -o $B/stream/res.adam.hs || exit 1
	bin/dpc --target cuda --optimizer adam --checkpoint binomial --snapshots 8 --device-mem 2550784 samples/resmlp.dp \
		-o $B/stream/str.adam.hs || exit 1
	# bench/stream.sh: the bench MLP at L = 256 (1 GiB of weights) in a 128 MiB budget, and resident,
	# with the same binomial schedule; and a model larger than the GPU, in host RAM
	bin/dpc --target cuda -D L=256 --checkpoint binomial --snapshots 20 bench/resmlp_big.dp -o $B/stream_res.cuda || exit 1
	bin/dpc --target cuda -D L=256 --checkpoint binomial --snapshots 20 --stream params --device-mem 128M \
		bench/resmlp_big.dp -o $B/stream_8x.cuda || exit 1
	bin/dpc --target cuda -D L=256 --checkpoint binomial --snapshots 64 --stream params --device-mem 128M \
		bench/resmlp_big.dp -o $B/stream_8x_s64.cuda || exit 1
	bin/dpc --target cuda -D L=${HUGE_L:-20480} --checkpoint binomial --snapshots 64 --stream params --device-mem 8G \
		bench/stream_huge.dp -o $B/stream_huge.cuda || exit 1
	# bench/nets.sh: GPT-2 124M's shape, a ResNet-56-like net at batch 128, and the 250,004-layer ResNet
	bin/dpc --target cuda -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=${GPT_B:-8} samples/gpt.dp -o $B/gpt2.cuda || exit 1
	bin/dpc --target cuda -D B=128 -D S=32 -D C=16 -D N=9 samples/resnet.dp -o $B/resnet56.cuda || exit 1
	# bf16: attention where the cost model prices it cheaper (dpc's tensor-core kernels since 2026-12-03), and on GEMMs
	bin/dpc --target cuda --precision bf16 -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=32 samples/gpt.dp -o $B/gpt2bf.cuda || exit 1
	DPC_ATTN_GEMM=on bin/dpc --target cuda --precision bf16 -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=32 samples/gpt.dp \
		-o $B/gpt2bf_gemm.cuda || exit 1
	bin/dpc --target cuda -D N=41666 --checkpoint binomial samples/resnet.dp -o $B/resnet250k.cuda || exit 1
	# bench/gpu_quick.sh: each of those three plans' launches priced by the cost model on the H100 and the H200
	mkdir -p $B/kernels
	for gpu in h100 h200; do
		bin/dpc --target cuda --gpu $gpu -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=${GPT_B:-8} samples/gpt.dp \
			--emit=schedule --schedule-json $B/kernels/gpt2.$gpu.json >/dev/null || exit 1
		bin/dpc --target cuda --gpu $gpu --precision bf16 -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=32 samples/gpt.dp \
			--emit=schedule --schedule-json $B/kernels/gpt2bf.$gpu.json >/dev/null || exit 1
		DPC_ATTN_GEMM=on bin/dpc --target cuda --gpu $gpu --precision bf16 -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=32 \
			samples/gpt.dp --emit=schedule --schedule-json $B/kernels/gpt2bf_gemm.$gpu.json >/dev/null || exit 1
		DPC_ATTN_GEMM=off DPC_ATTN_TF32=off bin/dpc --target cuda --gpu $gpu -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=${GPT_B:-8} \
			samples/gpt.dp --emit=schedule --schedule-json $B/kernels/gpt2_fma.$gpu.json >/dev/null || exit 1
		DPC_ATTN_TF32=off bin/dpc --target cuda --gpu $gpu -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=${GPT_B:-8} \
			samples/gpt.dp --emit=schedule --schedule-json $B/kernels/gpt2_gemm.$gpu.json >/dev/null || exit 1
		DPC_GEMM_SPLIT=off bin/dpc --target cuda --gpu $gpu --precision bf16 -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=32 \
			samples/gpt.dp --emit=schedule --schedule-json $B/kernels/gpt2bf_whole.$gpu.json >/dev/null || exit 1
		DPC_EPILOGUE=off bin/dpc --target cuda --gpu $gpu -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=${GPT_B:-8} \
			samples/gpt.dp --emit=schedule --schedule-json $B/kernels/gpt2_apart.$gpu.json >/dev/null || exit 1
		DPC_EPILOGUE=off bin/dpc --target cuda --gpu $gpu --precision bf16 -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=32 \
			samples/gpt.dp --emit=schedule --schedule-json $B/kernels/gpt2bf_apart.$gpu.json >/dev/null || exit 1
		bin/dpc --target cuda --gpu $gpu -D B=128 -D S=32 -D C=16 -D N=9 samples/resnet.dp \
			--emit=schedule --schedule-json $B/kernels/resnet56.$gpu.json >/dev/null || exit 1
		bin/dpc --target cuda --gpu $gpu -D L=256 --checkpoint binomial --snapshots 20 --stream params --device-mem 128M \
			bench/resmlp_big.dp --emit=schedule --schedule-json $B/kernels/stream_8x.$gpu.json >/dev/null || exit 1
	done
	cp bench/kernels_vs.py $B/
	# bench/gpu_scale.sh: a GPT whose weights and Adam state (f32, 45.3 GB) are 8x --device-mem, streamed, in
	# bf16-mixed: the layers' optimizer steps on the host
	bin/dpc --target cuda $GPT_SCALE --precision bf16-mixed --optimizer adam --stream params --device-mem 5400M \
		samples/gpt.dp -o $B/gpt_scale.cuda --schedule-json $B/kernels/gpt_scale.json || exit 1
	# every op program: each kernel variant (scalar or 16-byte accesses; reductions
	# by one thread, a warp or a block) against the CPU and finite differences
	mkdir -p $B/ops
	for dp in tests/ops/*.dp; do
		s=$(basename "$dp" .dp)
		bin/dpc --target cuda "$dp" -o $B/ops/$s.cuda || exit 1
		bin/dpc --target cpu "$dp" -o $B/ops/$s.cpu || exit 1
		bin/dpc --target cuda --precision f64 "$dp" -o $B/ops/$s.cuda64 || exit 1
	done
	# bf16 on the GPU (GemmEx, tensor cores): a few op programs against the CPU's f32 at the same parameters
	for s in matmul bmm wide conv2d attention attention_heads16 layernorm cross_entropy embed rows; do
		bin/dpc --target cuda --precision bf16 tests/ops/$s.dp -o $B/ops/$s.cudabf || exit 1
	done
	# heads of 128 and 80 on the tensor cores: dynamic shared memory past 48 KiB (2026-12-03)
	DPC_ATTN_GEMM=off bin/dpc --target cuda --precision bf16 tests/ops/attention_heads128.dp -o $B/ops/attention_heads128.cudabf || exit 1
	# bf16 attention on GEMMs (DPC_ATTN_GEMM=on: the cost model may take the tensor-core kernels by default) and
	# on dpc's tensor-core kernels (heads 32 and 64 wide) against the per-row kernels
	DPC_ATTN_GEMM=on bin/dpc --target cuda --precision bf16 tests/ops/attention_heads16.dp -o $B/ops/attention_heads16.cudabf || exit 1
	bin/dpc --target cuda --precision bf16 --reference-kernels tests/ops/attention_heads16.dp -o $B/ops/attention_heads16.cudabf_ref || exit 1
	DPC_ATTN_GEMM=off bin/dpc --target cuda --precision bf16 tests/ops/attention_heads16.dp -o $B/ops/attention_heads16.cudabf_mma || exit 1
	bin/dpc --target cuda --precision bf16 samples/resmlp.dp -o $B/resmlp.cudabf || exit 1
	# attention's passes apart (attn_lse on its own, attn_dk and attn_dv): bitwise as the fused ones
	DPC_ATTN_APART=1 bin/dpc --target cuda samples/gpt.dp -o $B/gpt.cuda_apart || exit 1
	DPC_ATTN_APART=1 bin/dpc --target cuda --precision bf16 samples/gpt.dp -o $B/gpt.cudabf_apart || exit 1
	bin/dpc --target cuda --precision bf16 samples/gpt.dp -o $B/gpt.cudabf || exit 1
	# the same on dpc's tensor-core kernels (DPC_ATTN_GEMM=off, heads of 16: FlashAttention-2's order since 2026-11-29)
	DPC_ATTN_GEMM=off bin/dpc --target cuda --precision bf16 -D H=2 samples/gpt.dp -o $B/gpt.cudabf_mma || exit 1
	DPC_ATTN_GEMM=off DPC_ATTN_APART=1 bin/dpc --target cuda --precision bf16 -D H=2 samples/gpt.dp -o $B/gpt.cudabf_mma_apart || exit 1
	bin/dpc --target cpu -D H=2 samples/gpt.dp -o $B/gpt_h2.cpu || exit 1
	# bf16 GEMMs split where n or k is not a whole number of 16 bytes (codegen/linalg.c, 2026-12-04; never run on
	# a GPU before): GPT at V = 251, split (the default) and whole, against the CPU's f32
	bin/dpc --target cuda --precision bf16 -D V=251 -D B=8 samples/gpt.dp -o $B/gpt_v251.cudabf || exit 1
	DPC_GEMM_SPLIT=off bin/dpc --target cuda --precision bf16 -D V=251 -D B=8 samples/gpt.dp -o $B/gpt_v251.cudabf_whole || exit 1
	bin/dpc --target cpu -D V=251 -D B=8 samples/gpt.dp -o $B/gpt_v251.cpu || exit 1
	# GEMMs with cuBLASLt's epilogues (codegen/linalg.c, 2026-12-05; never run on a GPU before): GPT at D = 128
	# (its GEMMs cuBLAS's, not small kernels) with them and apart (DPC_EPILOGUE=off), f32 and bf16, and the CPU's
	# f32; GPT-2 apart for bench/gpu_quick.sh
	for pr in f32 bf16; do
		bin/dpc --target cuda --precision $pr -D D=128 -D B=8 samples/gpt.dp -o $B/gpt_ep.$pr || exit 1
		DPC_EPILOGUE=off bin/dpc --target cuda --precision $pr -D D=128 -D B=8 samples/gpt.dp -o $B/gpt_ep.$pr.off || exit 1
	done
	bin/dpc --target cpu -D D=128 -D B=8 samples/gpt.dp -o $B/gpt_ep.cpu || exit 1
	DPC_EPILOGUE=off bin/dpc --target cuda -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=${GPT_B:-8} samples/gpt.dp \
		-o $B/gpt2_apart.cuda || exit 1
	DPC_EPILOGUE=off bin/dpc --target cuda --precision bf16 -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=32 samples/gpt.dp \
		-o $B/gpt2bf_apart.cuda || exit 1
	# f32 and f64 attention on dpc's FMA kernels (DPC_ATTN_GEMM=off; attn_fma.c, 2026-12-03, never run on a GPU
	# before): the attention op programs against the CPU and finite differences in f64, GPT's fused passes
	# bitwise as apart
	for s in attention attention_tiles attention_heads16 attention_heads128; do
		DPC_ATTN_GEMM=off DPC_ATTN_TF32=off bin/dpc --target cuda tests/ops/$s.dp -o $B/ops/$s.cuda_fma || exit 1
		DPC_ATTN_GEMM=off bin/dpc --target cuda --precision f64 tests/ops/$s.dp -o $B/ops/$s.cuda64_fma || exit 1
	done
	DPC_ATTN_GEMM=off DPC_ATTN_TF32=off bin/dpc --target cuda samples/gpt.dp -o $B/gpt.cuda_fma || exit 1
	DPC_ATTN_GEMM=off DPC_ATTN_TF32=off DPC_ATTN_APART=1 bin/dpc --target cuda samples/gpt.dp -o $B/gpt.cuda_fma_apart || exit 1
	# f32 attention on tensor cores as 3xTF32 (DPC_ATTN_TF32=on; 2026-12-06, never run on a GPU before): the
	# op programs with heads of 32 to 80 against the CPU, GPT's (heads of 16) fused passes bitwise as apart
	for s in attention_heads16 attention_heads128; do
		DPC_ATTN_GEMM=off DPC_ATTN_TF32=on bin/dpc --target cuda tests/ops/$s.dp -o $B/ops/$s.cuda_tf32 || exit 1
	done
	DPC_ATTN_GEMM=off DPC_ATTN_TF32=on bin/dpc --target cuda -D H=2 samples/gpt.dp -o $B/gpt.cuda_tf32 || exit 1
	DPC_ATTN_GEMM=off DPC_ATTN_TF32=on DPC_ATTN_APART=1 bin/dpc --target cuda -D H=2 samples/gpt.dp -o $B/gpt.cuda_tf32_apart || exit 1
	# GPT-2 fp32 for bench/gpu_quick.sh the other ways: on the FMA kernels and on GEMMs (the cost model's choice
	# from the H200's profile of 2026-12-04 to the 3xTF32 kernels of 2026-12-06), and bf16 with the
	# vocabulary's GEMMs whole (DPC_GEMM_SPLIT=off: the split's gain)
	DPC_ATTN_GEMM=off DPC_ATTN_TF32=off bin/dpc --target cuda -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=${GPT_B:-8} samples/gpt.dp \
		-o $B/gpt2_fma.cuda || exit 1
	DPC_ATTN_TF32=off bin/dpc --target cuda -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=${GPT_B:-8} samples/gpt.dp \
		-o $B/gpt2_gemm.cuda || exit 1
	DPC_GEMM_SPLIT=off bin/dpc --target cuda --precision bf16 -D L=12 -D D=768 -D H=12 -D T=1024 -D V=50257 -D B=32 samples/gpt.dp \
		-o $B/gpt2bf_whole.cuda || exit 1
	# fused loops: one block's kernel against the unfused build and the CPU
	mkdir -p $B/fuse
	for s in cell rnn; do
		for ck in none binomial auto; do
			bin/dpc --target cuda --checkpoint $ck tests/fuse/$s.dp -o $B/fuse/$s.$ck || exit 1
			bin/dpc --target cuda --no-fuse --checkpoint $ck tests/fuse/$s.dp -o $B/fuse/$s.$ck.nf || exit 1
			bin/dpc --target cpu --checkpoint $ck tests/fuse/$s.dp -o $B/fuse/$s.$ck.cpu || exit 1
		done
	done
	bin/dpc --target cuda --precision f64 --checkpoint binomial tests/fuse/cell.dp -o $B/fuse/cell64 || exit 1
	bin/dpc --target cuda --checkpoint binomial -D T=1000000 samples/oscillator.dp -o $B/fuse/osc1e6 || exit 1
	bin/dpc --target cuda tests/gpu/buffers.dp -o $B/buffers.cuda_buf || exit 1
	bin/dpc --target cpu tests/gpu/buffers.dp -o $B/buffers.cpu_buf || exit 1
	# AdamW and the schedules: the adam kernel's decay word, against the float64 reference
	bin/dpc --target cuda --precision f64 --optimizer adam tests/train/optim.dp -o $B/optim_adam.cuda64 || exit 1
	cp tests/lib.sh tests/unit/compare.py tests/gpu/trace_check.py tests/train/optim_ref.py tests/train/kill_resume.sh $B/
	# the CPU executables' shared libraries that a bare machine may lack
	for lib in $(ldd $B/resmlp.cpu | awk '/=>/ { print $3 }' | grep -E 'blas|gfortran|quadmath|lapack'); do
		cp -L "$lib" $B/lib/
	done
	# the carried tree must stay under the device tool's 64 MiB: no debug info
	find $B -type f -perm -u+x -exec strip --strip-unneeded {} + 2>/dev/null
	chmod u+w $B/lib/* && strip --strip-unneeded $B/lib/* 2>/dev/null
	# and compressed: OpenBLAS alone is 36 MB, 4 MB as xz; the op programs'
	# 160 executables 33 MB, as one tar.xz a fifth of that ("run" unpacks both)
	xz -9 -T2 $B/lib/* || exit 1
	tar -C $B -cf - ops | xz -9 -T2 >$B/ops.tar.xz && rm -rf $B/ops || exit 1
	# the folders of the further checks and benches likewise (84 MB in all on 2026-12-03 without this;
	# tests/gpu/unpack.sh unpacks them, and every script that reads them runs it)
	dirs=$(cd $B && ls -d fuse stream tradeoff sim graphs 2>/dev/null)
	tar -C $B -cf - $dirs | xz -9 -T2 >$B/dirs.tar.xz && rm -rf $(printf "$B/%s " $dirs) || exit 1
	# and the executables only this script's checks run (binomial, auto and f64 builds of the samples, the
	# C API's libraries; bench/gpu_quick.sh reads gpt.cuda64 itself): 62.9 MB in all on 2026-12-03 with
	# them loose, over the limit beside the tracked tree's 5.4 MB
	checks="$(cd $B && ls *.cudab *.cudaa *.cuda64 | grep -v '^gpt\.cuda64$') api"
	tar -C $B -cf - $checks | xz -9 -T2 >$B/checks.tar.xz && rm -rf $(printf "$B/%s " $checks) || exit 1
	echo "built into $B/ ($(du -sh $B | cut -f1))"
	exit 0
	;;
run) ;;
*)
	echo "usage: bash tests/gpu/run.sh build|run" >&2
	exit 2
	;;
esac

# the libraries came compressed (build): unpacked with Python's lzma, which the GPU machine has
LIBS=/tmp/dpc_gpu_lib
mkdir -p $LIBS
for z in $B/lib/*.xz; do
	[ -f "$z" ] || continue
	python3 -c "import lzma, sys; open(sys.argv[2], 'wb').write(lzma.open(sys.argv[1]).read())" "$z" "$LIBS/$(basename "$z" .xz)" || exit 1
done
export LD_LIBRARY_PATH="$LIBS:${LD_LIBRARY_PATH:-}"
bash tests/gpu/unpack.sh $B || exit 1
TEST_OUT=${OUT:-/tmp}/gpu_out
. $B/lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/# GPU: /'
# the convolutions run on cuDNN, opened at run time as the executables open it (their run path is CUDA's lib64)
check "gpu/cudnn: libcudnn.so.9 opens" python3 -c "import ctypes, os; ctypes.CDLL(os.path.join('/usr/local/cuda/lib64', 'libcudnn.so.9') if os.path.exists('/usr/local/cuda/lib64/libcudnn.so.9') else 'libcudnn.so.9')"
compare_losses() { # A.log B.log: per-step losses agree to 1e-4 relative
	python3 - "$1" "$2" <<'PY'
import re, sys
def losses(p):
    return [float(m.group(1)) for m in re.finditer(r"^step +\d+/\d+ +loss (\S+)", open(p).read(), re.M)]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert a and len(a) == len(b), (len(a), len(b))
worst = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))
print(f"{len(a)} steps, max relative difference {worst:.2e}")
assert worst <= 1e-4, worst
PY
}
compare_grads() { python3 $B/compare.py "$@"; } # A.safetensors B.safetensors TOL
for exe in $B/*.cuda; do
	case $(basename "$exe") in resmlp_big.cuda | resmlp_1024*.cuda | longstack*.cuda | stream_*.cuda | gpt2.cuda | gpt2_fma.cuda | gpt2_gemm.cuda | gpt2bf.cuda | gpt2bf_gemm.cuda | gpt2bf_whole.cuda | gpt2_apart.cuda | gpt2bf_apart.cuda | resnet56.cuda | resnet250k.cuda | gpt_scale.cuda | dp.cuda) continue ;; esac # benchmarks: bench/ (dp.cuda: bench/dp.sh gpu)
	s=$(basename "$exe" .cuda)
	case $s in classifier) lr=0.5 ;; oscillator) lr=0.1 ;; *) lr=0.01 ;; esac
	args="--steps 20 --log-every 1 --lr $lr --conv-fp32" # exact f32 convolutions: compared at 1e-4
	$exe $args --dump-grads $TEST_OUT/$s.cuda.st --summary-json $TEST_OUT/$s.cuda.json >$TEST_OUT/$s.cuda.log 2>&1 &&
		$B/$s.cpu $args --dump-grads $TEST_OUT/$s.cpu.st >$TEST_OUT/$s.cpu.log 2>&1 ||
		{ notok "gpu/$s: run" $TEST_OUT/$s.cuda.log; continue; }
	check "gpu/$s: loss trajectory cuda vs cpu" compare_losses $TEST_OUT/$s.cuda.log $TEST_OUT/$s.cpu.log
	check "gpu/$s: first-step gradients cuda vs cpu" compare_grads $TEST_OUT/$s.cuda.st $TEST_OUT/$s.cpu.st 1e-4
	check "gpu/$s: gradcheck f64 on the GPU" $B/$s.cuda64 --gradcheck
	$B/$s.cudab $args --dump-grads $TEST_OUT/$s.cudab.st >$TEST_OUT/$s.cudab.log 2>&1
	check "gpu/$s: binomial gradients identical to store-everything" compare_grads $TEST_OUT/$s.cudab.st $TEST_OUT/$s.cuda.st 0
	$B/$s.cudaa $args --dump-grads $TEST_OUT/$s.cudaa.st >$TEST_OUT/$s.cudaa.log 2>&1
	check "gpu/$s: auto (tapes of rows) gradients identical to store-everything" compare_grads $TEST_OUT/$s.cudaa.st $TEST_OUT/$s.cuda.st 0
done
check "gpu/api: CUDA tensors put without a host copy, the same bits as host arrays" python3 tests/gpu/api_gpu.py $B/api
$B/rows_none.gpu --steps 3 --dump-grads $TEST_OUT/rows_none.st >$TEST_OUT/rows.log 2>&1 &&
	$B/rows_drop.gpu --steps 3 --dump-grads $TEST_OUT/rows_drop.st --summary-json $TEST_OUT/rows_drop.json >>$TEST_OUT/rows.log 2>&1
check "gpu/rows: rows that keep less, gradients identical to store-everything" compare_grads $TEST_OUT/rows_drop.st $TEST_OUT/rows_none.st 0
check "gpu/rows: peak as planned" python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['peak_device_bytes'] == j['predicted_device_bytes'], j" $TEST_OUT/rows_drop.json
$B/replay_none.gpu --steps 3 --dump-grads $TEST_OUT/replay_none.st >$TEST_OUT/replay.log 2>&1 &&
	$B/replay.gpu --steps 3 --dump-grads $TEST_OUT/replay.st --summary-json $TEST_OUT/replay.run.json >>$TEST_OUT/replay.log 2>&1
check "gpu/replay: the state replayed from the rows, gradients identical to store-everything" compare_grads $TEST_OUT/replay.st $TEST_OUT/replay_none.st 0
check "gpu/replay: peak and recomputed FLOPs as planned" python3 -c "import json,sys; j=json.load(open(sys.argv[1])); p=json.load(open(sys.argv[2])); assert j['peak_device_bytes'] == j['predicted_device_bytes'] and j['recomputed_flops'] == 3 * p['recomputed_flops'], (j, p['recomputed_flops'])" $TEST_OUT/replay.run.json $B/replay.json
$B/offload_none.gpu --steps 3 --dump-grads $TEST_OUT/offload_none.st >$TEST_OUT/offload.log 2>&1 &&
	$B/offload.gpu --steps 3 --dump-grads $TEST_OUT/offload.st --summary-json $TEST_OUT/offload.json >>$TEST_OUT/offload.log 2>&1
check "gpu/offload: values offloaded and fetched back, gradients identical to store-everything" compare_grads $TEST_OUT/offload.st $TEST_OUT/offload_none.st 0
check "gpu/offload: peak and bytes moved as planned" python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['peak_device_bytes'] == j['predicted_device_bytes'] and j['stream_h2d_bytes'] == j['predicted_stream_h2d_bytes'] > 0 and j['stream_d2h_bytes'] == j['predicted_stream_d2h_bytes'], j" $TEST_OUT/offload.json
for exe in $B/ops/*.cuda; do
	s=$(basename "$exe" .cuda)
	$exe --steps 1 --conv-fp32 --dump-grads $TEST_OUT/op_$s.cuda.st >$TEST_OUT/op_$s.cuda.log 2>&1 &&
		$B/ops/$s.cpu --steps 1 --dump-grads $TEST_OUT/op_$s.cpu.st >$TEST_OUT/op_$s.cpu.log 2>&1 ||
		{ notok "gpu/op $s: run" $TEST_OUT/op_$s.cuda.log; continue; }
	check "gpu/op $s: gradients cuda vs cpu" compare_grads $TEST_OUT/op_$s.cuda.st $TEST_OUT/op_$s.cpu.st 1e-4
	check "gpu/op $s: gradcheck f64 on the GPU" $B/ops/$s.cuda64 --gradcheck
done
# attention in f32 and f64 on the FMA kernels (never run on a GPU before this script's first run after
# 2026-12-03), and f32 on tensor cores as 3xTF32 (before its first after 2026-12-06): within 1e-4 of the CPU's
# f32 (the SIMT emulator, tests/gradcheck, within 1e-5 as 3xTF32), the FMA kernels' f64 against finite differences
for way in fma tf32; do
	what="on the FMA kernels"
	[ $way = tf32 ] && what="as 3xTF32"
	for exe in $B/ops/*.cuda_$way; do
		s=$(basename "$exe" .cuda_$way)
		$exe --steps 1 --dump-grads $TEST_OUT/op_$s.cuda_$way.st >$TEST_OUT/op_$s.cuda_$way.log 2>&1 &&
			$B/ops/$s.cpu --steps 1 --dump-grads $TEST_OUT/op_$s.cpu_$way.st >>$TEST_OUT/op_$s.cuda_$way.log 2>&1 ||
			{ notok "gpu/op $s $what: run" $TEST_OUT/op_$s.cuda_$way.log; continue; }
		check "gpu/op $s $what: gradients cuda vs cpu" compare_grads $TEST_OUT/op_$s.cuda_$way.st $TEST_OUT/op_$s.cpu_$way.st 1e-4
		[ $way = fma ] && check "gpu/op $s $what: gradcheck f64 on the GPU" $B/ops/$s.cuda64_fma --gradcheck
	done
done
for exe in $B/ops/*.cudabf; do
	s=$(basename "$exe" .cudabf)
	$exe --steps 1 --lr 0 --save $TEST_OUT/bf_$s.p.st --dump-grads $TEST_OUT/bf_$s.cuda.st >$TEST_OUT/bf_$s.log 2>&1 &&
		$B/ops/$s.cpu --steps 1 --lr 0 --init $TEST_OUT/bf_$s.p.st --dump-grads $TEST_OUT/bf_$s.cpu.st >>$TEST_OUT/bf_$s.log 2>&1 ||
		{ notok "gpu/bf16 $s: run" $TEST_OUT/bf_$s.log; continue; }
	check "gpu/bf16 $s: gradients within 3% of f32's" compare_grads $TEST_OUT/bf_$s.cuda.st $TEST_OUT/bf_$s.cpu.st 0.03
done
# the tensor-core attention kernels (mma.m16n8k16, never run before session 14's) against the per-row ones
if $B/ops/attention_heads16.cudabf_ref --steps 1 --lr 0 --init $TEST_OUT/bf_attention_heads16.p.st \
	--dump-grads $TEST_OUT/bf_ah_ref.st >$TEST_OUT/bf_ah_ref.log 2>&1; then
	check "gpu/bf16 attention on GEMMs: within 2% of the per-row kernels" compare_grads $TEST_OUT/bf_attention_heads16.cuda.st \
		$TEST_OUT/bf_ah_ref.st 0.02
	$B/ops/attention_heads16.cudabf_mma --steps 1 --lr 0 --init $TEST_OUT/bf_attention_heads16.p.st \
		--dump-grads $TEST_OUT/bf_ah_mma.st >>$TEST_OUT/bf_ah_ref.log 2>&1 &&
		check "gpu/bf16 attention on tensor cores: within 2% of the per-row kernels" compare_grads $TEST_OUT/bf_ah_mma.st \
			$TEST_OUT/bf_ah_ref.st 0.02
else
	notok "gpu/bf16 attention_heads16 reference: run" $TEST_OUT/bf_ah_ref.log
fi
# attention on GEMMs: the forward's log-sum-exp written by its softmax rows and attn_dkv, bitwise
# as those passes apart (DPC_ATTN_APART=1), in f32 and bf16, and the same on dpc's tensor-core
# kernels (cudabf_mma), FMA kernels (cuda_fma) and 3xTF32 kernels (cuda_tf32); and every GEMM through cuBLAS's
# strided-batched calls (DPC_GEMM_BATCHED=1) against one product a call, within 1e-4
for x in cuda cudabf cudabf_mma cuda_fma cuda_tf32; do
	$B/gpt.$x --steps 3 --lr 0.01 --quiet --save $TEST_OUT/ga.$x.p --dump-grads $TEST_OUT/ga.$x.g >$TEST_OUT/ga.$x.log 2>&1 &&
		$B/gpt.${x}_apart --steps 3 --lr 0.01 --quiet --save $TEST_OUT/gap.$x.p --dump-grads $TEST_OUT/gap.$x.g \
			>>$TEST_OUT/ga.$x.log 2>&1 || { notok "gpu/attention $x: run" $TEST_OUT/ga.$x.log; continue; }
	check "gpu/attention $x: log-sum-exp kept and attn_dkv, bitwise as the passes apart" bash -c \
		"cmp $TEST_OUT/ga.$x.p $TEST_OUT/gap.$x.p && cmp $TEST_OUT/ga.$x.g $TEST_OUT/gap.$x.g"
done
# GPT on the tensor-core kernels against the CPU's f32 at the same parameters (heads of 16; the key
# bias's gradient, zero in exact arithmetic, is noise up to 1e-4 of the largest, as tests/bf16 says)
if $B/gpt.cudabf_mma --steps 1 --lr 0 --quiet --save $TEST_OUT/gm.p --dump-grads $TEST_OUT/gm.g >$TEST_OUT/gm.log 2>&1 &&
	$B/gpt_h2.cpu --steps 1 --lr 0 --quiet --init $TEST_OUT/gm.p --dump-grads $TEST_OUT/gm.cpu.g >>$TEST_OUT/gm.log 2>&1; then
	COMPARE_FLOOR=1e-4 check "gpu/attention cudabf_mma: GPT's gradients within 3% of the CPU's f32" compare_grads \
		$TEST_OUT/gm.g $TEST_OUT/gm.cpu.g 0.03
else
	notok "gpu/attention cudabf_mma: run" $TEST_OUT/gm.log
fi
# and as 3xTF32 against the CPU's f32 at the same parameters, within 1e-4
if $B/gpt.cuda_tf32 --steps 1 --lr 0 --quiet --save $TEST_OUT/gt.p --dump-grads $TEST_OUT/gt.g >$TEST_OUT/gt.log 2>&1 &&
	$B/gpt_h2.cpu --steps 1 --lr 0 --quiet --init $TEST_OUT/gt.p --dump-grads $TEST_OUT/gt.cpu.g >>$TEST_OUT/gt.log 2>&1; then
	COMPARE_FLOOR=1e-4 check "gpu/attention cuda_tf32: GPT's gradients within 1e-4 of the CPU's f32" compare_grads \
		$TEST_OUT/gt.g $TEST_OUT/gt.cpu.g 1e-4
else
	notok "gpu/attention cuda_tf32: run" $TEST_OUT/gt.log
fi
# the vocabulary's GEMMs split at 248 of V = 251 in bf16 (the logits' n, their adjoint's k) and whole: GPT's
# first gradients within 3% of the CPU's f32 at the same parameters (on the CPU target the split's are 0.8%)
for x in cudabf cudabf_whole; do
	if $B/gpt_v251.$x --steps 1 --lr 0 --quiet --save $TEST_OUT/gv.$x.p --dump-grads $TEST_OUT/gv.$x.g >$TEST_OUT/gv.$x.log 2>&1 &&
		$B/gpt_v251.cpu --steps 1 --lr 0 --quiet --init $TEST_OUT/gv.$x.p --dump-grads $TEST_OUT/gv.$x.cpu.g >>$TEST_OUT/gv.$x.log 2>&1; then
		COMPARE_FLOOR=1e-4 check "gpu/gemm $x at V = 251: GPT's gradients within 3% of the CPU's f32" compare_grads \
			$TEST_OUT/gv.$x.g $TEST_OUT/gv.$x.cpu.g 0.03
	else
		notok "gpu/gemm $x at V = 251: run" $TEST_OUT/gv.$x.log
	fi
done
# GEMMs with cuBLASLt's epilogues (bias; bias and GELU, z beside; GELU's derivative; a bias's gradient in the
# weight's GEMM): GPT at D = 128, its first
# gradients against the same plan apart (DPC_EPILOGUE=off) and the CPU's f32 at the same parameters, f32 within
# 1e-3 (the epilogue's GELU is cuBLASLt's), bf16 within 3% (one rounding fewer); and the epilogues taken, not
# made apart (--profile names each call)
for pr in f32 bf16; do
	tol=1e-3
	[ $pr = bf16 ] && tol=0.03
	if $B/gpt_ep.$pr --steps 1 --lr 0 --quiet --save $TEST_OUT/ge.$pr.p --dump-grads $TEST_OUT/ge.$pr.g >$TEST_OUT/ge.$pr.log 2>&1 &&
		$B/gpt_ep.$pr.off --steps 1 --lr 0 --quiet --init $TEST_OUT/ge.$pr.p --dump-grads $TEST_OUT/ge.$pr.off.g >>$TEST_OUT/ge.$pr.log 2>&1 &&
		$B/gpt_ep.cpu --steps 1 --lr 0 --quiet --init $TEST_OUT/ge.$pr.p --dump-grads $TEST_OUT/ge.$pr.cpu.g >>$TEST_OUT/ge.$pr.log 2>&1; then
		COMPARE_FLOOR=1e-4 check "gpu/epilogues $pr: GPT's gradients within $tol of apart" compare_grads $TEST_OUT/ge.$pr.g \
			$TEST_OUT/ge.$pr.off.g $tol
		COMPARE_FLOOR=1e-4 check "gpu/epilogues $pr: GPT's gradients within $tol of the CPU's f32" compare_grads $TEST_OUT/ge.$pr.g \
			$TEST_OUT/ge.$pr.cpu.g $tol
		$B/gpt_ep.$pr --steps 2 --lr 0 --quiet --profile >$TEST_OUT/ge.$pr.prof 2>&1
		check "gpu/epilogues $pr: cuBLASLt made them (--profile's gemm+bias, gemm+gelu_bias, gemm+dgelu, gemm+bgrad)" bash -c \
			"grep -q 'gemm+bias' $TEST_OUT/ge.$pr.prof && grep -q 'gemm+gelu_bias' $TEST_OUT/ge.$pr.prof &&
			grep -q 'gemm+dgelu' $TEST_OUT/ge.$pr.prof && grep -q 'gemm+bgrad' $TEST_OUT/ge.$pr.prof"
	else
		notok "gpu/epilogues $pr: run" $TEST_OUT/ge.$pr.log
	fi
done
if DPC_GEMM_BATCHED=1 $B/gpt.cuda --steps 3 --lr 0.01 --quiet --dump-grads $TEST_OUT/gb.g >$TEST_OUT/gb.log 2>&1; then
	check "gpu/gemm: one product a call against strided-batched, gradients within 1e-4" compare_grads $TEST_OUT/gb.g \
		$TEST_OUT/ga.cuda.g 1e-4
else
	notok "gpu/gemm: strided-batched run" $TEST_OUT/gb.log
fi
# buffers: the updates' copies and the literal's global array, against the CPU
if $B/buffers.cuda_buf --steps 5 --lr 0.05 --save $TEST_OUT/buf.cuda.st --summary-json $TEST_OUT/buf.cuda.json >$TEST_OUT/buf.log 2>&1 &&
	$B/buffers.cpu_buf --steps 5 --lr 0.05 --save $TEST_OUT/buf.cpu.st >>$TEST_OUT/buf.log 2>&1; then
	check "gpu/buffers: parameters and buffers cuda vs cpu" compare_grads $TEST_OUT/buf.cuda.st $TEST_OUT/buf.cpu.st 1e-4
	check "gpu/buffers: the step count" python3 -c "import json, sys; s = json.load(open(sys.argv[1])); assert s['reports'] == {'seen': 4}, s" $TEST_OUT/buf.cuda.json
else
	notok "gpu/buffers: run" $TEST_OUT/buf.log
fi
for sched in cosine linear; do
	check "gpu/optim adamw $sched: within 1e-10 of the float64 reference" python3 $B/optim_ref.py $B/optim_adam.cuda64 $TEST_OUT adamw $sched
done
check "gpu/optim adamw clipped: within 1e-10 of the float64 reference" python3 $B/optim_ref.py $B/optim_adam.cuda64 $TEST_OUT adamw cosine 0.5
check "gpu/optim adamw accumulated: within 1e-10 of the float64 reference" python3 $B/optim_ref.py $B/optim_adam.cuda64 $TEST_OUT adamw cosine 0 3
# exact resume on the GPU: killed at 5 random moments, resumed, byte-identical (resident and streamed Adam)
for x in res str; do
	check "gpu/resume $x: killed and resumed, parameters byte-identical" bash $B/kill_resume.sh $TEST_OUT/kr_$x \
		$B/stream/$x.adam.none --steps 200 --optimizer adamw --lr-schedule cosine --warmup 20
done
check "gpu/bf16 resmlp: the loss falls" bash -c "$B/resmlp.cudabf --steps 60 --lr 0.01 --summary-json $TEST_OUT/bf_res.json >$TEST_OUT/bf_res.log 2>&1 && python3 -c \"import json; s = json.load(open('$TEST_OUT/bf_res.json')); assert s['loss_last'] < 0.9 * s['loss_first'], s\""
# fused loops: bitwise as the unfused build, as the CPU within 1e-4, a few launches; and --graph
# (dp_step captured once, replayed) leaves the parameters after 10 steps bitwise as without it
for x in $B/fuse/cell.none $B/fuse/cell.binomial $B/fuse/cell.auto $B/fuse/rnn.none $B/fuse/rnn.binomial $B/fuse/rnn.auto; do
	ck=$(basename $x)
	$x --steps 1 --dump-grads $TEST_OUT/fc.$ck.g --summary-json $TEST_OUT/fc.$ck.json >$TEST_OUT/fc.$ck.log 2>&1 &&
		$x.nf --steps 1 --dump-grads $TEST_OUT/fc.$ck.nf.g >>$TEST_OUT/fc.$ck.log 2>&1 &&
		$x.cpu --steps 1 --dump-grads $TEST_OUT/fc.$ck.cpu.g >>$TEST_OUT/fc.$ck.log 2>&1 || { notok "gpu/fuse $ck: run" $TEST_OUT/fc.$ck.log; continue; }
	check "gpu/fuse $ck: gradients bitwise as unfused" compare_grads $TEST_OUT/fc.$ck.g $TEST_OUT/fc.$ck.nf.g 0
	check "gpu/fuse $ck: gradients as the CPU's" compare_grads $TEST_OUT/fc.$ck.g $TEST_OUT/fc.$ck.cpu.g 1e-4
	check "gpu/fuse $ck: at most 20 launches" python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['kernel_launches'] <= 20, j['kernel_launches']" $TEST_OUT/fc.$ck.json
	$x --steps 10 --quiet --save $TEST_OUT/fg.$ck.p --summary-json $TEST_OUT/fg.$ck.eager.json >$TEST_OUT/fg.$ck.log 2>&1 &&
		$x --steps 10 --quiet --graph --save $TEST_OUT/fg.$ck.gp --summary-json $TEST_OUT/fg.$ck.graph.json >>$TEST_OUT/fg.$ck.log 2>&1 ||
		{ notok "gpu/graph $ck: run" $TEST_OUT/fg.$ck.log; continue; }
	check "gpu/graph $ck: parameters after 10 steps bitwise as without" cmp $TEST_OUT/fg.$ck.p $TEST_OUT/fg.$ck.gp
	check "gpu/graph $ck: 9 steps replayed, the same counts" python3 -c "
import json, sys
e, g = (json.load(open(a)) for a in sys.argv[1:3])
assert g['graph_steps'] == 9 and e['graph_steps'] == 0, (g['graph_steps'], e['graph_steps'])
for k in ('kernel_launches', 'gemm_calls', 'copy_calls', 'recomputed_steps', 'forward_steps', 'loss_last'):
    assert e[k] == g[k], (k, e[k], g[k])" $TEST_OUT/fg.$ck.eager.json $TEST_OUT/fg.$ck.graph.json
done
check "gpu/fuse cell: gradcheck f64 through the fused kernels" $B/fuse/cell64 --gradcheck
check "gpu/fuse oscillator T=10^6: at most 300 launches a step" bash -c "$B/fuse/osc1e6 --steps 2 --quiet --summary-json $TEST_OUT/osc1e6.json >$TEST_OUT/osc1e6.log 2>&1 && python3 -c \"import json; j = json.load(open('$TEST_OUT/osc1e6.json')); assert j['kernel_launches'] <= 600, j['kernel_launches']\""
# --trace on the GPU: CUDA events for the compute stream, timing events on the copy stream
check "gpu/trace resmlp: events add up to the run's counts" bash -c "$B/resmlp.cuda --steps 3 --quiet --trace $TEST_OUT/tr.json --trace-steps 2:3 --summary-json $TEST_OUT/tr.sum.json >$TEST_OUT/tr.log 2>&1 && python3 $B/trace_check.py $TEST_OUT/tr.json $TEST_OUT/tr.sum.json 2 3"
check "gpu/trace streamed resmlp: copies timed on the copy stream" bash -c "$B/stream/str.sgd.none --steps 2 --quiet --trace $TEST_OUT/trs.json --summary-json $TEST_OUT/trs.sum.json >$TEST_OUT/trs.log 2>&1 && python3 $B/trace_check.py $TEST_OUT/trs.json $TEST_OUT/trs.sum.json 2 2 copies"
# GEMMs in a captured graph (cuBLAS with its workspace): resmlp, eager and --graph
if $B/resmlp.cuda --steps 10 --quiet --save $TEST_OUT/gr.p >$TEST_OUT/gr.log 2>&1 &&
	$B/resmlp.cuda --steps 10 --quiet --graph --save $TEST_OUT/gr.gp >>$TEST_OUT/gr.log 2>&1; then
	check "gpu/graph resmlp: parameters after 10 steps bitwise as without" cmp $TEST_OUT/gr.p $TEST_OUT/gr.gp
else
	notok "gpu/graph resmlp: run" $TEST_OUT/gr.log
fi
# streaming on the GPU: copy stream, events, pinned pool; bitwise equal to resident, bytes as predicted
for res in $B/stream/res.*; do
	tag=${res#$B/stream/res.}
	str=$B/stream/str.$tag
	$res --steps 5 --quiet --save $TEST_OUT/sr.$tag.p --dump-grads $TEST_OUT/sr.$tag.g >$TEST_OUT/sr.$tag.log 2>&1 &&
		$str --steps 5 --quiet --save $TEST_OUT/ss.$tag.p --dump-grads $TEST_OUT/ss.$tag.g --summary-json $TEST_OUT/ss.$tag.json \
			>$TEST_OUT/ss.$tag.log 2>&1 || { notok "gpu/stream $tag: run" $TEST_OUT/ss.$tag.log; continue; }
	check "gpu/stream $tag: parameters and gradients equal to resident" bash -c \
		"cmp $TEST_OUT/sr.$tag.p $TEST_OUT/ss.$tag.p || python3 $B/compare.py $TEST_OUT/sr.$tag.p $TEST_OUT/ss.$tag.p 0"
	check "gpu/stream $tag: bytes as predicted" python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
for k in ('h2d_bytes', 'd2h_bytes', 'stream_h2d_bytes', 'stream_d2h_bytes'):
    assert j[k] == j['predicted_' + k], (k, j[k], j['predicted_' + k])
assert j['peak_device_bytes'] == j['predicted_device_bytes']
print(j['stream_h2d_bytes'], j['stream_d2h_bytes'])" $TEST_OUT/ss.$tag.json
done
# --clip-grad and --accum streamed: the units' updates deferred (their gradients through pinned host
# memory, a pass after the step when clipped), bitwise as resident, bytes as predicted
for tag in adam.none adam.binomial sgd.hs; do
	for a in "--clip-grad 0.05" "--accum 3" "--accum 2 --clip-grad 0.05"; do
		t="$tag.$(echo $a | tr -d ' -')"
		$B/stream/res.$tag --steps 5 --quiet $a --save $TEST_OUT/dr.$t.p >$TEST_OUT/dr.$t.log 2>&1 &&
			$B/stream/str.$tag --steps 5 --quiet $a --save $TEST_OUT/ds.$t.p --summary-json $TEST_OUT/ds.$t.json \
				>>$TEST_OUT/dr.$t.log 2>&1 || { notok "gpu/stream deferred $t: run" $TEST_OUT/dr.$t.log; continue; }
		check "gpu/stream deferred $t: parameters bitwise as resident" cmp $TEST_OUT/dr.$t.p $TEST_OUT/ds.$t.p
		check "gpu/stream deferred $t: bytes as predicted" python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
for k in ('h2d_bytes', 'd2h_bytes', 'stream_h2d_bytes', 'stream_d2h_bytes'):
    assert j[k] == j['predicted_' + k], (k, j[k], j['predicted_' + k])
assert j['peak_device_bytes'] == j['predicted_device_bytes']" $TEST_OUT/ds.$t.json
	done
done
# data parallelism's NCCL path on one GPU: mpirun -np 1 sums through NCCL (a world of one), bitwise as alone
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if command -v mpirun >/dev/null; then
	if $B/stream/res.adam.none --steps 5 --quiet --save $TEST_OUT/nccl.alone.p >$TEST_OUT/nccl.log 2>&1 &&
		mpirun -np 1 $B/stream/res.adam.none --steps 5 --quiet --save $TEST_OUT/nccl.one.p --summary-json $TEST_OUT/nccl.json \
			>>$TEST_OUT/nccl.log 2>&1 &&
		mpirun -np 1 $B/stream/str.adam.none --steps 5 --quiet --save $TEST_OUT/nccl.str.p >>$TEST_OUT/nccl.log 2>&1; then
		check "gpu/nccl world of 1: parameters bitwise as alone" cmp $TEST_OUT/nccl.alone.p $TEST_OUT/nccl.one.p
		check "gpu/nccl world of 1, streamed units summed in the sweep: bitwise as alone" cmp $TEST_OUT/nccl.alone.p $TEST_OUT/nccl.str.p
		check "gpu/nccl: the bytes summed as predicted" python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['ranks'] == 1 and j['allreduce_bytes'] == j['predicted_allreduce_bytes'] > 0, j" $TEST_OUT/nccl.json
	else
		notok "gpu/nccl world of 1: run" $TEST_OUT/nccl.log
	fi
else
	notok "gpu/nccl: no mpirun on the GPU machine (Open MPI)"
fi
# --graph with --accum: the last micro-batch captured and replayed, the others call by call
if $B/resmlp.cuda --steps 10 --quiet --accum 3 --save $TEST_OUT/ga.p >$TEST_OUT/ga.log 2>&1 &&
	$B/resmlp.cuda --steps 10 --quiet --accum 3 --graph --save $TEST_OUT/ga.gp --summary-json $TEST_OUT/ga.json >>$TEST_OUT/ga.log 2>&1; then
	check "gpu/graph resmlp --accum 3: parameters after 10 steps bitwise as without" cmp $TEST_OUT/ga.p $TEST_OUT/ga.gp
	check "gpu/graph resmlp --accum 3: 9 steps replayed" python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['graph_steps'] == 9" $TEST_OUT/ga.json
else
	notok "gpu/graph resmlp --accum 3: run" $TEST_OUT/ga.log
fi
# compute-sanitizer last: its checks are the slowest (memcheck, racecheck, synccheck and initcheck on
# the shared-memory and shuffle paths, fused loops, streaming), so that a short lease runs the rest first
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$SAN" ]; then
	check "gpu/compute-sanitizer buffers" bash -c "'$SAN' --error-exitcode 3 $B/buffers.cuda_buf --steps 3 >$TEST_OUT/san_buf.log 2>&1 && grep -Eq 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)' $TEST_OUT/san_buf.log || { cat $TEST_OUT/san_buf.log; false; }"
	check "gpu/compute-sanitizer resmlp" bash -c "'$SAN' --error-exitcode 3 $B/resmlp.cuda --steps 3 >$TEST_OUT/san.log 2>&1 && grep -Eq 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)' $TEST_OUT/san.log || { cat $TEST_OUT/san.log; false; }"
	# the shared-memory and shuffle paths: races and uninitialised reads too
	# (seg_xent: two block reductions in a row, raced on 2026-11-27)
	for tool in memcheck racecheck synccheck initcheck; do
		for s in wide attention_tiles attention_heads16 attention_mma seg_xent; do
			x=$B/ops/$s.cuda
			[ $s = attention_heads16 ] && x=$B/ops/$s.cudabf
			[ $s = attention_mma ] && x=$B/ops/attention_heads16.cudabf_mma
			check "gpu/compute-sanitizer $tool $s" bash -c "'$SAN' --tool $tool --error-exitcode 3 $x --steps 2 >$TEST_OUT/san_${tool}_$s.log 2>&1 && grep -Eq 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)' $TEST_OUT/san_${tool}_$s.log || { cat $TEST_OUT/san_${tool}_$s.log; false; }"
		done
	done
else
	notok "gpu/compute-sanitizer not found"
fi
if [ -n "$SAN" ]; then
	for tool in memcheck racecheck synccheck; do
		check "gpu/compute-sanitizer $tool fused cell" bash -c "'$SAN' --tool $tool --error-exitcode 3 $B/fuse/cell.auto --steps 2 >$TEST_OUT/san_fuse_$tool.log 2>&1 && grep -Eq 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)' $TEST_OUT/san_fuse_$tool.log || { cat $TEST_OUT/san_fuse_$tool.log; false; }"
	done
fi
if [ -n "$SAN" ]; then
	for tool in memcheck racecheck synccheck; do
		check "gpu/compute-sanitizer $tool streamed, deferred (--accum 2 --clip-grad)" bash -c "'$SAN' --tool $tool --error-exitcode 3 $B/stream/str.adam.binomial --steps 2 --accum 2 --clip-grad 0.05 >$TEST_OUT/san_def_$tool.log 2>&1 && grep -Eq 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)' $TEST_OUT/san_def_$tool.log || { cat $TEST_OUT/san_def_$tool.log; false; }"
	done
	check "gpu/compute-sanitizer streamed resmlp (adam, binomial)" bash -c "'$SAN' --error-exitcode 3 $B/stream/str.adam.binomial --steps 3 >$TEST_OUT/san_stream.log 2>&1 && grep -Eq 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)' $TEST_OUT/san_stream.log || { cat $TEST_OUT/san_stream.log; false; }"
	check "gpu/compute-sanitizer snapshots in host memory" bash -c "'$SAN' --error-exitcode 3 $B/stream/str.sgd.hs --steps 2 >$TEST_OUT/san_hs.log 2>&1 && grep -Eq 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)' $TEST_OUT/san_hs.log || { cat $TEST_OUT/san_hs.log; false; }"
	check "gpu/compute-sanitizer synccheck streamed resmlp" bash -c "'$SAN' --tool synccheck --error-exitcode 3 $B/stream/str.sgd.none --steps 2 >$TEST_OUT/san_stream2.log 2>&1 && grep -Eq 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)' $TEST_OUT/san_stream2.log || { cat $TEST_OUT/san_stream2.log; false; }"
fi
finish
