#!/usr/bin/env bash
# Binomial checkpointing and --checkpoint auto's sweep schedule: gradients
# bitwise identical to store-everything on every sample and loop program, in
# both precisions and for several snapshot counts; recomputed steps equal to
# the closed form r n - C(s + r, r - 1), or for auto the sum over its segments
# (computed here, in Python, from the loops the forward program shows); and
# device memory that stays flat as a loop grows from 10^4 to 10^6 steps.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/ckpt"
mkdir -p "$o"
# the schedules' counts, written again from their definitions
cat >"$o/counts.py" <<'PY'
import math
def advances(n, s, k=1):
    # binomial with taped actions of up to k steps: r n - k C(s + r, r - 1)
    r = 0
    while k * math.comb(s + r, s) < n:
        r += 1
    return r * n - k * math.comb(s + r, r - 1) if r else 0
def segments(n, s, k=1):
    # the sweep's: up to s segments, reversed with s, s - 1, .. 1 slots, filled by marginal cost
    t = 0
    while k * (math.comb(s + t + 1, s) - 1) < n:
        t += 1
    lens = [k * math.comb(s - i + t - 1, s - i) if t else 0 for i in range(s)]
    left = n - sum(lens)
    for i in range(s):
        more = min(k * math.comb(s - i + t - 1, s - i - 1), left)
        lens[i] += more
        left -= more
    return [m for m in lens if m]
def sweep(n, s, k=1):
    return sum(advances(m, s - i, k) for i, m in enumerate(segments(n, s, k)))
def rows(n, s, k):
    # a tape of k rows: the forward loop tapes the last min(n, k) steps, the sweep reverses the
    # rest, and every step but those is taped once more
    tail = min(n, k)
    return sweep(n - tail, s, k) + n - tail
