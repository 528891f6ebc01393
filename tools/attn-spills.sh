#!/usr/bin/env bash
# ptxas's registers and stack for dpc's attention kernels (the forward,
# attn_dkv, attn_dq) over a sweep of GPT shapes, f32 and bf16, for sm_90
# (h100) and sm_80 (a100), on tensor cores where they take the shape (f32 as
# 3xTF32; f32 heads of 128 go to the FMA kernels): one line per kernel,
#   GPU PRECISION D H T B KERNEL REGISTERS STACK_BYTES
# and a last line counting those with stack. Needs ptxas (--emit=kernels).
#   bash tools/attn-spills.sh [DPC]
set -u
cd "$(dirname "$0")/.."
dpc=${1:-bin/dpc}
n=0 spill=0
for gpu in h100 a100; do
	for pr in f32 bf16; do
		for cfg in "768 12 1024 8" "512 8 1024 4" "1024 16 1024 4" "2048 32 1024 2" "256 4 256 4" "256 4 1024 4" \
			"1024 8 512 4" "1536 12 512 2" "512 8 256 4" "768 12 256 8" "1024 16 256 4"; do
			set -- $cfg
			while read -r name regs stack; do
				echo "$gpu $pr $cfg $name $regs $stack"
				n=$((n + 1))
				[ "$stack" != 0 ] && spill=$((spill + 1))
			done < <(DPC_ATTN_GEMM=off DPC_ATTN_TF32=on "$dpc" --target cuda --gpu $gpu --precision $pr -D L=1 -D D=$1 -D H=$2 \
				-D T=$3 -D V=1000 -D B=$4 samples/gpt.dp --emit=kernels 2>/dev/null |
				awk '$2 ~ /^(attention|attn_dkv|attn_dq)\[/ {print $2, $7, $8}')
		done
	done
done
echo "$spill of $n kernels with stack"
