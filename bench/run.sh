#!/usr/bin/env bash
# On the GPU machine, after `bash tests/gpu/run.sh build` here (which also
# builds bench/resmlp_big.dp): dpc's ms/step against PyTorch eager's on the
# same model, the same GPU, in the same run.
set -u
cd "$(dirname "$0")/.."
# on the GPU machine: gpu_build/'s packed folders (tests/gpu/unpack.sh)
[ -f gpu_build/dirs.tar.xz ] && { bash tests/gpu/unpack.sh || exit 1; }
B=gpu_build
steps=${STEPS:-30}
nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /'
$B/resmlp_big.cuda --steps $steps --lr 1e-4 --quiet --summary-json /tmp/big.json >/dev/null || exit 1
dpc_ms=$(python3 -c "import json; print(json.load(open('/tmp/big.json'))['ms_per_step'])")
torch_line=$(python3 bench/resmlp_torch.py --steps $steps) || exit 1
echo "$torch_line"
torch_ms=$(echo "$torch_line" | sed -n 's/.*: \([0-9.]*\) ms\/step.*/\1/p')
python3 -c "print(f'dpc L=64 H=1024 B=1024: {$dpc_ms:.3f} ms/step; PyTorch {$torch_ms:.3f} ms/step; ratio dpc/PyTorch {$dpc_ms / $torch_ms:.2f} (target <= 0.8)')"
echo "dpc's last step by kernel, GEMM and copy (--profile):"
$B/resmlp_big.cuda --steps 5 --lr 1e-4 --quiet --profile | head -24
