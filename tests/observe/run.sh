#!/usr/bin/env bash
# Seeing the plan and the run: --trace's Chrome trace events (structure, and
# events that add up to the step's counts), the memory pictures (their
# figures equal the plan's and the run's numbers), --log-json and
# tools/plot_runs, the progress line on a terminal and off it, dpc -v, and
# the bad inputs (an unwritable trace, bad --trace-steps).
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/observe"
mkdir -p "$o"

# --- the trace ---
# unfused binomial oscillator: advances, taped steps; 3 steps, steps 2..3 traced
"$DPC" --target cpu --checkpoint binomial --no-fuse -D T=60 samples/oscillator.dp -o "$o/osc" >"$o/osc.log" 2>&1
"$DPC" --target cpu --checkpoint binomial -D T=60 samples/oscillator.dp -o "$o/oscf" >>"$o/osc.log" 2>&1
"$DPC" --target cpu --stream params samples/resmlp.dp -o "$o/res" >>"$o/osc.log" 2>&1
cat >"$o/trace.py" <<'PY'
import json, sys
trace, summary, first, last, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split("|")
t, s = json.load(open(trace)), json.load(open(summary))
ev = t["traceEvents"]
assert isinstance(ev, list) and ev, "no events"
tracks = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert tracks == {0: "phases", 1: "compute stream", 2: "copy stream"}, tracks
spans = [e for e in ev if e["ph"] == "X"]
for e in spans:
    for k in ("name", "cat", "ts", "dur", "pid", "tid", "args"):
        assert k in e, (k, e)
    assert e["dur"] >= 0 and first <= e["args"]["step"] <= last, e
assert {e["args"]["step"] for e in spans} == set(range(first, last + 1))
steps, n = last - first + 1, s["steps"]
def count(cat):
    return sum(1 for e in spans if e["cat"] == cat)
# every step runs the same calls: the traced ones are steps/n of the run's
for cat, key in (("kernel", "kernel_launches"), ("gemm", "gemm_calls"), ("copy", "copy_calls")):
    assert count(cat) * n == s[key] * steps, (cat, count(cat), s[key])
# the copy stream moved what the run counted
moved = sum(int(e["name"].split()[1]) for e in spans if e["cat"] == "copy stream")
assert moved * n == (s["stream_h2d_bytes"] + s["stream_d2h_bytes"]) * steps, (moved, s["stream_h2d_bytes"])
assert all(e["tid"] == 2 for e in spans if e["cat"] == "copy stream")
phases = {e["name"] for e in spans if e["cat"] == "phase"}
assert set(want) <= phases, (want, phases)
# compute-stream calls in time order, phases in order and inside the traced window
compute = [e["ts"] for e in spans if e["tid"] == 1]
assert compute == sorted(compute)
counters = [e["args"]["bytes"] for e in ev if e["ph"] == "C"]
assert counters and max(counters) == s["peak_device_bytes"], (max(counters), s["peak_device_bytes"])
print(f"{len(spans)} events, phases {sorted(phases)}")
PY
if "$o/osc" --steps 3 --trace "$o/osc.trace.json" --trace-steps 2:3 --summary-json "$o/osc.json" >>"$o/osc.log" 2>&1 &&
	python3 "$o/trace.py" "$o/osc.trace.json" "$o/osc.json" 2 3 "batch|forward|backward|advance|taped step|update" >>"$o/osc.log" 2>&1; then
	ok "observe/trace: $(tail -1 "$o/osc.log")"
else
	notok "observe/trace" "$o/osc.log"
fi
# the default: the last step; the fused schedule as one phase and one launch a chunk
if "$o/oscf" --steps 4 --trace "$o/oscf.trace.json" --summary-json "$o/oscf.json" >"$o/oscf.log" 2>&1 &&
	python3 "$o/trace.py" "$o/oscf.trace.json" "$o/oscf.json" 4 4 "forward|schedule, fused (advances, taped steps, adjoints)|update" \
		>>"$o/oscf.log" 2>&1; then
	ok "observe/trace-fused: the last step by default"
