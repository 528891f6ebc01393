"""--clip-grad and --accum with streamed parameters, whose updates wait for the
step's gradients (docs/streaming.md, Deferred updates).

usage: deferred.py OUT STREAMED RESIDENT SCHEDULE.json [ARGS...]

Trains STREAMED and RESIDENT (the same model, compiled with and without
--stream params) under each setting below, ARGS added, and checks:
  - the saved parameters are byte-identical;
  - the streamed run's device peak is the planned one (no memory is added);
  - the streamed run's transfers are those its summary predicts;
  - its streamed bytes per step are those --emit=schedule's deferred_updates
    figures (SCHEDULE.json, the streamed build's) add up to.
"""
import filecmp
import json
import subprocess
import sys

out, streamed, resident, sched = sys.argv[1:5]
extra = sys.argv[5:]
plan = json.load(open(sched))
d = plan["deferred_updates"]
full_h2d, full_d2h = plan["transfers"]["h2d_bytes"], plan["transfers"]["d2h_bytes"]
steps = 4
settings = [["--clip-grad", "0.05"], ["--accum", "3"], ["--accum", "2", "--clip-grad", "0.05"], ["--clip-grad", "1000"]]


def run(exe, tag, args):
    save, summ = f"{out}/{tag}.st", f"{out}/{tag}.json"
    subprocess.run([exe, "--steps", str(steps), "--quiet", "--save", save, "--summary-json", summ] + args + extra,
                   check=True)
    return save, json.load(open(summ))


for s in settings:
    k = int(s[s.index("--accum") + 1]) if "--accum" in s else 1
    clip = "--clip-grad" in s
    tag = "_".join(x.replace(".", "") for x in s).replace("--", "")
    a, j = run(streamed, f"str_{tag}", s)
    b, _ = run(resident, f"res_{tag}", s)
    assert filecmp.cmp(a, b, shallow=False), f"{s}: the streamed parameters differ from the resident ones"
    assert j["peak_device_bytes"] == j["predicted_device_bytes"], (s, j["peak_device_bytes"], j["predicted_device_bytes"])
    for way in ("h2d", "d2h"):
        assert j[f"{way}_bytes"] == j[f"predicted_{way}_bytes"], (s, way, j)
    if clip:
        h2d = k * d["micro_batch_h2d_bytes"] + (k - 1) * d["grads_in_h2d_bytes"] + d["update_pass_h2d_bytes"]
        d2h = k * d["micro_batch_d2h_bytes"] + d["update_pass_d2h_bytes"]
    else:
        h2d = (k - 1) * (d["micro_batch_h2d_bytes"] + d["grads_in_h2d_bytes"]) + full_h2d
        d2h = (k - 1) * d["micro_batch_d2h_bytes"] + full_d2h
    assert j["stream_h2d_bytes"] == steps * h2d, (s, j["stream_h2d_bytes"], steps * h2d)
    assert j["stream_d2h_bytes"] == steps * d2h, (s, j["stream_d2h_bytes"], steps * d2h)
print(f"{len(settings)} settings, {steps} steps each; host gradients {d['host_grad_bytes']} bytes")
