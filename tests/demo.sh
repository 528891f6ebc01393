#!/usr/bin/env bash
# make run: compile the default sample and train it, showing each stage.
set -eu
cd "$(dirname "$0")/.."
sample=${SAMPLE:-samples/resmlp.dp}
name=$(basename "$sample" .dp)
mkdir -p out
echo "== $sample"
sed -n '1,200p' "$sample"
echo
echo "== the adjoint program dpc derived (dpc --emit=grad), first lines"
bin/dpc --emit=grad "$sample" | sed -n '/# backward/,$p' | head -40
echo "   ..."
echo
echo "== compile: bin/dpc $sample -o out/$name"
bin/dpc "$sample" -o "out/$name"
echo
echo "== train: out/$name --steps 200 --optimizer adam --lr 0.003"
"out/$name" --steps 200 --optimizer adam --lr 0.003 --summary-json "out/$name.json"
echo
echo "== summary (out/$name.json)"
cat "out/$name.json"
echo
echo "== gradients against finite differences, in a float64 build"
bin/dpc --precision f64 "$sample" -o "out/${name}_f64"
"out/${name}_f64" --gradcheck