else
	notok "observe/trace-fused: the last step by default" "$o/oscf.log"
fi
# streaming: the copy stream's copies, timed, and the waits
if "$o/res" --steps 3 --trace "$o/res.trace.json" --trace-steps 1:2 --summary-json "$o/res.json" >"$o/res.log" 2>&1 &&
	python3 "$o/trace.py" "$o/res.trace.json" "$o/res.json" 1 2 "forward|backward|update" >>"$o/res.log" 2>&1 &&
	python3 -c "
import json, sys
ev = json.load(open(sys.argv[1]))['traceEvents']
cs = [e for e in ev if e.get('cat') == 'copy stream']
assert cs and all(e['dur'] > 0 for e in cs), 'untimed copies'
assert any(e.get('cat') == 'wait' for e in ev), 'no waits'" "$o/res.trace.json" >>"$o/res.log" 2>&1; then
	ok "observe/trace-streaming: copies timed on the copy stream, waits on the compute stream"
else
	notok "observe/trace-streaming" "$o/res.log"
fi
expect "observe/trace-unwritable: reported before training" 1 "cannot write $o/nodir/t.json" \
	"$o/osc" --steps 3 --trace "$o/nodir/t.json" --save "$o/nodir-save.safetensors"
[ ! -e "$o/nodir-save.safetensors" ] && ok "observe/trace-unwritable: nothing trained, nothing half-written" ||
	notok "observe/trace-unwritable: nothing trained, nothing half-written"
expect "observe/log-json-unwritable: reported before training" 1 "cannot write $o/nodir/a.jsonl" \
	"$o/osc" --steps 3 --log-json "$o/nodir/a.jsonl"
expect "observe/memplot-unwritable: reported before training" 1 "cannot write $o/nodir/m.svg" \
	"$o/osc" --steps 3 --memplot "$o/nodir/m.svg"
expect "observe/graph: a GPU option" 2 "--graph needs a GPU" "$o/osc" --steps 3 --graph
expect "observe/trace-steps: order" 2 "the last step comes before the first" "$o/osc" --steps 3 --trace "$o/t.json" --trace-steps 3:2
expect "observe/trace-steps: range" 2 "reaches past the last step" "$o/osc" --steps 3 --trace "$o/t.json" --trace-steps 2:5
expect "observe/trace-steps: form" 2 "takes FIRST:LAST" "$o/osc" --steps 3 --trace "$o/t.json" --trace-steps 2
expect "observe/trace-steps: zero" 2 "needs an integer in 1.." "$o/osc" --steps 3 --trace "$o/t.json" --trace-steps 0:2
expect "observe/trace-steps: alone" 2 "needs --trace FILE" "$o/osc" --steps 3 --trace-steps 1:2

# --- the memory pictures: the figures drawn are the plan's and the run's ---
cat >"$o/memplot.py" <<'PY'
import json, sys
import xml.etree.ElementTree as ET
svg, plan, budget = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3])
root = ET.parse(svg).getroot()
ns = "{http://www.w3.org/2000/svg}"
layers = {p.get("data-name"): int(p.get("data-max")) for p in root.iter(ns + "polygon")}
peak = plan["peak_device_bytes"]
names = {"params": "params", "grads": "grads", "optimizer state": "optimizer", "inputs": "inputs", "tape": "tape",
         "streaming slots": "slots", "work": "work"}
assert "snapshots" not in layers, layers  # snapshots are work-region tensors, packed by their lives
for name, key in names.items():
    assert layers.get(name, 0) == peak[key], (name, layers.get(name), peak[key])
assert int(root.get("data-peak")) == peak["total"], (root.get("data-peak"), peak["total"])
assert int(root.get("data-budget")) == budget
if len(sys.argv) > 4:
    run = json.load(open(sys.argv[4]))
    assert int(root.get("data-measured")) == run["peak_device_bytes"] == run["predicted_device_bytes"], run
    assert root.find(ns + "polyline") is not None
