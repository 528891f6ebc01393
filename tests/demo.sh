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
echo
echo "== a model 8x larger than its device budget: 64 layers of 256 x 256 with Adam (50.6 MB of"
echo "   parameters and state) in --device-mem 6328704: the largest parameters stream from host memory, one layer at a time"
bin/dpc "${target[@]}" -D L=64 -D H=256 -D B=8 --optimizer adam --device-mem 6328704 --emit=schedule "$sample" | tail -5
bin/dpc "${target[@]}" -D L=64 -D H=256 -D B=8 --optimizer adam --device-mem 6328704 "$sample" -o "out/${name}_big"
"out/${name}_big" --steps 30 --lr 0.0003 --log-every 10 --summary-json "out/${name}_big.json"
grep -E '"(peak_device_bytes|host_pool_bytes|stream_h2d_bytes|predicted_stream_h2d_bytes)"' "out/${name}_big.json"
