#!/usr/bin/env bash
# On the GPU machine, after `bash tests/gpu/run.sh build` here: one training
# step of bench/longstack.dp (250,000 layers, one shared weight) under
# binomial checkpointing, its peak device memory, and its time per layer
# against the same stack at 10,000 layers stored whole, with revolve's
# predicted ratio t/n of forward steps.
set -u
cd "$(dirname "$0")/.."
B=gpu_build
json() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }
$B/longstack.cuda --steps 2 --lr 1e-4 --quiet --summary-json /tmp/long.json >/dev/null || exit 1
$B/longstack_short.cuda --steps 3 --lr 1e-4 --quiet --summary-json /tmp/short.json >/dev/null || exit 1
python3 - /tmp/long.json /tmp/short.json <<'PY'
import json, sys
long, short = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
n_long, n_short = 250000, 10000
per_long = long["ms_per_step"] / n_long
per_short = short["ms_per_step"] / n_short
fwd = long["forward_steps"] / long["steps"]
rec = long["recomputed_steps"] / long["steps"]
print(f"250,000 layers, binomial: {long['ms_per_step']:.0f} ms/step, peak {long['peak_device_bytes'] / 2**20:.1f} MiB")
print(f"10,000 layers, store everything: {short['ms_per_step']:.1f} ms/step, peak {short['peak_device_bytes'] / 2**20:.1f} MiB")
print(f"time per layer: {per_long * 1e3:.2f} us vs {per_short * 1e3:.2f} us, ratio {per_long / per_short:.2f}")
print(f"revolve: {rec:.0f} recomputed steps for {fwd:.0f}, (t + n) / n = {(fwd + rec) / fwd:.2f}")
PY