print(f"peak {peak['total']}, layers {layers}")
PY
for dp in samples/gpt.dp samples/resmlp.dp; do
	s=$(basename $dp .dp) log="$o/mp.$s.log"
	"$DPC" --target cpu --schedule-json "$o/$s.none.json" $dp -o "$o/$s.none" >"$log" 2>&1
	full=$(json "$o/$s.none.json" peak_device_bytes total 2>>"$log")
	budget=$((${full:-0} * 80 / 100))
	if "$DPC" --target cpu --device-mem $budget --emit=memplot $dp -o "$o/$s.plan.svg" >>"$log" 2>&1 &&
		"$DPC" --target cpu --device-mem $budget --schedule-json "$o/$s.plan.json" $dp -o "$o/$s.b" >>"$log" 2>&1 &&
		python3 "$o/memplot.py" "$o/$s.plan.svg" "$o/$s.plan.json" $budget >>"$log" 2>&1 &&
		"$o/$s.b" --steps 3 --quiet --memplot "$o/$s.run.svg" --summary-json "$o/$s.run.json" >>"$log" 2>&1 &&
		python3 "$o/memplot.py" "$o/$s.run.svg" "$o/$s.plan.json" $budget "$o/$s.run.json" >>"$log" 2>&1; then
		ok "observe/memplot $s: the plan's categories and peak, the budget, the run's measured peak"
	else
		notok "observe/memplot $s" "$log"
	fi
done
expect "observe/memplot: an infeasible budget" 1 "more than --device-mem" "$DPC" --device-mem 1000 --emit=memplot samples/resmlp.dp

# --- --log-json, tools/plot_runs ---
log="$o/logjson.log"
if "$o/res" --steps 5 --quiet --log-json "$o/a.jsonl" --summary-json "$o/a.json" >"$log" 2>&1 &&
	"$o/res" --steps 5 --quiet --lr 0.003 --log-json "$o/b.jsonl" >>"$log" 2>&1 &&
	python3 - "$o/a.jsonl" "$o/a.json" >>"$log" 2>&1 <<'PY'; then
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
s = json.load(open(sys.argv[2]))
assert [l["step"] for l in lines] == [1, 2, 3, 4, 5]
for l in lines:
    assert set(l) >= {"step", "loss", "smoothed", "lr", "ms", "bytes"} and l["lr"] == 0.01 and l["ms"] > 0, l
assert lines[0]["loss"] == s["loss_first"] and lines[-1]["loss"] == s["loss_last"]
# each step moves its batch, its streamed units and its loss: the run's bytes less the parameters' first upload
per = s["predicted_h2d_bytes"] + s["predicted_d2h_bytes"]
resident = s["h2d_bytes"] + s["d2h_bytes"] - sum(l["bytes"] for l in lines)
assert all(l["bytes"] == lines[0]["bytes"] for l in lines), [l["bytes"] for l in lines]
assert resident >= 0 and sum(l["bytes"] for l in lines) + resident == per, (resident, per)
PY
	ok "observe/log-json: a line per step, the losses and bytes the run counted"
else
	notok "observe/log-json" "$log"
fi
if tools/plot_runs "$o/a.jsonl" slow="$o/b.jsonl" --smoothed -o "$o/runs.svg" >>"$log" 2>&1 &&
	python3 -c "
import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
runs = [p.get('data-name') for p in r.iter('{http://www.w3.org/2000/svg}polyline') if p.get('class') == 'run']
assert runs == ['a.jsonl', 'slow'], runs" "$o/runs.svg" >>"$log" 2>&1; then
	ok "observe/plot_runs: two runs in one SVG"
else
	notok "observe/plot_runs" "$log"
fi
printf '{"step": 1, "loss": 0.5}\nnot json\n' >"$o/bad.jsonl"
expect "observe/plot_runs: a malformed line" 1 "bad.jsonl:2: not a JSON line" tools/plot_runs "$o/bad.jsonl" -o "$o/bad.svg"
expect "observe/plot_trace: not a trace" 1 "bad.jsonl: not a trace" tools/plot_trace "$o/bad.jsonl" -o "$o/bad.svg"
expect "observe/plot_trace: a step not traced" 1 "step 1 was not traced" tools/plot_trace "$o/osc.trace.json" --step 1 -o "$o/t1.svg"

