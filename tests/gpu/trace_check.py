"""A --trace file against its run's summary (tests/gpu/run.sh):
    python3 trace_check.py TRACE SUMMARY FIRST LAST [copies]
the tracks, each event's fields and step, the kernels, GEMMs and copies of
the traced steps as their share of the run's, and with `copies` timed
copies on the copy stream that moved the run's streamed bytes."""
import json
import sys

t, s = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
first, last = int(sys.argv[3]), int(sys.argv[4])
ev = t["traceEvents"]
spans = [e for e in ev if e["ph"] == "X"]
assert spans and all(e["dur"] >= 0 and first <= e["args"]["step"] <= last for e in spans)
steps, n = last - first + 1, s["steps"]
for cat, key in (("kernel", "kernel_launches"), ("gemm", "gemm_calls"), ("copy", "copy_calls")):
    c = sum(1 for e in spans if e["cat"] == cat)
    assert c * n == s[key] * steps, (cat, c, s[key])
if len(sys.argv) > 5:
    cs = [e for e in spans if e["cat"] == "copy stream"]
    assert cs and all(e["tid"] == 2 and e["dur"] > 0 for e in cs), "untimed copies"
    moved = sum(int(e["name"].split()[1]) for e in cs)
    assert moved * n == (s["stream_h2d_bytes"] + s["stream_d2h_bytes"]) * steps, moved
print(f"{len(spans)} events")
