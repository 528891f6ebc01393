"""--clip-grad and --accum with streamed parameters, whose optimizer steps run
on the host (docs/streaming.md, The optimizer on the host).

usage: host_update.py OUT STREAMED RESIDENT SCHEDULE.json [ARGS...]

Trains STREAMED and RESIDENT (the same model, compiled with and without
--stream params) under each setting below, ARGS added, and checks:
  - the saved parameters are byte-identical;
  - the streamed run's device peak is the planned one;
  - the streamed run's transfers are those its summary predicts;
  - its streamed bytes per step are K micro-batches of --emit=schedule's
    (SCHEDULE.json, the streamed build's): clipping and accumulation add no
    byte; each streamed element's gradient goes down once a micro-batch, and
    the element up at most twice where nothing is computed again.
"""
import filecmp
import json
import subprocess
import sys

out, streamed, resident, sched = sys.argv[1:5]
extra = sys.argv[5:]
plan = json.load(open(sched))
h = plan["host_update"]
step_h2d, step_d2h = plan["transfers"]["h2d_bytes"], plan["transfers"]["d2h_bytes"]
steps = 4
settings = [["--clip-grad", "0.05"], ["--accum", "3"], ["--accum", "2", "--clip-grad", "0.05"], ["--clip-grad", "1000"]]

# the units' bytes: an element's gradient down once, in the type the program computes it in (bf16 under
# bf16-mixed), and where nothing is computed again, the element up at most twice (forward, reverse)
size = {"f32": 4, "bf16": 2, "bf16-mixed": 2, "f64": 8}[plan["precision"]]
assert h["d2h_bytes_per_element"] == size, h
assert plan["recomputed_steps"] > 0 or h["h2d_bytes_per_element"] <= 2 * size, h


def run(exe, tag, args):
    save, summ = f"{out}/{tag}.st", f"{out}/{tag}.json"
    subprocess.run([exe, "--steps", str(steps), "--quiet", "--save", save, "--summary-json", summ] + args + extra,
                   check=True)
    return save, json.load(open(summ))


for s in settings:
    k = int(s[s.index("--accum") + 1]) if "--accum" in s else 1
    tag = "_".join(x.replace(".", "") for x in s).replace("--", "")
    a, j = run(streamed, f"str_{tag}", s)
    b, _ = run(resident, f"res_{tag}", s)
    assert filecmp.cmp(a, b, shallow=False), f"{s}: the streamed parameters differ from the resident ones"
    assert j["peak_device_bytes"] == j["predicted_device_bytes"], (s, j["peak_device_bytes"], j["predicted_device_bytes"])
    for way in ("h2d", "d2h"):
        assert j[f"{way}_bytes"] == j[f"predicted_{way}_bytes"], (s, way, j)
    assert j["stream_h2d_bytes"] == steps * k * step_h2d, (s, j["stream_h2d_bytes"], steps * k * step_h2d)
    assert j["stream_d2h_bytes"] == steps * k * step_d2h, (s, j["stream_d2h_bytes"], steps * k * step_d2h)
print(f"{len(settings)} settings, {steps} steps each; {h['h2d_bytes_per_element']:.4g} / {h['d2h_bytes_per_element']:.4g} "
      f"bytes an element a micro-batch")
