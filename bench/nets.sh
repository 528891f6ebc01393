#!/usr/bin/env bash
# The seeds' networks against PyTorch, in the same run.
#
#   bash bench/nets.sh cpu [ROUNDS]
#     here, on the CPU: samples/gpt.dp (L=4, D=128, 4 heads, T=128, V=256,
#     B=8) and samples/resnet.dp (B=32, 32x32 images, C=16, N=3) against
#     their twins in bench/nets_torch.py (fp32, SGD): PyTorch eager and
#     torch.compile from $TORCH_PYTHON (current PyTorch, installed for the
#     benchmark only: python3 -m venv V && V/bin/pip install torch), and
#     Debian's PyTorch 1.13 eager from $OLD_PYTHON (default /usr/bin/python3
#     with python3-torch), each at 1 and 2 threads (dpc --threads N,
#     OMP_NUM_THREADS=N for PyTorch). A reference that is missing is left
#     out. Each round runs every program back to back per model and thread
#     count; a cell is the median over ROUNDS (default 5) of the rounds'
#     ms/step, a ratio the median of the rounds' ratios, since a shared
#     machine's speed drifts between runs. Then dpc's speed-up from 1 to 2
#     threads. The GPT twin applies samples/gpt.dp's residual dropout of 0.1
#     (TWIN_DROPOUT=0: none, the twin before 2026-11-26, which did less
#     work than dpc).
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
	rounds=${2:-5}
	new=${TORCH_PYTHON:-}
	old=${OLD_PYTHON:-/usr/bin/python3}
	[ -n "$new" ] && ! "$new" -c "import torch" 2>/dev/null && { echo "TORCH_PYTHON=$new does not import torch"; exit 1; }
	"$old" -c "import torch" 2>/dev/null || old=""
	[ -n "$new$old" ] || { echo "bench/nets.sh cpu needs PyTorch: TORCH_PYTHON=V/bin/python (pip install torch), or Debian's python3-torch"; exit 1; }
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' EXIT
	gpt="-D L=4 -D D=128 -D H=4 -D T=128 -D V=256 -D B=8" resnet="-D B=32 -D S=32 -D C=16 -D N=3"
	bin/dpc --target cpu $gpt samples/gpt.dp -o "$dir/gpt" || exit 1
	bin/dpc --target cpu $resnet samples/resnet.dp -o "$dir/resnet" || exit 1
	ver() { "$1" -c 'import torch; print(torch.__version__)' 2>/dev/null; }
	echo "$(date -u +%F), $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; GPT twin's dropout ${TWIN_DROPOUT:-0.1}; dpc $(git rev-parse --short HEAD 2>/dev/null)${new:+; PyTorch $(ver "$new")}${old:+; Debian PyTorch $(ver "$old")}"
	steps=${STEPS:-20}
	for r in $(seq "$rounds"); do
		for t in 1 2; do
			for m in gpt resnet; do
				if [ $m = gpt ]; then args="gpt -L 4 -D 128 -H 4 -T 128 -V 256 -B 8 --dropout ${TWIN_DROPOUT:-0.1}"; else args="resnet -B 32 -S 32 -C 16 -N 3"; fi
				"$dir/$m" --threads $t --steps $steps --quiet --summary-json "$dir/$m.$t.$r.json" >/dev/null || exit 1
				[ -n "$new" ] && { OMP_NUM_THREADS=$t "$new" bench/nets_torch.py $args --steps $steps --device cpu 2>/dev/null >"$dir/$m.$t.$r.new" || exit 1; }
				[ -n "$old" ] && { OMP_NUM_THREADS=$t "$old" bench/nets_torch.py $args --steps $steps --device cpu 2>/dev/null >"$dir/$m.$t.$r.old" || exit 1; }
			done
		done
	done
	python3 - "$dir" "$rounds" <<'PY'
import json, os, re, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
R = range(1, rounds + 1)
def torch(m, t, r, which, mode):
    f = f"{d}/{m}.{t}.{r}.{which}"
    if not os.path.exists(f):
        return None
    x = re.search(rf"{mode} .*: ([0-9.]+) ms/step", open(f).read())
    return float(x.group(1)) if x else None
refs = [("old", "eager", "PyTorch 1.13 eager"), ("new", "eager", "PyTorch eager"), ("new", "torch.compile", "torch.compile")]
refs = [x for x in refs if torch("gpt", 1, 1, x[0], x[1]) is not None]
print("| model | threads | dpc ms/step | " + " | ".join(x[2] for x in refs) + " | " + " | ".join("dpc / " + x[2] for x in refs) + " |")
print("| --- " * (3 + 2 * len(refs)) + "|")
med = statistics.median
ours = {}
for m in ("gpt", "resnet"):
    for t in (1, 2):
        o = [json.load(open(f"{d}/{m}.{t}.{r}.json"))["ms_per_step"] for r in R]
        ours[m, t] = o
        cells = [f"{med(o):.1f}"]
        ratios = []
        for which, mode, _ in refs:
            p = [torch(m, t, r, which, mode) for r in R]
            cells.append(f"{med(p):.1f}")
            ratios.append(f"{med(a / b for a, b in zip(o, p)):.2f}")
        print(f"| {m} | {t} | " + " | ".join(cells + ratios) + " |")
for m in ("gpt", "resnet"):
    print(f"dpc {m}: 2 threads {med(a / b for a, b in zip(ours[m, 1], ours[m, 2])):.2f}x as fast as 1 (median of the rounds' ratios)")
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
