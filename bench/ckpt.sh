#!/usr/bin/env bash
# On the GPU machine, after `bash tests/gpu/run.sh build` here: the residual
# MLP at L = 1024 (H = B = 1024, fp32, SGD), time overhead of binomial
# checkpointing with 33 snapshots against store-everything, beside PyTorch's
# checkpoint_sequential at sqrt(L) = 32 segments against its own plain run;
# --checkpoint auto with 32 snapshots (the sweep schedule, taped actions of
# up to 32 steps from a tape of 32 rows, the last 32 steps taped by the
# forward loop: PyTorch's count and memory) beside them;
# then binomial with 64, 128 and 256 snapshots, to compare at the device
# memory PyTorch's checkpointed run took; last, issue 11's two targets:
# auto under --device-mem at checkpoint_sequential(32)'s memory and at a
# quarter of it (pooled rows, relu masks in bits), their overhead over
# dpc's store-everything step against PyTorch's and against 1.6.
set -u
cd "$(dirname "$0")/.."
B=gpu_build
steps=${STEPS:-10}
# --lr 0: at L = 1024 the residual sum grows to a loss of about 1e9 at step 1
# and SGD at any useful rate makes it infinite by step 2; the timing is the same
json() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }
$B/resmlp_1024.cuda --steps $steps --lr 0 --quiet --summary-json /tmp/none.json >/dev/null || exit 1
$B/resmlp_1024_binomial.cuda --steps $steps --lr 0 --quiet --summary-json /tmp/bin.json >/dev/null || exit 1
t_none=$(json /tmp/none.json ms_per_step) t_bin=$(json /tmp/bin.json ms_per_step)
m_none=$(json /tmp/none.json peak_device_bytes) m_bin=$(json /tmp/bin.json peak_device_bytes)
p0=$(python3 bench/resmlp_torch.py -L 1024 --steps $steps) || exit 1
p1=$(python3 bench/resmlp_torch.py -L 1024 --steps $steps --checkpoint-segments 32) || exit 1
echo "$p0"
echo "$p1"
python3 - "$t_none" "$t_bin" "$m_none" "$m_bin" "$p0" "$p1" <<'PY'
import re, sys
t0, t1, m0, m1 = map(float, sys.argv[1:5])
def ms(line):
    return float(re.search(r": ([0-9.]+) ms/step", line).group(1))
q0, q1 = ms(sys.argv[5]), ms(sys.argv[6])
print(f"dpc: none {t0:.1f} ms ({m0 / 2**20:.0f} MiB), binomial s=33 {t1:.1f} ms ({m1 / 2**20:.0f} MiB): overhead {t1 / t0:.2f}x")
print(f"PyTorch: plain {q0:.1f} ms, checkpoint_sequential(32) {q1:.1f} ms: overhead {q1 / q0:.2f}x")
PY
$B/resmlp_1024_auto.cuda --steps $steps --lr 0 --quiet --summary-json /tmp/auto.json >/dev/null || exit 1
python3 - "$t_none" /tmp/auto.json <<'PY'
import json, sys
t0, j = float(sys.argv[1]), json.load(open(sys.argv[2]))
print(f"dpc auto s=32 k=32 (the sweep's snapshots, 32-step taped actions): {j['ms_per_step']:.1f} ms, overhead {j['ms_per_step'] / t0:.2f}x, "
      f"peak {j['peak_device_bytes'] / 2**20:.0f} MiB, recomputed {j['recomputed_steps']} steps, {j['recomputed_fraction']:.3f} of a forward in FLOPs")
PY
for n in 64 128 256; do
	$B/resmlp_1024_binomial$n.cuda --steps $steps --lr 0 --quiet --summary-json /tmp/bin$n.json >/dev/null || exit 1
done
python3 - "$t_none" "$p1" /tmp/bin.json /tmp/bin64.json /tmp/bin128.json /tmp/bin256.json <<'PY'
import json, re, sys
t0, torch = float(sys.argv[1]), sys.argv[2]
peak = float(re.search(r"peak ([0-9.]+) MiB", torch).group(1))
for f, s in zip(sys.argv[3:], (33, 64, 128, 256)):
    j = json.load(open(f))
    mib = j["peak_device_bytes"] / 2**20
    note = "within" if mib <= peak else "above"
    print(f"dpc binomial s={s}: {j['ms_per_step']:.1f} ms, overhead {j['ms_per_step'] / t0:.2f}x, "
          f"peak {mib:.0f} MiB ({note} PyTorch's checkpointed {peak:.0f} MiB), recomputed {j['recomputed_steps']}")
PY
# issue 11's targets: auto under --device-mem at PyTorch's memory and at a quarter of it
# (pooled rows and relu masks in bits), each against dpc's own store-everything step
for m in torchmem quarter; do
	$B/resmlp_1024_$m.cuda --steps $steps --lr 0 --quiet --summary-json /tmp/$m.json >/dev/null || exit 1
done
python3 - "$t_none" "$p0" "$p1" /tmp/torchmem.json /tmp/quarter.json <<'PY'
import json, re, sys
t0 = float(sys.argv[1])
q0, q1 = (float(re.search(r": ([0-9.]+) ms/step", s).group(1)) for s in sys.argv[2:4])
torch = q1 / q0
for f, what, target in zip(sys.argv[4:], ("at checkpoint_sequential(32)'s memory", "at a quarter of it"), (torch, 1.6)):
    j = json.load(open(f))
    r = j["ms_per_step"] / t0
    print(f"dpc auto {what}: {j['ms_per_step']:.1f} ms, overhead {r:.3f}x (target <= {target:.3f}x: "
          f"{'met' if r <= target else 'missed'}), peak {j['peak_device_bytes'] / 2**20:.0f} MiB, "
          f"recomputed {j['recomputed_steps']} steps")
PY
