#!/usr/bin/env bash
# On the GPU machine, after `bash tests/gpu/run.sh build` here: samples/gpt.dp
# at GPT-2 124M's shape and samples/resnet.dp ResNet-56-like, against the same
# networks in PyTorch eager and torch.compile (bench/nets_torch.py), fp32 and
# SGD on both sides, and GPT-2 124M in bf16 at B=32 (the issue's reference
# setting); then one step of the 250,004-layer ResNet.
set -u
cd "$(dirname "$0")/.."
B=gpu_build
steps=${STEPS:-20}
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /'
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }
run() { # name exe per_step unit torch-args...
	local name=$1 exe=$2 per=$3 unit=$4
	shift 4
	"$B/$exe" --steps $steps --lr 1e-4 --quiet --summary-json /tmp/$name.json >/dev/null || { echo "$name: dpc failed"; return; }
	local ms peak
	ms=$(field /tmp/$name.json ms_per_step)
	peak=$(field /tmp/$name.json peak_device_bytes)
	python3 -c "print(f'dpc $name: {$ms:.3f} ms/step, {$per * 1000 / $ms:.0f} $unit/s, peak {$peak / 2**30:.2f} GiB')"
	python3 bench/nets_torch.py "$@" --steps $steps | while read -r line; do
		echo "$line"
		tms=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) ms\/step.*/\1/p')
		tpeak=$(echo "$line" | sed -n 's/.*peak \([0-9.]*\) GiB.*/\1/p')
		mode=$(echo "$line" | awk '{ print $3 }')
		[ -n "$tms" ] && python3 -c "print(f'  dpc / PyTorch {\"$mode\"}: time {$ms / $tms:.2f}, peak memory {$peak / 2**30 / $tpeak:.2f}')"
	done
}
run gpt2 gpt2.cuda $((${GPT_B:-8} * 1024)) tokens gpt -L 12 -D 768 -H 12 -T 1024 -V 50257 -B ${GPT_B:-8}
run gpt2bf gpt2bf.cuda $((32 * 1024)) tokens gpt -L 12 -D 768 -H 12 -T 1024 -V 50257 -B 32 --bf16
run resnet56 resnet56.cuda 128 images resnet -B 128 -S 32 -C 16 -N 9
echo "attention kernels in one GPT-2 fp32 step (dpc --profile: ms, share of the step, calls, kernel):"
$B/gpt2.cuda --steps 2 --lr 1e-4 --quiet --profile 2>&1 | grep -E "attention\[|attn_" || echo "  (no profile)"
echo "the 250,004-layer ResNet, one step under binomial checkpointing:"
$B/resnet250k.cuda --steps 1 --lr 1e-4 --summary-json /tmp/r250k.json | tail -1
python3 -c "import json; s = json.load(open('/tmp/r250k.json')); print({k: s[k] for k in ('ms_per_step', 'peak_device_bytes', 'forward_steps', 'recomputed_steps')})"