# --- the progress line: plain lines off a terminal, one line redrawn on one ---
"$DPC" --target cpu samples/gpt.dp -o "$o/gpt" >"$o/gpt.log" 2>&1
if "$o/res" --steps 20 --log-every 5 >"$o/plain.log" 2>&1 &&
	[ "$(grep -c '^step ' "$o/plain.log")" = 4 ] &&
	grep -Eq '^step +20/20  loss [0-9.e-]+ +smoothed [0-9.e-]+ +[0-9.]+ ms/step  [0-9.e+]+ steps/s  elapsed [0-9.]+s  ETA 0.0s$' "$o/plain.log" &&
	! grep -q $'\r' "$o/plain.log" && "$o/gpt" --steps 2 --log-every 1 >"$o/gpt.run.log" 2>&1 && grep -q 'tokens/s' "$o/gpt.run.log"; then
	ok "observe/progress: plain lines at --log-every, steps/s, tokens/s for ids"
else
	notok "observe/progress: plain lines at --log-every" "$o/plain.log"
fi
if command -v script >/dev/null; then
	if script -qec "$o/res --steps 30" /dev/null >"$o/tty.log" 2>&1 &&
		grep -q $'\r''step      30/30' "$o/tty.log" && grep -q $'\033\[K' "$o/tty.log" &&
		[ "$(grep -c 'resmlp: 30 steps' "$o/tty.log")" = 1 ]; then
		ok "observe/progress: on a terminal the line redraws in place"
	else
		notok "observe/progress: on a terminal the line redraws in place" "$o/tty.log"
	fi
else
	echo "# no script(1): the terminal check is skipped"
fi

# --- docs/observing.md's pictures: made again by tools/pictures.sh; the memory pictures are the plan's,
# so equal byte for byte; the loss curves, whose last digits may vary with the CPU's BLAS, by structure ---
if bash tools/pictures.sh "$o/img" >"$o/pictures.log" 2>&1 &&
	cmp docs/img/gpt_plan.svg "$o/img/gpt_plan.svg" >>"$o/pictures.log" 2>&1 &&
	cmp docs/img/gpt_run.svg "$o/img/gpt_run.svg" >>"$o/pictures.log" 2>&1 &&
	python3 - docs/img "$o/img" >>"$o/pictures.log" 2>&1 <<'PY'; then
import collections, sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
def runs(p):
    r = ET.parse(p).getroot()
    return [(q.get("data-name"), len(q.get("points").split())) for q in r.iter(ns + "polyline")]
def events(p):
    r = ET.parse(p).getroot()
    return collections.Counter(q.get("data-cat") for q in r.iter() if q.get("class") == "event")
a, b = runs(sys.argv[1] + "/resmlp_runs.svg"), runs(sys.argv[2] + "/resmlp_runs.svg")
assert a == b and len(a) == 4, (a, b)
a, b = events(sys.argv[1] + "/resmlp_trace.svg"), events(sys.argv[2] + "/resmlp_trace.svg")
assert a == b and a["gemm"] and a["copy stream"] and a["wait"], (a, b)
PY
	ok "observe/pictures: docs/observing.md's pictures are what its commands make"
else
	notok "observe/pictures: docs/observing.md's pictures are what its commands make (bash tools/pictures.sh)" "$o/pictures.log"
fi

# --- dpc -v: each phase with its time ---
if "$DPC" -v --target cpu --device-mem 4M samples/gpt.dp -o "$o/gptv" >"$o/v.log" 2>&1; then
	miss=""
	for phase in parse lower "auto: store, rows or recompute" ad_transform checkpoint_pass stream_pass "codegen: host schedule" \
		"LLVM optimizer and object files" link; do
		grep -Eq "^dpc: $phase.* [0-9.]+ ms$" "$o/v.log" || miss="$miss [$phase]"
	done
	[ -z "$miss" ] && ok "observe/dpc -v: the phases and their times" || notok "observe/dpc -v: missing$miss" "$o/v.log"
else
	notok "observe/dpc -v" "$o/v.log"
fi
finish