PY
predicted() { # FILE.dp SNAPSHOTS STEPS [auto SCHEDULE.json]: recomputed steps of STEPS training steps
	"$DPC" --emit=ir "$1" | PYTHONPATH="$o" python3 -c "
import json, math, re, sys
from counts import advances, sweep, rows
s, steps, auto, total = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == 'auto', 0
ir = sys.stdin.read()
planned = json.load(open(sys.argv[4]))['loops'] if auto else []
for i, (lo, hi, body) in enumerate(re.findall(r'^loop \S+ in (\d+)\.\.(\d+).*\n((?:  .*\n)*)', ir, re.M)):
    n = int(hi) - int(lo)
    k = min(s if s else math.ceil(math.sqrt(n)) + 1, n)
    if not auto:
        total += advances(n, k)
    elif 'loop ' in body:
        total += sweep(n, k)  # loops inside: recomputed taped steps, the sweep's advances
    elif s:
        # a tape of rows: with --snapshots s, enough that nothing advances, n / (s + 1) rounded up
        total += rows(n, k, -(-n // (k + 1)))
    else:
        # without: the least memory in which nothing advances; the rows are the plan's choice
        kk = planned[i]['tape_rows']
        assert planned[i]['n'] == n and planned[i]['s'] * kk >= n - kk, planned[i]
        total += rows(n, planned[i]['s'], kk)
print(total * steps)" "$2" "$3" "${4:-binomial}" "${5:-}"
}
# (under make test-sanitize in f32 only: the schedules' code is the same in f64, which the plain run checks)
precs="f32 f64"
$sanitized && precs=f32
for dp in samples/*.dp tests/ops/loop.dp tests/ops/nested.dp; do
	name=$(basename "$dp" .dp)
	for prec in $precs; do
		"$DPC" --precision $prec "$dp" -o "$o/$name.none" || { notok "ckpt/$name: compile"; continue; }
		"$o/$name.none" --steps 2 --quiet --dump-grads "$o/$name.none.st" --save "$o/$name.none.p" >/dev/null
		# binomial at several counts; auto (the sweep schedule, its segments' starts saved by the forward loop) at two
		for run in binomial:1 binomial:2 binomial:3 binomial:0 auto:2 auto:0; do
			mode=${run%:*} s=${run#*:}
			flag="--snapshots $s"
			[ $s = 0 ] && flag=""
			label="s=${s/0/default}"
			exe="$o/$name.b$s"
			if [ $mode = auto ]; then
				label="auto $label"
				exe="$o/$name.a$s"
			fi
			if ! "$DPC" --precision $prec --checkpoint $mode $flag "$dp" -o "$exe" --schedule-json "$exe.sched.json" >"$exe.log" 2>&1 ||
				! "$exe" --steps 2 --quiet --dump-grads "$exe.st" --save "$exe.p" --summary-json "$exe.json" >>"$exe.log" 2>&1; then
				notok "ckpt/$name $prec $label: run" "$exe.log"
				continue
			fi
			want=$(predicted "$dp" $s 2 $mode "$exe.sched.json")
			got=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['recomputed_steps'])" "$exe.json")
			if cmp -s "$o/$name.none.st" "$exe.st" && cmp -s "$o/$name.none.p" "$exe.p" && [ "$got" = "$want" ]; then
				ok "ckpt/$name $prec $label: gradients and parameters bitwise identical, $got recomputed steps"
			else
				echo "recomputed $got, predicted $want" >>"$exe.log"
				cmp "$o/$name.none.st" "$exe.st" >>"$exe.log" 2>&1
				notok "ckpt/$name $prec $label" "$exe.log"
			fi
		done
	done
done
# memory: flat under binomial with fixed snapshots, linear with store-everything
peak() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_device_bytes'])" "$1"; }
for T in 10000 100000 1000000; do
	"$DPC" -D T=$T --checkpoint binomial --snapshots 20 samples/oscillator.dp -o "$o/osc$T" &&
		"$o/osc$T" --steps 1 --quiet --summary-json "$o/osc$T.b.json" >/dev/null
	if [ $T -le 100000 ]; then
		"$DPC" -D T=$T samples/oscillator.dp -o "$o/oscn$T" && "$o/oscn$T" --steps 1 --quiet --summary-json "$o/osc$T.n.json" >/dev/null
	fi
done
b4=$(peak "$o/osc10000.b.json") b5=$(peak "$o/osc100000.b.json") b6=$(peak "$o/osc1000000.b.json")
n4=$(peak "$o/osc10000.n.json") n5=$(peak "$o/osc100000.n.json")
if [ "$b4" = "$b5" ] && [ "$b5" = "$b6" ]; then
	ok "ckpt/flat-memory: binomial peak $b4 bytes at 10^4, 10^5 and 10^6 steps"
else
	notok "ckpt/flat-memory: binomial peaks $b4, $b5, $b6"
fi
if [ "$n5" -gt $((5 * n4)) ]; then
	ok "ckpt/store-everything-grows: peak $n4 -> $n5 bytes from 10^4 to 10^5 steps"
else
	notok "ckpt/store-everything-grows: $n4 -> $n5"
fi
# the schedule as JSON: r and the counts follow the closed form, and the action list adds up
if "$DPC" --checkpoint binomial --snapshots 3 --schedule-json "$o/s.json" samples/resmlp.dp -o "$o/sched" >"$o/s.log" 2>&1 &&
	python3 - "$o/s.json" >>"$o/s.log" 2>&1 <<'PY'
import json, math, sys
j = json.load(open(sys.argv[1]))
(loop,) = j["loops"]
n, s, r = loop["n"], loop["s"], loop["r"]
assert r == min(k for k in range(n + 1) if math.comb(s + k, s) >= n), r
assert loop["recomputed_steps"] == r * n - math.comb(s + r, r - 1)
adv = sum(a[2] - a[1] for a in loop["actions"] if a[0] == "advance")
taped = [a[1] for a in loop["actions"] if a[0] == "taped"]
assert adv == loop["recomputed_steps"] and taped == list(range(n - 1, -1, -1)), (adv, taped)
assert max(a[3] for a in loop["actions"]) < s
PY
then
	ok "ckpt/schedule-json: counts and action list follow the closed form"
else
	notok "ckpt/schedule-json" "$o/s.log"
fi
# the sweep schedule as JSON: a valid action list whose advances are the count
if "$DPC" --checkpoint auto --snapshots 3 --schedule-json "$o/sw.json" samples/resmlp.dp -o "$o/sweep" >"$o/sw.log" 2>&1 &&
	python3 - "$o/sw.json" >>"$o/sw.log" 2>&1 <<'PY'
import json, sys
(loop,) = json.load(open(sys.argv[1]))["loops"]
n, s = loop["n"], loop["s"]
assert loop["schedule"] == "sweep", loop["schedule"]
k = loop["tape_rows"]
assert 1 < k < n, k
adv = sum(a[2] - a[1] for a in loop["actions"] if a[0] == "advance")
taped = [i for a in loop["actions"] if a[0] in ("taped", "untape") for i in range(a[2] - 1, a[1] - 1, -1)]
assert all(a[2] - a[1] <= k for a in loop["actions"] if a[0] in ("taped", "untape")), loop["actions"]
# first the adjoints of the last k steps, which the forward loop taped; then the segments
assert loop["actions"][0] == ["untape", n - k, n, -1], loop["actions"][0]
assert [a[0] for a in loop["actions"]].count("untape") == 1
assert adv + n - k == loop["recomputed_steps"] and taped == list(range(n - 1, -1, -1)), (adv, taped)
assert max(a[3] for a in loop["actions"]) < s and loop["actions"][1][0] == "restore", loop["actions"][:2]
PY
then
	ok "ckpt/schedule-json-sweep: the action list, taped actions of up to k steps, adds up to the count"
else
	notok "ckpt/schedule-json-sweep" "$o/sw.log"
fi
# FLOPs as the op table counts them, checked by hand on one program of each
# class: GEMM 2 m n k, attention 4 per head, visible pair and width,
# softmax 5 per element, elementwise 1 per result, sum 1 per input
cat >"$o/flops.dp" <<'DP'
const B = 2, T = 5, C = 6
input x : f32[B, T, C]
param w : f32[C, C] = normal(0.5)
loss { let q = x @ w
  let a = attention(q, q, q, heads=3, causal=1)
  return sum(softmax(a) * a) }
DP
if "$DPC" --schedule-json "$o/flops.json" "$o/flops.dp" -o "$o/flops" >"$o/flops.log" 2>&1 &&
	python3 - "$o/flops.json" >>"$o/flops.log" 2>&1 <<'PY'
import json, sys
B, T, C, H = 2, 5, 6, 3
want = 2 * (B * T * C) * C + 4 * (B * H) * (T * (T + 1) // 2) * (C // H) + 5 * B * T * C + B * T * C + B * T * C
got = json.load(open(sys.argv[1]))["forward_flops"]
assert got == want, (got, want)
PY
then
	ok "ckpt/flops: the forward program's FLOPs as counted by hand"
else
	notok "ckpt/flops" "$o/flops.log"
fi
# recomputed FLOPs: the run counts what the schedule predicts
for m in binomial auto; do
	if "$DPC" -D T=2000 --checkpoint $m --snapshots 12 --schedule-json "$o/rf.$m.json" samples/oscillator.dp -o "$o/rf.$m" >"$o/rf.$m.log" 2>&1 &&
		"$o/rf.$m" --steps 3 --quiet --summary-json "$o/rf.$m.run.json" >>"$o/rf.$m.log" 2>&1 &&
		python3 - "$o/rf.$m.json" "$o/rf.$m.run.json" >>"$o/rf.$m.log" 2>&1 <<'PY'
import json, sys
plan, run = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
steps = run["steps"]
assert plan["recomputed_flops"] > 0, plan
assert run["recomputed_flops"] == steps * plan["recomputed_flops"], (run["recomputed_flops"], plan["recomputed_flops"])
assert run["forward_flops"] == steps * plan["forward_flops"], (run["forward_flops"], plan["forward_flops"])
assert abs(run["recomputed_fraction"] - plan["recomputed_fraction"]) <= 1e-9 * plan["recomputed_fraction"], (run, plan)
print(plan["recomputed_fraction"])
PY
	then
		ok "ckpt/recomputed-flops $m: measured equals predicted ($(tail -1 "$o/rf.$m.log") of a forward)"
	else
		notok "ckpt/recomputed-flops $m" "$o/rf.$m.log"
	fi
done
# auto under a budget: store-everything when the budget holds its plan, the sweep a byte below
if "$DPC" --schedule-json "$o/full.json" samples/resmlp.dp -o "$o/full" >"$o/full.log" 2>&1; then
	full=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_device_bytes']['total'])" "$o/full.json")
	if "$DPC" --checkpoint auto --device-mem "$full" --schedule-json "$o/full.a.json" samples/resmlp.dp -o "$o/full.a" >>"$o/full.log" 2>&1 &&
		"$DPC" --checkpoint auto --device-mem $((full - 1)) --stream none --schedule-json "$o/full.b.json" samples/resmlp.dp -o "$o/full.b" >>"$o/full.log" 2>&1 &&
		python3 - "$o/full.a.json" "$o/full.b.json" >>"$o/full.log" 2>&1 <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a["loops"][0]["schedule"] == "store-everything" and a["recomputed_steps"] == 0, a["loops"]
assert b["loops"][0]["schedule"] == "sweep", b["loops"]
PY
	then
		ok "ckpt/auto-budget: store-everything at its own peak ($full bytes), the sweep a byte below"
	else
		notok "ckpt/auto-budget" "$o/full.log"
	fi
else
	notok "ckpt/auto-budget: compile" "$o/full.log"
fi
# auto's rows and snapshots under a budget: gradients bitwise as store-everything's, the run's
# count as the plan's and the formula's, inside the budget; no pair of snapshots and rows that
# fits costs fewer FLOPs (pooled rows, where taken, cost fewer than any), and where auto
# recomputes taped steps instead, that costs no more
ar="$o/auto_rows"
"$DPC" --target cpu -D L=32 samples/resmlp.dp -o "$ar.none" >"$ar.log" 2>&1 && "$ar.none" --steps 2 --quiet --dump-grads "$ar.none.g" >>"$ar.log" 2>&1
rows_ok=1
for budget in 5000000 4800000 4700000; do
	"$DPC" --target cpu -D L=32 --checkpoint auto --device-mem $budget --stream none --schedule-json "$ar.$budget.json" \
		samples/resmlp.dp -o "$ar.$budget" >>"$ar.log" 2>&1 &&
		"$ar.$budget" --steps 2 --quiet --dump-grads "$ar.$budget.g" --summary-json "$ar.$budget.run.json" >>"$ar.log" 2>&1 &&
		cmp "$ar.none.g" "$ar.$budget.g" >>"$ar.log" 2>&1 || rows_ok=0
done
if [ $rows_ok = 1 ] && PYTHONPATH="$o" python3 - "$ar" >>"$ar.log" 2>&1 <<'PY'
import json, sys
from counts import rows
ar = sys.argv[1]
runs = {b: (json.load(open(f"{ar}.{b}.json")), json.load(open(f"{ar}.{b}.run.json"))) for b in (5000000, 4800000, 4700000)}
# the rows' sizes and the plan without them, from the largest budget's plan (rows there)
plan = runs[5000000][0]
(loop,) = plan["loops"]
n, S, T, per = loop["n"], loop["snapshot_bytes"], loop["tape_row_bytes"], loop["flops_per_step"]
assert loop["tape_rows"] >= 1 and T > 0, loop
base = plan["peak_device_bytes"]["total"] - (loop["s"] - 1) * S - (loop["tape_rows"] - 1) * T
out = []
for budget, (plan, run) in runs.items():
    (loop,) = plan["loops"]
    s, k = loop["s"], loop["tape_rows"]
    assert loop["schedule"] in ("sweep", "pooled"), loop
    assert run["recomputed_steps"] == 2 * loop["recomputed_steps"], (loop, run["recomputed_steps"])
    assert run["recomputed_flops"] == 2 * plan["recomputed_flops"], (plan, run)
    assert run["peak_device_bytes"] == run["predicted_device_bytes"] <= budget, run
    fits = [rows(n, a, b) for a in range(1, n + 1) for b in range(1, n + 1) if base + (a - 1) * S + (b - 1) * T <= budget]
    best = min(fits) if fits else None
    if loop["schedule"] == "pooled":
        # pooled rows are taken only when they cost fewer steps than any sweep shape that fits
        assert s == 1 and (best is None or loop["recomputed_steps"] < best), (k, loop["recomputed_steps"], best)
        out.append(f"{budget}: pooled, {k} rows, {loop['recomputed_steps']} steps (the sweep's best {best})")
    elif k:
        assert loop["recomputed_steps"] == rows(n, s, k) == best, (s, k, loop["recomputed_steps"], best)
        out.append(f"{budget}: s {s}, {k} rows, {best} steps")
    else:
        assert best is None or plan["recomputed_flops"] <= best * per, (plan["recomputed_flops"], best * per)
        out.append(f"{budget}: s {s}, recomputing ({plan['recomputed_flops']} FLOPs, rows {best * per if best else '-'})")
print("; ".join(out))
PY
then
	ok "ckpt/auto-rows: $(tail -1 "$ar.log"); none cheaper that fits; gradients bitwise"
else
	notok "ckpt/auto-rows" "$ar.log"
fi
# A loop whose rows need not keep the state (issue 62, item 1): under each budget the plan replays
# it (the taped run's first state kept once, each adjoint's state made again from it by the cheap
# h + t); gradients bitwise as store-everything's, the run's counts and peak as the plan's, the
# replays Σ m (m - 1) / 2 over the taped runs its actions list, and fewer FLOPs recomputed than
# any shape that keeps the state in each row (a row of S more bytes) fits
rp_ok=1 rp_out=
for prog in "replay 800000 720000 680000 640000" "replay2 170000 150000 145000"; do
	read -r name budgets <<<"$prog"
	rp="$o/$name"
	"$DPC" --target cpu tests/ckpt/$name.dp -o "$rp.none" >"$rp.log" 2>&1 &&
		"$rp.none" --steps 2 --quiet --dump-grads "$rp.none.g" >>"$rp.log" 2>&1 || rp_ok=0
	for budget in $budgets; do
		"$DPC" --target cpu --device-mem $budget --stream none --schedule-json "$rp.$budget.json" tests/ckpt/$name.dp \
			-o "$rp.$budget" >>"$rp.log" 2>&1 &&
			"$rp.$budget" --steps 2 --quiet --dump-grads "$rp.$budget.g" --summary-json "$rp.$budget.run.json" >>"$rp.log" 2>&1 &&
			cmp "$rp.none.g" "$rp.$budget.g" >>"$rp.log" 2>&1 || rp_ok=0
	done
	if [ $rp_ok = 1 ] && PYTHONPATH="$o" python3 - "$rp" $budgets >>"$rp.log" 2>&1 <<'PY'
import json, sys
from counts import rows
rp = sys.argv[1]
out = []
for budget in map(int, sys.argv[2:]):
    plan, run = json.load(open(f"{rp}.{budget}.json")), json.load(open(f"{rp}.{budget}.run.json"))
    (loop,) = plan["loops"]
    n, s, k, S, T = loop["n"], loop["s"], loop["tape_rows"], loop["snapshot_bytes"], loop["tape_row_bytes"]
    per, taped, f = loop["flops_per_step"], loop["taped_recomputed_flops_per_step"], loop["replay_flops"]
    assert loop["state_replays"] > 0 and f > 0, loop
    runs = [b - a for name, a, b, _ in loop["actions"] if name in ("taped", "untape")]
    assert loop["state_replays"] == sum(m * (m - 1) // 2 for m in runs), (loop["state_replays"], runs)
    assert plan["recomputed_flops"] == loop["recomputed_steps"] * per + n * taped + loop["state_replays"] * f, loop
    assert run["recomputed_flops"] == 2 * plan["recomputed_flops"], (plan["recomputed_flops"], run)
    assert run["peak_device_bytes"] == run["predicted_device_bytes"] <= budget, run
    base = plan["peak_device_bytes"]["total"] - (s - 1) * S - (k - 1) * T
    kept = [rows(n, a, b) * per + n * taped for a in range(1, n + 1) for b in range(1, n + 1)
            if base + (a - 1) * S + (b - 1) * (T + S) <= budget]
    assert not kept or plan["recomputed_flops"] < min(kept), (plan["recomputed_flops"], min(kept))
    out.append(f"{budget}: s {s}, {k} rows, {loop['state_replays']} replays, {plan['recomputed_flops']} FLOPs"
               f" (the state in the rows: {min(kept) if kept else '-'})")
print("; ".join(out))
PY
	then
		rp_out="$rp_out${rp_out:+; }$name.dp $(tail -1 "$rp.log")"
	else
		rp_ok=0
		notok "ckpt/replay: $name.dp" "$rp.log"
	fi
done
[ $rp_ok = 1 ] && ok "ckpt/replay: $rp_out; gradients bitwise"
# auto's search ends: --snapshots over the budget (host slots, recomputing), 3 * 10^9 steps
# (one snapshot costs about n^2 / 2 steps, counted without stepping through them)
if timeout 60 "$DPC" --target cpu -D T=200 --checkpoint auto --device-mem 9000 --snapshots 50 --emit=schedule \
	samples/oscillator.dp >"$o/search.log" 2>&1 && grep -q "in host memory" "$o/search.log" &&
	timeout 60 "$DPC" --target cpu -D T=3000000000 --checkpoint auto --device-mem 20000 --emit=schedule \
		samples/oscillator.dp >>"$o/search.log" 2>&1 && grep -q "n 3000000000, sweep" "$o/search.log"; then
	ok "ckpt/auto-search-ends: --snapshots beyond the budget, and 3e9 steps"
else
	notok "ckpt/auto-search-ends" "$o/search.log"
fi
# auto with streamed parameters: the sweep's transfers as predicted, gradients as store-everything's
st="$o/auto_stream"
if "$DPC" --target cpu -D L=32 samples/resmlp.dp -o "$st.none" >"$st.log" 2>&1 &&
	"$DPC" --target cpu --checkpoint auto -D L=32 --device-mem 4700000 --stream params samples/resmlp.dp -o "$st" >>"$st.log" 2>&1 &&
	"$st.none" --steps 2 --quiet --dump-grads "$st.none.g" >>"$st.log" 2>&1 &&
	"$st" --steps 2 --quiet --dump-grads "$st.g" --summary-json "$st.json" >>"$st.log" 2>&1 &&
	cmp "$st.none.g" "$st.g" >>"$st.log" 2>&1 &&
	python3 - "$st.json" >>"$st.log" 2>&1 <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["stream_h2d_bytes"] > 0, j
assert j["stream_h2d_bytes"] == j["predicted_stream_h2d_bytes"], (j["stream_h2d_bytes"], j["predicted_stream_h2d_bytes"])
assert j["h2d_bytes"] == j["predicted_h2d_bytes"] and j["d2h_bytes"] == j["predicted_d2h_bytes"], j
PY
then
	ok "ckpt/auto-streamed: gradients bitwise as store-everything's, streamed bytes as predicted"
else
	notok "ckpt/auto-streamed" "$st.log"
fi
# snapshots from a budget: the most that fit, and the run stays inside it
budget=$((2 * 1024 * 1024))
if "$DPC" -D T=100000 --checkpoint binomial --device-mem $budget --schedule-json "$o/b.json" samples/oscillator.dp -o "$o/budget" >"$o/b.log" 2>&1 &&
	"$o/budget" --steps 1 --quiet --summary-json "$o/b.run.json" >>"$o/b.log" 2>&1 &&
	python3 - "$o/b.json" "$o/b.run.json" $budget >>"$o/b.log" 2>&1 <<'PY'
import json, sys
plan, run, budget = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
s = plan["loops"][0]["s"]
assert s > 1, s
assert run["peak_device_bytes"] == run["predicted_device_bytes"] <= budget, (run["peak_device_bytes"], budget)
assert run["recomputed_steps"] == plan["recomputed_steps"]
print("snapshots", s, "peak", run["peak_device_bytes"])
PY
then
	ok "ckpt/device-mem: $(tail -1 "$o/b.log") within $budget bytes"
else
	notok "ckpt/device-mem" "$o/b.log"
fi
# straight-line code under a budget below store-everything's (the default auto): the adjoint
# computes some values again; gradients bitwise as store-everything's, peak within the budget,
# recomputed FLOPs measured as planned and equal to the listed ops' cost; below the least plan
# the error names a budget that then compiles
for g in graph graph_skip; do
	gl="$o/$g.log" gd="$o/$g"
	"$DPC" --target cpu --schedule-json "$gd.none.json" tests/ckpt/$g.dp -o "$gd.none" >"$gl" 2>&1 &&
		"$gd.none" --steps 2 --quiet --dump-grads "$gd.none.g" >>"$gl" 2>&1 || { notok "ckpt/$g: store-everything" "$gl"; continue; }
	full=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_device_bytes']['total'])" "$gd.none.json")
	g_ok=1 cut=0
	for budget in $((full - 1)) $((full * 95 / 100)) $((full * 9 / 10)); do
		if "$DPC" --target cpu --device-mem $budget --stream none --schedule-json "$gd.$budget.json" tests/ckpt/$g.dp \
			-o "$gd.$budget" >>"$gl" 2>&1; then
			"$gd.$budget" --steps 2 --quiet --dump-grads "$gd.$budget.g" --summary-json "$gd.$budget.run.json" >>"$gl" 2>&1 &&
				cmp "$gd.none.g" "$gd.$budget.g" >>"$gl" 2>&1 &&
				python3 - "$gd.$budget.json" "$gd.$budget.run.json" $budget >>"$gl" 2>&1 <<'PY' || g_ok=0
import json, sys
plan, run, budget = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
sl = plan["straight_line"]
assert sl["recomputed"] and sl["recomputed_flops"] == plan["recomputed_flops"] > 0, sl
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"], (run["recomputed_flops"], plan["recomputed_flops"])
assert run["peak_device_bytes"] == run["predicted_device_bytes"] <= budget, run
print(f"{budget}: {len(sl['recomputed'])} ops again")
PY
			cut=$((cut + 1))
		elif grep -q "more than --device-mem" "$gl"; then
			# below the least plan: the error's smallest budget must compile
			need=$(sed -n 's/.*needs [^(]*(\([0-9]*\) bytes).*/\1/p' "$gl" | tail -1)
			"$DPC" --target cpu --device-mem "$need" --stream none tests/ckpt/$g.dp -o "$gd.need" >>"$gl" 2>&1 || g_ok=0
			echo "$budget: refused, needs $need" >>"$gl"
		else
			g_ok=0
		fi
	done
	if [ $g_ok = 1 ] && [ $cut -ge 1 ]; then
		ok "ckpt/$g: straight-line recomputation under $cut budgets, gradients bitwise ($(grep -E '^[0-9]+: ' "$gl" | tr '\n' ';'))"
	else
		notok "ckpt/$g" "$gl"
	fi
done
# under_budget OUT REF LOG BUDGET DPC-ARGS...: compiles for the CPU under --device-mem BUDGET
# without streaming (the plan in OUT.json), trains 2 steps (OUT.g, OUT.run.json) and compares
# the gradients with REF bitwise
under_budget() {
	local out=$1 ref=$2 log=$3 budget=$4
	shift 4
	"$DPC" --target cpu --device-mem "$budget" --stream none --schedule-json "$out.json" "$@" -o "$out" >>"$log" 2>&1 &&
		"$out" --steps 2 --quiet --dump-grads "$out.g" --summary-json "$out.run.json" >>"$log" 2>&1 &&
		cmp "$ref" "$out.g" >>"$log" 2>&1
}
# what a loop's rows keep under budgets below store-everything's: gradients bitwise as
# store-everything's in f32 and f64, peak within the budget and as planned, the FLOPs the
# adjoint steps compute again measured as planned; at some budget a row keeps less
for rows in rows rows_relu; do
	rl="$o/$rows.log" rd="$o/$rows"
	r_ok=1 r_less=0 r_n=0 r_bits=0
	for prec in f32 f64; do
		"$DPC" --target cpu --precision $prec --schedule-json "$rd.$prec.json" tests/ckpt/$rows.dp -o "$rd.$prec" >>"$rl" 2>&1 &&
			"$rd.$prec" --steps 2 --quiet --dump-grads "$rd.$prec.g" >>"$rl" 2>&1 || r_ok=0
		full=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_device_bytes']['total'])" "$rd.$prec.json") || r_ok=0
		for pc in 95 85 80 78; do
			budget=$((full * pc / 100)) b="$rd.$prec.$pc"
			under_budget "$b" "$rd.$prec.g" "$rl" $budget --precision $prec tests/ckpt/$rows.dp &&
				python3 - "$b.json" "$b.run.json" $budget >"$b.out" 2>>"$rl" <<'PY' || r_ok=0
import json, sys
plan, run, budget = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
assert run["peak_device_bytes"] == run["predicted_device_bytes"] <= budget, run
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"], (run["recomputed_flops"], plan["recomputed_flops"])
assert run["recomputed_steps"] == 2 * plan["recomputed_steps"], (run["recomputed_steps"], plan["recomputed_steps"])
loop = plan["loops"][0]
again = loop.get("row_recomputed", [])
bits = any(v.startswith("%bits_") for v in loop.get("row_kept", []))
print(1 if again else 0, 1 if bits else 0, f"{budget}: rows {loop['tape_rows']} keep {len(loop.get('row_kept', []))}, again {len(again)}, masks in bits {bits}")
PY
			r_n=$((r_n + 1))
			[ -s "$b.out" ] && r_less=$((r_less + $(cut -d' ' -f1 "$b.out"))) && r_bits=$((r_bits + $(cut -d' ' -f2 "$b.out"))) &&
				cut -d' ' -f3- "$b.out" >>"$rl"
		done
done
# relu's masks go into bits at some budget (rows.dp has none to pack)
if [ $r_ok = 1 ] && [ $r_less -ge 1 ] && { [ $rows = rows ] || [ $r_bits -ge 1 ]; }; then
	ok "ckpt/$rows: $r_n budgets in f32 and f64, gradients bitwise, rows keeping less at $r_less, masks in bits at $r_bits"
else
	notok "ckpt/$rows" "$rl"
fi
done
# the networks' blocks (skip connections, attention, layernorm) at 85% and 70% of their
# store-everything peak: rows that keep less and straight-line recomputation, gradients
# bitwise, peaks and recomputed FLOPs measured as planned. DRANet at 85% and 80%: since
# its convolutions keep no unfolded input, parameters, gradients and the work that one
# layer needs are most of its store-everything peak, and 70% is below them.
for s in gpt resnet dranet; do
	nl="$o/net_$s.log" nd="$o/net_$s"
	n_ok=1 n_drops=0 low=70
	[ $s = dranet ] && low=80
	"$DPC" --target cpu --schedule-json "$nd.none.json" samples/$s.dp -o "$nd.none" >"$nl" 2>&1 &&
		"$nd.none" --steps 2 --quiet --dump-grads "$nd.none.g" >>"$nl" 2>&1 || n_ok=0
	for pc in 85 $low; do
		[ $n_ok = 1 ] || break
		budget=$(($(json "$nd.none.json" peak_device_bytes total) * pc / 100)) b="$nd.$pc"
		under_budget "$b" "$nd.none.g" "$nl" $budget samples/$s.dp &&
			python3 - "$b.json" "$b.run.json" $budget >"$b.out" 2>>"$nl" <<'PY' || n_ok=0
import json, sys
plan, run, budget = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
assert run["peak_device_bytes"] == run["predicted_device_bytes"] <= budget, run
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"], (run["recomputed_flops"], plan["recomputed_flops"])
print(len(plan["straight_line"]["recomputed"]) + sum(len(l.get("row_recomputed", [])) for l in plan["loops"]))
PY
		[ -s "$b.out" ] && n_drops=$((n_drops + $(cat "$b.out")))
	done
	if [ $n_ok = 1 ] && [ $n_drops -ge 1 ]; then
		ok "ckpt/net-$s: at 85% and $low% of store-everything's peak, $n_drops ops computed again, gradients bitwise"
	else
		notok "ckpt/net-$s" "$nl"
	fi
done
# a loop before a wide head, under a budget that leaves its sweep one slot at the turn: the fit
# advances it from its start instead, its slots held only while its adjoint runs (fit_sweeps);
# gradients bitwise as store-everything's, peak within the budget and as planned, the steps the
# binomial formula counts, fewer than the sweep's with one slot
sw="$o/sweeps" swl="$o/sweeps.log"
if "$DPC" --target cpu --schedule-json "$sw.none.json" tests/ckpt/sweeps.dp -o "$sw.none" >"$swl" 2>&1 &&
	"$sw.none" --steps 2 --quiet --dump-grads "$sw.none.g" >>"$swl" 2>&1 &&
	budget=$(python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))['peak_device_bytes']
fixed = d['params'] + d['grads'] + d['optimizer'] + d['inputs']
print(fixed + (d['total'] - fixed) * 45 // 100)" "$sw.none.json") &&
	under_budget "$sw.45" "$sw.none.g" "$swl" "$budget" tests/ckpt/sweeps.dp &&
	PYTHONPATH="$o" python3 - "$sw.45.json" "$sw.45.run.json" "$budget" >>"$swl" 2>&1 <<'PY'
import json, sys
from counts import advances, sweep
plan, run, budget = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
assert run["peak_device_bytes"] == run["predicted_device_bytes"] <= budget, run
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"], (run["recomputed_flops"], plan["recomputed_flops"])
(loop,) = plan["loops"]
n, s = loop["n"], loop["s"]
assert loop["schedule"] == "binomial" and s > 1, loop["schedule"]
assert loop["recomputed_steps"] == advances(n, s) < sweep(n, 1), (loop["recomputed_steps"], advances(n, s), sweep(n, 1))
print(f"advanced from its start with {s} slots: {loop['recomputed_steps']} steps, the sweep with one {sweep(n, 1)}")
PY
then
	ok "ckpt/sweeps: $(tail -1 "$swl"); gradients bitwise, peak as planned"
else
	notok "ckpt/sweeps" "$swl"
fi
# a budget just above min-memory's peak, below what the fitted path reaches: min-memory's plan is
# taken and its loops take the slots the budget leaves (ckpt_fill_slots): gradients bitwise as
# store-everything's, peak within the budget and as planned, fewer FLOPs recomputed than min-memory's
lw="$o/least_within" lwl="$o/least_within.log" n12=(-D N=12)
if "$DPC" --target cpu "${n12[@]}" samples/resnet.dp -o "$lw.none" >"$lwl" 2>&1 &&
	"$lw.none" --steps 2 --quiet --dump-grads "$lw.none.g" >>"$lwl" 2>&1 &&
	"$DPC" --target cpu "${n12[@]}" --checkpoint none --emit=schedule --schedule-json "$lw.full.json" samples/resnet.dp -o /dev/null >>"$lwl" 2>&1 &&
	"$DPC" --target cpu "${n12[@]}" --checkpoint min-memory --emit=schedule --schedule-json "$lw.least.json" samples/resnet.dp -o /dev/null >>"$lwl" 2>&1 &&
	budget=$(($(json "$lw.least.json" peak_device_bytes total) + $(json "$lw.full.json" peak_device_bytes total) / 100)) &&
	under_budget "$lw.b" "$lw.none.g" "$lwl" "$budget" "${n12[@]}" samples/resnet.dp &&
	python3 - "$lw.b.json" "$lw.b.run.json" "$lw.least.json" "$budget" >>"$lwl" 2>&1 <<'PY'
import json, sys
plan, run, least, budget = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), int(sys.argv[4])
assert run["peak_device_bytes"] == run["predicted_device_bytes"] <= budget, run
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"], (run["recomputed_flops"], plan["recomputed_flops"])
assert plan["recomputed_flops"] < least["recomputed_flops"], (plan["recomputed_flops"], least["recomputed_flops"])
print("%.3f of a forward recomputed (min-memory's %.3f), slots %s (min-memory's %s)" % (plan["recomputed_fraction"],
      least["recomputed_fraction"], [l["s"] for l in plan["loops"]], [l["s"] for l in least["loops"]]))
PY
then
	ok "ckpt/least-within: $(tail -1 "$lwl"); gradients bitwise, peak as planned"
else
	notok "ckpt/least-within" "$lwl"
fi
# a loop's snapshots are work-region tensors, held only while they hold something: ResNet's three
# loops reversed one after another with binomial (no sweep) share storage, and the run is bitwise
# store-everything's with its peak as planned
sl="$o/snaplives.log" sn="$o/snaplives"
if [ -x "$o/net_resnet.none" ] && [ -f "$o/net_resnet.none.g" ] &&
	"$DPC" --target cpu --checkpoint binomial --snapshots 2 --emit=stream samples/resnet.dp -o "$sn.stream" >"$sl" 2>&1 &&
	"$DPC" --target cpu --checkpoint binomial --snapshots 2 --schedule-json "$sn.json" samples/resnet.dp -o "$sn" >>"$sl" 2>&1 &&
	"$sn" --steps 2 --quiet --dump-grads "$sn.g" --summary-json "$sn.run.json" >>"$sl" 2>&1 &&
	cmp "$o/net_resnet.none.g" "$sn.g" >>"$sl" 2>&1 &&
	python3 - "$sn.stream" "$sn.json" "$sn.run.json" >>"$sl" 2>&1 <<'PY'
import json, re, sys
snaps = [(int(a), int(a) + int(b)) for a, b in re.findall(r"^#   %snap_\S+ +@ (\d+) +(\d+) bytes", open(sys.argv[1]).read(), re.M)]
assert len(snaps) == 3, snaps
assert any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(snaps) for b in snaps[i + 1:]), snaps
plan, run = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
assert run["peak_device_bytes"] == run["predicted_device_bytes"] == plan["peak_device_bytes"]["total"], run
print("snapshots at", snaps)
PY
then
	ok "ckpt/snapshots-by-lives: ResNet's three loops' snapshots share storage, gradients bitwise, peak as planned"
