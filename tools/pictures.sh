#!/usr/bin/env bash
# docs/observing.md's pictures, made by the commands it shows (tests/observe makes
# them again and compares, so they stay true):
#   bash tools/pictures.sh [DIR]     (default docs/img; needs bin/dpc, or $DPC; runs on the CPU)
set -eu
cd "$(dirname "$0")/.."
out=${1:-docs/img}
dpc=${DPC:-bin/dpc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
# the plan: GPT under a 700 KiB budget
"$dpc" --target cpu --device-mem 700K --emit=memplot samples/gpt.dp -o "$out/gpt_plan.svg"
# a run: its third step measured over the plan
"$dpc" --target cpu --device-mem 700K samples/gpt.dp -o "$tmp/gpt"
"$tmp/gpt" --steps 3 --quiet --memplot "$out/gpt_run.svg" >/dev/null
# loss curves: the residual MLP at two learning rates
"$dpc" --target cpu samples/resmlp.dp -o "$tmp/resmlp"
"$tmp/resmlp" --steps 300 --lr 0.01 --quiet --log-json "$tmp/lr0.01.jsonl" >/dev/null
"$tmp/resmlp" --steps 300 --lr 0.002 --quiet --log-json "$tmp/lr0.002.jsonl" >/dev/null
tools/plot_runs --smoothed "lr 0.01=$tmp/lr0.01.jsonl" "lr 0.002=$tmp/lr0.002.jsonl" -o "$out/resmlp_runs.svg" >/dev/null
# a timeline: the residual MLP with its weights streamed from host memory, its third step
"$dpc" --target cpu --stream params samples/resmlp.dp -o "$tmp/resmlp_streamed"
"$tmp/resmlp_streamed" --steps 3 --quiet --trace "$tmp/trace.json" >/dev/null
tools/plot_trace "$tmp/trace.json" -o "$out/resmlp_trace.svg" >/dev/null
echo "pictures in $out: gpt_plan.svg gpt_run.svg resmlp_runs.svg resmlp_trace.svg"
