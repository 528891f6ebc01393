#!/usr/bin/env bash
# The seeds' networks against PyTorch, in the same run.
#
#   bash bench/nets.sh cpu [ROUNDS]
#     here, on the CPU: samples/gpt.dp (L=4, D=128, 4 heads, T=128, V=256,
#     B=8) and samples/resnet.dp (B=32, 32x32 images, C=16, N=3) against
#     their twins in bench/nets_torch.py (PyTorch eager, fp32, SGD), each at 1
#     and 2 threads. Each round runs dpc and PyTorch back to back per model and
#     thread count; the ratio printed is the median over ROUNDS (default 3) of
#     the rounds' dpc / PyTorch, since a shared machine's speed drifts
#     between runs. PyTorch comes from $PYTHON (default: the first python3
#     that imports torch; Debian's is python3-torch).
#
#   bash bench/nets.sh [gpu]
#     on the GPU machine, after `bash tests/gpu/run.sh build` here: samples/gpt.dp
#     at GPT-2 124M's shape and samples/resnet.dp ResNet-56-like, against the same
#     networks in PyTorch eager and torch.compile (bench/nets_torch.py), fp32 and
#     SGD on both sides, and GPT-2 124M in bf16 at B=32 (the issue's reference
#     setting); then one step of the 250,004-layer ResNet.
set -u
cd "$(dirname "$0")/.."
if [ "${1:-gpu}" = cpu ]; then
	rounds=${2:-3}
	py=${PYTHON:-}
	if [ -z "$py" ]; then
		for p in python3 /usr/bin/python3; do
			"$p" -c "import torch" 2>/dev/null && { py=$p; break; }
		done
	fi
	[ -n "$py" ] || { echo "bench/nets.sh cpu needs PyTorch: apt-get install python3-torch, or set PYTHON"; exit 1; }
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' EXIT
	gpt="-D L=4 -D D=128 -D H=4 -D T=128 -D V=256 -D B=8" resnet="-D B=32 -D S=32 -D C=16 -D N=3"
	bin/dpc --target cpu $gpt samples/gpt.dp -o "$dir/gpt" || exit 1
	bin/dpc --target cpu $resnet samples/resnet.dp -o "$dir/resnet" || exit 1
	echo "$(date -u +%F), $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; dpc $(git rev-parse --short HEAD 2>/dev/null); $("$py" -c 'import torch; print("PyTorch", torch.__version__)')"
	steps=${STEPS:-20}
	for r in $(seq "$rounds"); do
		for t in 1 2; do
			for m in gpt resnet; do
				OMP_NUM_THREADS=$t "$dir/$m" --steps $steps --quiet --summary-json "$dir/$m.$t.$r.json" >/dev/null || exit 1
				if [ $m = gpt ]; then args="gpt -L 4 -D 128 -H 4 -T 128 -V 256 -B 8"; else args="resnet -B 32 -S 32 -C 16 -N 3"; fi
				OMP_NUM_THREADS=$t "$py" bench/nets_torch.py $args --steps $steps --device cpu >"$dir/$m.$t.$r.torch" || exit 1
			done
		done
	done
	python3 - "$dir" "$rounds" <<'PY'
import json, re, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
print("| model | threads | dpc ms/step | PyTorch ms/step | dpc / PyTorch (median of %d rounds) |" % rounds)
print("| --- | --- | --- | --- | --- |")
for m in ("gpt", "resnet"):
    for t in (1, 2):
        ours = [json.load(open(f"{d}/{m}.{t}.{r}.json"))["ms_per_step"] for r in range(1, rounds + 1)]
        theirs = [float(re.search(r": ([0-9.]+) ms/step", open(f"{d}/{m}.{t}.{r}.torch").read()).group(1)) for r in range(1, rounds + 1)]
        ratio = statistics.median(o / p for o, p in zip(ours, theirs))
        print(f"| {m} | {t} | {' '.join(f'{x:.1f}' for x in ours)} | {' '.join(f'{x:.1f}' for x in theirs)} | {ratio:.2f} |")
PY
	exit 0
fi
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