else
	notok "ckpt/snapshots-by-lives" "$sl"
fi
# the network graphs of issue 26 (DenseNet, Inception, U-Net) at B=4, 16x16, more than
# 12 candidates each, so the cost model's search chooses: at 85% of store-everything's peak
# and near their least budget, gradients bitwise, peaks and recomputed FLOPs measured as
# planned; DenseNet at half its peak recomputes at most 15% of a forward
# (under make test-sanitize DenseNet alone: the same search on other graphs)
graphs="densenet:50 inception:75 unet:72"
$sanitized && graphs=densenet:50
for s in $graphs; do
	low=${s#*:} s=${s%:*}
	nl="$o/graph_$s.log" nd="$o/graph_$s" n_ok=1 searched=""
	size=(-D B=4 -D S=16)
	"$DPC" --target cpu --schedule-json "$nd.none.json" "${size[@]}" samples/$s.dp -o "$nd.none" >"$nl" 2>&1 &&
		"$nd.none" --steps 2 --quiet --dump-grads "$nd.none.g" >>"$nl" 2>&1 || n_ok=0
	for pc in 85 $low; do
		[ $n_ok = 1 ] || break
		budget=$(($(json "$nd.none.json" peak_device_bytes total) * pc / 100)) b="$nd.$pc"
		under_budget "$b" "$nd.none.g" "$nl" $budget "${size[@]}" samples/$s.dp &&
			python3 - "$b.json" "$b.run.json" $budget $s $pc >"$b.out" 2>>"$nl" <<'PY' || n_ok=0
import json, sys
plan, run, budget = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
assert run["peak_device_bytes"] == run["predicted_device_bytes"] <= budget, run
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"], (run["recomputed_flops"], plan["recomputed_flops"])
line = plan["straight_line"]
assert line["search"] in ("exact", "greedy") and line["candidates"] > 12, line
assert line["flops_bound"] <= plan["recomputed_flops"], line
if sys.argv[4] == "densenet" and sys.argv[5] == "50":
    assert plan["recomputed_fraction"] <= 0.15, plan["recomputed_fraction"]
print("%s: %s %.3f" % (sys.argv[5], line["search"], plan["recomputed_fraction"]))
PY
		[ -s "$b.out" ] && searched="$searched $(cat "$b.out")"
	done
	# f64 at the lower budget (a share of its own store-everything peak): gradients bitwise too
	if [ $n_ok = 1 ]; then
		"$DPC" --target cpu --precision f64 --schedule-json "$nd.f64.json" "${size[@]}" samples/$s.dp -o "$nd.f64" >>"$nl" 2>&1 &&
			"$nd.f64" --steps 2 --quiet --dump-grads "$nd.f64.g" >>"$nl" 2>&1 &&
			under_budget "$nd.f64.$low" "$nd.f64.g" "$nl" $(($(json "$nd.f64.json" peak_device_bytes total) * low / 100)) \
				--precision f64 "${size[@]}" samples/$s.dp &&
			python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['recomputed_flops'] > 0" "$nd.f64.$low.json" 2>>"$nl" &&
			searched="$searched; f64 at $low%: bitwise" || n_ok=0
	fi
	# --checkpoint min-memory: at or below the lower budget's plan, gradients bitwise, peak as planned
	b="$nd.least"
	[ $n_ok = 1 ] && "$DPC" --target cpu --checkpoint min-memory --schedule-json "$b.json" "${size[@]}" samples/$s.dp -o "$b" >>"$nl" 2>&1 &&
		"$b" --steps 2 --quiet --dump-grads "$b.g" --summary-json "$b.run.json" >>"$nl" 2>&1 && cmp "$nd.none.g" "$b.g" >>"$nl" 2>&1 &&
		python3 - "$b.json" "$b.run.json" "$nd.$low.json" >"$b.out" 2>>"$nl" <<'PY' || n_ok=0
import json, sys
plan, run, low = (json.load(open(f)) for f in sys.argv[1:4])
assert run["peak_device_bytes"] == run["predicted_device_bytes"] <= low["peak_device_bytes"]["total"], (run, low["peak_device_bytes"])
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"], (run["recomputed_flops"], plan["recomputed_flops"])
assert plan["straight_line"]["least_peak"] is True, plan["straight_line"]
print("least %d bytes (%.3f)" % (run["peak_device_bytes"], plan["recomputed_fraction"]))
PY
	[ -s "$b.out" ] && searched="$searched; min-memory: $(cat "$b.out")"
	if [ $n_ok = 1 ]; then
		ok "ckpt/graph-$s: gradients bitwise, peaks and recomputed FLOPs as planned at (% of peak: search, fraction of a forward recomputed)$searched"
	else
		notok "ckpt/graph-$s" "$nl"
	fi
done
# the cell networks of bench/graphs.py (NASNet-A's and DARTS-V2's cells, the CIFAR-10
# network's wiring) at 4 channels, 5 cells (two reductions), B=2, 8x8: separable 3x3, 5x5 and
# 7x7 convolutions, dilated ones, both pools, factorized reductions. At half the peak and
# at the least: gradients bitwise as store-everything's, peaks and recomputed FLOPs as planned
# (under make test-sanitize NASNet's cells alone: DARTS's are the same search, 6 of its 25 minutes)
cells="NASNET DARTS_V2"
$sanitized && cells=NASNET
for cell in $cells; do
	cl="$o/cells_$cell.log" cd="$o/cells_$cell" c_ok=1 c_said=""
	python3 -c "import sys; sys.path.insert(0, 'bench'); import graphs
sys.stdout.write(graphs.cells(8, graphs.$cell, 4, 5, False, 10).text(2, 8, 'tests/ckpt'))" >"$cd.dp" 2>"$cl" &&
		"$DPC" --target cpu --schedule-json "$cd.none.json" "$cd.dp" -o "$cd.none" >>"$cl" 2>&1 &&
		"$cd.none" --steps 2 --quiet --dump-grads "$cd.none.g" >>"$cl" 2>&1 || c_ok=0
	for plan in half least; do
		[ $c_ok = 1 ] || break
		b="$cd.$plan"
		if [ $plan = half ]; then
			under_budget "$b" "$cd.none.g" "$cl" $(($(json "$cd.none.json" peak_device_bytes total) / 2)) "$cd.dp" || c_ok=0
		else
			"$DPC" --target cpu --checkpoint min-memory --stream none --schedule-json "$b.json" "$cd.dp" -o "$b" >>"$cl" 2>&1 &&
				"$b" --steps 2 --quiet --dump-grads "$b.g" --summary-json "$b.run.json" >>"$cl" 2>&1 &&
				cmp "$cd.none.g" "$b.g" >>"$cl" 2>&1 || c_ok=0
		fi
		[ $c_ok = 1 ] && python3 - "$b.json" "$b.run.json" "$cd.none.json" $plan >"$b.out" 2>>"$cl" <<'PY' || c_ok=0
import json, sys
plan, run, full = (json.load(open(f)) for f in sys.argv[1:4])
top = full["peak_device_bytes"]["total"]
assert run["peak_device_bytes"] == run["predicted_device_bytes"] <= (top // 2 if sys.argv[4] == "half" else top), run
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"] > 0, (run["recomputed_flops"], plan["recomputed_flops"])
assert plan["straight_line"]["candidates"] > 100, plan["straight_line"]
print("%s %d of %d bytes" % (sys.argv[4], run["peak_device_bytes"], top))
PY
		[ -s "$b.out" ] && c_said="$c_said${c_said:+, }$(cat "$b.out")"
	done
	# the search on one thread and on two: the same plan, byte for byte (DARTS's least, 30 s a search, at
	# half only: NASNet's least runs the same threads)
	thread_plans="least half"
	[ $cell = DARTS_V2 ] && thread_plans=half
	for plan in $thread_plans; do
		[ $c_ok = 1 ] || break
		if [ $plan = half ]; then m=(--device-mem $(($(json "$cd.none.json" peak_device_bytes total) * 6 / 10))); else m=(--checkpoint min-memory); fi
		"$DPC" --target cpu "${m[@]}" --stream none --threads 1 --emit=stream "$cd.dp" -o "$cd.$plan.t1" >>"$cl" 2>&1 &&
			"$DPC" --target cpu "${m[@]}" --stream none --emit=stream "$cd.dp" -o "$cd.$plan.t2" >>"$cl" 2>&1 &&
			[ -s "$cd.$plan.t1" ] && cmp "$cd.$plan.t1" "$cd.$plan.t2" >>"$cl" 2>&1 || c_ok=0
	done
	if [ $c_ok = 1 ]; then
		ok "ckpt/cells-$cell: $c_said; gradients bitwise, peaks and recomputed FLOPs as planned; the same plans on one thread and two"
	else
		notok "ckpt/cells-$cell" "$cl"
	fi
done
# one objective for loops and straight line: ResNet (B=32, 32x32, C=16, N=3) at 60% of its
# peak, where fitting the loops first and the straight line after recomputes 29% of a
# forward (session 15); the straight line given less so that the loops get rows: under 5%.
# At 50%, where one shape for the three loops (their states 4:2:1 in bytes) recomputed 43%
# (session 20), each loop its own: under 5%. Gradients bitwise, peaks and FLOPs as planned.
nl="$o/joint.log" nd="$o/joint" size=(-D B=32 -D S=32 -D C=16 -D N=3) j_said=
j_ok=1
"$DPC" --target cpu --schedule-json "$nd.none.json" "${size[@]}" samples/resnet.dp -o "$nd.none" >"$nl" 2>&1 &&
	"$nd.none" --steps 2 --quiet --dump-grads "$nd.none.g" >>"$nl" 2>&1 || j_ok=0
for pc in 60 50; do
	[ $j_ok = 1 ] || break
	budget=$(($(json "$nd.none.json" peak_device_bytes total) * pc / 100))
	under_budget "$nd.$pc" "$nd.none.g" "$nl" $budget "${size[@]}" samples/resnet.dp &&
		python3 - "$nd.$pc.json" "$nd.$pc.run.json" $budget >"$nd.out" 2>>"$nl" <<'PY' || j_ok=0
import json, sys
plan, run, budget = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
assert run["peak_device_bytes"] == run["predicted_device_bytes"] <= budget, run
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"], (run["recomputed_flops"], plan["recomputed_flops"])
assert plan["recomputed_fraction"] < 0.05, plan["recomputed_fraction"]
print("%.4f" % plan["recomputed_fraction"])
PY
	[ $j_ok = 1 ] && j_said="$j_said${j_said:+, }at $pc% of the peak $(cat "$nd.out")"
done
if [ $j_ok = 1 ]; then
	ok "ckpt/joint-resnet: $j_said of a forward recomputed (loops first at 60%: 0.29; one shape for the loops at 50%: 0.43), gradients bitwise"
else
	notok "ckpt/joint-resnet" "$nl"
fi
# pooled rows: the bench MLP at L = 1024 with small layers, at 15% of its store-everything
# peak, keeps its snapshots beyond the first in the rows; gradients bitwise in f32 and f64,
# recomputed steps and FLOPs as planned, peak as planned within the budget (under make test-sanitize in f32)
pl="$o/pool.log" pd="$o/pool" p_ok=1 p_pooled=0
sizes="-D L=1024 -D H=32 -D B=256 -D D=32"
pprecs="f32 f64"
$sanitized && pprecs=f32
for prec in $pprecs; do
	"$DPC" --target cpu --precision $prec $sizes --schedule-json "$pd.$prec.none.json" bench/resmlp_big.dp -o "$pd.$prec.none" >>"$pl" 2>&1 &&
		"$pd.$prec.none" --steps 2 --quiet --dump-grads "$pd.$prec.none.g" >>"$pl" 2>&1 || p_ok=0
	budget=$(($(json "$pd.$prec.none.json" peak_device_bytes total) * 15 / 100))
	under_budget "$pd.$prec" "$pd.$prec.none.g" "$pl" $budget --precision $prec $sizes bench/resmlp_big.dp &&
		python3 - "$pd.$prec.json" "$pd.$prec.run.json" $budget >>"$pl" 2>&1 <<'PY' || p_ok=0
import json, sys
plan, run, budget = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
loop = plan["loops"][0]
assert loop["schedule"] == "pooled" and loop["s"] == 1, loop
assert run["peak_device_bytes"] == run["predicted_device_bytes"] <= budget, run
assert run["recomputed_steps"] == 2 * plan["recomputed_steps"], (run["recomputed_steps"], plan["recomputed_steps"])
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"], (run["recomputed_flops"], plan["recomputed_flops"])
print(f"{budget}: {loop['tape_rows']} pooled rows, {plan['recomputed_steps']} recomputed steps")
PY
	[ $p_ok = 1 ] && p_pooled=$((p_pooled + 1))
done
if [ $p_ok = 1 ] && [ $p_pooled = $(echo $pprecs | wc -w) ]; then
	ok "ckpt/pooled-rows: ${pprecs// / and } at 15% of the peak, gradients bitwise, counts as planned ($(grep pooled "$pl" | tr '\n' ';'))"
else
	notok "ckpt/pooled-rows" "$pl"
fi
# the same with Adam, whose moments the search must leave in the plan: both moments of every
# parameter counted, trained parameters bitwise as store-everything's
rl="$o/rows_adam.log" rd="$o/rows_adam"
if "$DPC" --target cpu --optimizer adam --schedule-json "$rd.none.json" tests/ckpt/rows.dp -o "$rd.none" >"$rl" 2>&1 &&
	"$rd.none" --steps 3 --quiet --save "$rd.none.p" >>"$rl" 2>&1 &&
	budget=$(($(json "$rd.none.json" peak_device_bytes total) - $(json "$rd.none.json" peak_device_bytes tape) / 2)) &&
	"$DPC" --target cpu --optimizer adam --stream none --device-mem $budget --schedule-json "$rd.json" tests/ckpt/rows.dp \
		-o "$rd" >>"$rl" 2>&1 &&
	"$rd" --steps 3 --quiet --save "$rd.p" >>"$rl" 2>&1 && cmp "$rd.none.p" "$rd.p" >>"$rl" 2>&1 &&
	python3 - "$rd.json" >>"$rl" 2>&1 <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
b = plan["peak_device_bytes"]
assert b["optimizer"] == 2 * b["params"], b
assert plan["loops"][0].get("row_recomputed"), plan["loops"][0]
PY
then
	ok "ckpt/rows-adam: rows keeping less under $budget bytes, Adam's moments planned, parameters bitwise"
else
	notok "ckpt/rows-adam" "$rl"
fi
# keep, recompute or offload under one budget (issue 26, item 7): the three graphs at B=4,
# 16x16 under min-memory with offloading priced (--device-mem allows streaming). The least
# plan offloads and lies at or below the least without offloading (--offload-cost 0: on Inception
# that one is 4.4% above the bound, and the two are equal); it trains
# with gradients and parameters bitwise equal to store-everything's, in f32 and (DenseNet)
# f64, its peak and the bytes it moves each way measured as predicted, the bytes those of
# the values it lists, down and up once a step
# (under make test-sanitize DenseNet in f32 alone: the same offloads on other graphs and precisions)
offloads="densenet:f32 densenet:f64 inception:f32 unet:f32"
$sanitized && offloads=densenet:f32
for s in $offloads; do
	prec=${s#*:} s=${s%:*}
	ol="$o/offload_$s.$prec.log" od="$o/offload_$s.$prec"
	size=(-D B=4 -D S=16 --precision $prec)
	if "$DPC" --target cpu "${size[@]}" samples/$s.dp -o "$od.none" >"$ol" 2>&1 &&
		"$od.none" --steps 2 --quiet --dump-grads "$od.none.g" --save "$od.none.p" >>"$ol" 2>&1 &&
		"$DPC" --target cpu --checkpoint min-memory --device-mem 1G --offload-cost 0 --emit=schedule -o /dev/null \
			--schedule-json "$od.kept.json" "${size[@]}" samples/$s.dp >>"$ol" 2>&1 &&
		"$DPC" --target cpu --checkpoint min-memory --device-mem 1G --schedule-json "$od.json" "${size[@]}" samples/$s.dp \
			-o "$od" >>"$ol" 2>&1 &&
		"$od" --steps 2 --quiet --dump-grads "$od.g" --save "$od.p" --summary-json "$od.run.json" >>"$ol" 2>&1 &&
		cmp "$od.none.g" "$od.g" >>"$ol" 2>&1 && cmp "$od.none.p" "$od.p" >>"$ol" 2>&1 &&
		python3 - "$od.json" "$od.run.json" "$od.kept.json" >"$od.out" 2>>"$ol" <<'PY'
import json, sys
plan, run, kept = (json.load(open(f)) for f in sys.argv[1:4])
line = plan["straight_line"]
moved = line["offloaded_bytes"]
assert moved > 0 and line["offloaded"] and line["offload_cost"] == 943, line
assert kept["straight_line"]["offloaded_bytes"] == 0, kept["straight_line"]
least, without = run["peak_device_bytes"], kept["peak_device_bytes"]["total"]
assert least == run["predicted_device_bytes"] == plan["peak_device_bytes"]["total"] <= without, (run, without)
for way in ("h2d", "d2h"):
    assert run["stream_%s_bytes" % way] == run["predicted_stream_%s_bytes" % way] == 2 * moved, (way, run, moved)
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"], (run["recomputed_flops"], plan["recomputed_flops"])
print("%d values, %d bytes offloaded; least %d bytes against %d without" % (len(line["offloaded"]), moved, least, without))
PY
	then
		ok "ckpt/offload-$s $prec: gradients and parameters bitwise, peak and bytes moved as predicted; $(cat "$od.out")"
	else
		notok "ckpt/offload-$s $prec" "$ol"
	fi
done
# the same with Adam, two micro-batches a step and clipping: the offloads of every micro-batch
# counted, the trained parameters bitwise as store-everything's
ol="$o/offload_adam.log" od="$o/offload_adam"
size=(-D B=4 -D S=16 --optimizer adam)
run=(--steps 2 --quiet --accum 2 --clip-grad 0.5)
if "$DPC" --target cpu "${size[@]}" samples/densenet.dp -o "$od.none" >"$ol" 2>&1 &&
	"$od.none" "${run[@]}" --save "$od.none.p" >>"$ol" 2>&1 &&
	"$DPC" --target cpu --checkpoint min-memory --device-mem 1G --schedule-json "$od.json" "${size[@]}" samples/densenet.dp \
		-o "$od" >>"$ol" 2>&1 &&
	"$od" "${run[@]}" --save "$od.p" --summary-json "$od.run.json" >>"$ol" 2>&1 && cmp "$od.none.p" "$od.p" >>"$ol" 2>&1 &&
	python3 - "$od.json" "$od.run.json" >>"$ol" 2>&1 <<'PY'
import json, sys
plan, run = (json.load(open(f)) for f in sys.argv[1:3])
moved = plan["straight_line"]["offloaded_bytes"]
assert moved > 0, plan["straight_line"]
assert run["peak_device_bytes"] == run["predicted_device_bytes"], run
for way in ("h2d", "d2h"):
    assert run["%s_bytes" % way] == run["predicted_%s_bytes" % way], (way, run)
    assert run["stream_%s_bytes" % way] == run["predicted_stream_%s_bytes" % way] == 4 * moved, (way, run, moved)
PY
then
	ok "ckpt/offload-adam: DenseNet with Adam, --accum 2 and --clip-grad, values offloaded each micro-batch, parameters bitwise"
else
	notok "ckpt/offload-adam" "$ol"
fi

# the rows' search bounds its choices before it plans them (fit_rows_search: tapes_bound from mem_plan_floor):
# the plan is the one that fitting every choice makes (DPC_ROWS_UNBOUNDED=1), on the ResNet sample's three
# loops at budgets from 90% of store-everything's peak down, streaming or not; and on two CPUs, where half
# the choices are searched in a child process each half bounded by its own best only, the one the search
# makes on one CPU (taskset: all in one process, each bounded by all before it) (under make test-sanitize at 80%
# and 50%: the same search at the other budgets)
rb="$o/rows_bound"
full=$("$DPC" --target cpu samples/resnet.dp --checkpoint none --stream none --emit=schedule -o /dev/null \
	--schedule-json "$rb.json" >/dev/null 2>&1 && python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_device_bytes']['total'])" "$rb.json")
same=0 differ="" cpu=$(python3 -c "import os; print(min(os.sched_getaffinity(0)))")
pcts="90 80 70 60 50"
$sanitized && pcts="80 50"
for pct in $pcts; do
	for stream in none auto; do
		args=(--target cpu samples/resnet.dp --device-mem $((full * pct / 100)) --stream $stream --emit=schedule)
		"$DPC" "${args[@]}" -o "$rb.bounded" >/dev/null 2>&1
		DPC_ROWS_UNBOUNDED=1 "$DPC" "${args[@]}" -o "$rb.all" >/dev/null 2>&1
		taskset -c "$cpu" "$DPC" "${args[@]}" -o "$rb.one" >/dev/null 2>&1
		if [ -s "$rb.all" ] && cmp -s "$rb.bounded" "$rb.all" && cmp -s "$rb.bounded" "$rb.one"; then
			same=$((same + 1))
		else
			differ="$differ $pct%/$stream"
		fi
	done
done
if [ -n "$full" ] && [ -z "$differ" ]; then
	ok "ckpt/rows-bounded: the ResNet sample's plans with the rows' choices bounded are those of fitting them all, and on one CPU those on $(nproc), $same budgets"
else
	notok "ckpt/rows-bounded: plans differ at$differ (store-everything ${full:-not planned})"
fi

# min-memory with loops plans its shapes after the first in a child process beside it where dpc has two CPUs,
# each shape's searches stopped after their bisection, and takes the child's bytes for a shape only where every
# search stopped above the shape's own least_past (budget.c's least_fit): the plan of every loop sample is the
# one made on one CPU, where the parent plans all four shapes itself; tests/ckpt/least_none.dp takes the last
# shape (store-everything), which the parent plans again after the child: its plan is --checkpoint none's
lm="$o/least_ahead" same=0 differ=""
for s in dranet gpt oscillator resmlp resnet tests/ckpt/least_none; do
	f=samples/$s.dp
	[ -f "$f" ] || f=$s.dp
	s=$(basename "$s")
	args=(--target cpu "$f" --checkpoint min-memory --stream none --emit=schedule)
	"$DPC" "${args[@]}" -o "$lm.$s.two" >/dev/null 2>&1
	taskset -c "$cpu" "$DPC" "${args[@]}" -o "$lm.$s.one" >/dev/null 2>&1
	if [ -s "$lm.$s.two" ] && cmp -s "$lm.$s.two" "$lm.$s.one"; then
		same=$((same + 1))
	else
		differ="$differ $s"
	fi
done
"$DPC" --target cpu tests/ckpt/least_none.dp --checkpoint none --stream none --emit=schedule -o "$lm.none" >/dev/null 2>&1
planned_peak() { sed -n 's/^predicted peak device memory \([0-9]*\) bytes.*/\1/p' "$1"; }
if ! grep -q "store everything" "$lm.least_none.two" 2>/dev/null || [ "$(planned_peak "$lm.least_none.two")" != "$(planned_peak "$lm.none")" ] ||
	[ -z "$(planned_peak "$lm.none")" ]; then
	differ="$differ least_none (not store-everything's plan)"
fi
if [ -z "$differ" ]; then
	ok "ckpt/least-ahead: min-memory's plans of the loop samples and least_none ($same) on $(nproc) CPUs are those on one; least_none's is store-everything's"
else
	notok "ckpt/least-ahead: plans differ on$differ"
fi
finish
