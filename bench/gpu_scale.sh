#!/usr/bin/env bash
# The seeds' claims at the size one GPU machine allows (issue 39), on the
# GPU machine from gpu_build/ (`bash tests/gpu/run.sh build` here), within
# 8 minutes:
#  1. one step of the 250,004-layer ResNet (samples/resnet.dp, N = 41666,
#     binomial checkpointing): its time, peak and recomputed steps;
#  2. a few steps of a GPT (48 layers, 2560 wide: 3.8 billion parameters)
#     whose weights and Adam state (their f32 master copies and moments),
#     45.3 GB, are 8x its --device-mem of 5,400 MiB, in bf16-mixed,
#     streamed from pinned host memory with the layers' optimizer steps on
#     the host (issue 60): ms/step against max(the cost model's compute,
#     bytes / the link's bandwidth measured in the same run, the host
#     update's time measured in the same run), which the three overlapped
#     would reach.
# Figures to $OUT/gpu_scale.md (else /tmp/gpu_scale.md).
#   SCALE_STEPS (default 3): the GPT's timed steps
set -u
cd "$(dirname "$0")/.."
B=gpu_build
out=${OUT:-/tmp}/gpu_scale.md
log=${OUT:-/tmp}/gpu_scale.log
: >"$out"
: >"$log"
say() { echo "$*" | tee -a "$out"; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
say "## bench/gpu_scale.sh — $(date -u +%Y-%m-%d), one ${gpu:-unknown GPU}, $(free -g | awk 'NR == 2 { print $2 }') GiB host RAM"
say ""
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }

say "### the 250,004-layer ResNet, one step"
say ""
if timeout 200 $B/resnet250k.cuda --steps 1 --lr 1e-4 --quiet --summary-json /tmp/r250k.json >>"$log" 2>&1; then
	say "- $(python3 -c "import json; s = json.load(open('/tmp/r250k.json')); print(f\"{s['ms_per_step'] / 1000:.1f} s/step, peak {s['peak_device_bytes'] / 2**20:.1f} MiB, forward steps {s['forward_steps']}, recomputed steps {s['recomputed_steps']}\")")"
else
	say "- failed or over 200 s (status $?; gpu_scale.log)"
fi
say ""

say "### a GPT 8x its device memory, streamed, bf16-mixed, the layers' steps on the host"
say ""
bw=$(timeout 30 python3 bench/h2d_bw.py 2>>"$log") || bw=0
say "- pinned host-to-device bandwidth: $bw GB/s"
if timeout 220 $B/gpt_scale.cuda --steps "${SCALE_STEPS:-3}" --lr 1e-5 --quiet --summary-json /tmp/gscale.json >>"$log" 2>&1; then
	python3 - "$bw" $B/kernels/gpt_scale.json <<'PY' | tee -a "$out"
import json, sys
bw, plan = float(sys.argv[1]) * 1e9, json.load(open(sys.argv[2]))
s = json.load(open("/tmp/gscale.json"))
up = s["stream_h2d_bytes"] / s["steps"]
down = s["stream_d2h_bytes"] / s["steps"]
# a stream each way: the link carries both at once
link = max(up, down) / bw * 1000 if bw else float("nan")
compute = sum(k["count"] * k["predicted_us"] for k in plan["kernels"]) / 1000
host = s["host_update_s"] / s["steps"] * 1000
bound = max(compute, link, host)
which = ("compute", "link", "host update")[[compute, link, host].index(bound)]
h = plan["host_update"]
print(f"- {s['ms_per_step']:.0f} ms/step, peak {s['peak_device_bytes'] / 2**30:.2f} GiB of --device-mem 5.27 GiB; "
      f"{up / 2**30:.1f} GiB host->device and {down / 2**30:.1f} GiB device->host a step, "
      f"{h['h2d_bytes_per_element']:.3g} / {h['d2h_bytes_per_element']:.3g} bytes a streamed parameter")
print(f"- max(predicted compute {compute:.0f} ms, bytes / link {link:.0f} ms, the host update {host:.0f} ms measured) "
      f"= {bound:.0f} ms ({which}): measured / bound = {s['ms_per_step'] / bound:.2f}; the cost model predicted "
      f"{plan['predicted_step_ms']:.0f} ms ({plan['predicted_bound']}, the host update at "
      f"{plan['host_bandwidth'] / 1e9:.0f} GB/s)")
PY
else
	say "- failed or over 220 s (status $?; gpu_scale.log)"
fi
echo "written to $out"
