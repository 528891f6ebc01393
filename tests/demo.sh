#!/usr/bin/env bash
# make run: compile the default sample and train it, showing each stage.
set -eu
cd "$(dirname "$0")/.."
sample=${SAMPLE:-samples/resmlp.dp}
name=$(basename "$sample" .dp)
mkdir -p out
# dpc's default target is cuda when it was built with the CUDA toolkit; the
# demo trains on the CPU where no GPU is visible.
target=()
if [ -z "${DPC_TARGET:-}" ] && ! ls /dev/nvidia0 >/dev/null 2>&1; then
	target=(--target cpu)
	echo "== no NVIDIA GPU here: compiling with --target cpu"
fi
echo "== $sample"
sed -n '1,200p' "$sample"
echo
echo "== the adjoint program dpc derived (dpc --emit=grad), first lines"
bin/dpc --emit=grad "$sample" | sed -n '/# backward/,$p' | head -40
echo "   ..."
echo
echo "== compile: bin/dpc ${target[*]} --optimizer adam $sample -o out/$name"
bin/dpc "${target[@]}" --optimizer adam "$sample" -o "out/$name"
echo
echo "== train: out/$name --steps 200 --lr 0.003"
"out/$name" --steps 200 --lr 0.003 --summary-json "out/$name.json"
echo
echo "== where one step's time goes: out/$name --steps 3 --profile --quiet"
"out/$name" --steps 3 --profile --quiet | head -14
echo
echo "== summary (out/$name.json)"
cat "out/$name.json"
echo
echo "== gradients against finite differences, in a float64 build"
bin/dpc "${target[@]}" --precision f64 "$sample" -o "out/${name}_f64"
"out/${name}_f64" --gradcheck
