#!/usr/bin/env bash
# The least peak and its proven bound (issue 40): no plan goes below the bound, min-memory's peak
# near it on the samples and on Feng & Huang's networks, and against the MILP's optima
# (tests/least/milp). Split from tests/ckpt so that the two run side by side.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/least"
mkdir -p "$o"
# Under make test-sanitize (tests/lib.sh's $sanitized) the bound's checks run on four samples that reach
# every kind of plan (loops, attention, a skip-connected graph, offloading) and on one of Feng & Huang's
# networks; the checks of how low the least searches reach at issue 40's sizes and against the MILP's
# optima are left to the plain run.
# The peak's lower bound (issue 40): no plan of a model goes below it, under any schedule, budget or
# offloading, and every plan of one model with its parameters resident states the same bound; on a
# program whose peak is one op's operands and result beside its inputs, the bound is the peak (to alignment)
bound_check() { # NAME DP ARGS...
	local name=$1 dp=$2
	shift 2
	"$DPC" --target cpu "$@" "$dp" --emit=schedule --schedule-json "$o/bound.$name.json" >"$o/bound.$name.log" 2>&1
}
bound_all() { # NAME DP ARGS...: every kind of plan of one model
	local s=$1 dp=$2 full
	shift 2
	bound_check "$s-none" "$dp" "$@" --checkpoint none
	bound_check "$s-binomial" "$dp" "$@" --checkpoint binomial
	bound_check "$s-least" "$dp" "$@" --checkpoint min-memory --stream none
	full=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_device_bytes']['total'])" "$o/bound.$s-none.json" 2>/dev/null)
	[ -n "$full" ] && bound_check "$s-auto" "$dp" "$@" --checkpoint auto --stream none --device-mem $((full * 3 / 4))
	[ -n "$full" ] && bound_check "$s-offload" "$dp" "$@" --checkpoint min-memory --device-mem $((full * 4))
	[ -n "$full" ] && bound_check "$s-streamed" "$dp" "$@" --checkpoint auto --device-mem $((full / 2))
	# budgets that force recomputation of most of the graph (an infeasible one writes nothing)
	[ -n "$full" ] && bound_check "$s-third" "$dp" "$@" --checkpoint auto --stream none --device-mem $((full / 3))
	[ -n "$full" ] && bound_check "$s-half" "$dp" "$@" --checkpoint auto --stream none --device-mem $((full / 2))
	check "least/peak bound $s: every plan at or above it, one bound for all" python3 - "$o" "$s" <<'PY'
import json, os, sys
o, s = sys.argv[1], sys.argv[2]
plans = {}
for m in ("none", "binomial", "least", "auto", "offload", "streamed", "third", "half"):
    f = f"{o}/bound.{s}-{m}.json"
    if os.path.exists(f) and os.path.getsize(f):
        d = json.load(open(f))
        plans[m] = (d["peak_device_bytes"]["total"], d["peak_lower_bound"], d["peak_gap"], d["streamed"])
assert len(plans) >= 3, plans
bounds = {b for _, b, _, streamed in plans.values() if not streamed}
assert len(bounds) == 1, plans
plans = {m: x[:3] for m, x in plans.items()}
for m, (peak, b, gap) in plans.items():
    assert b > 0 and peak >= b, (m, peak, b)
    assert abs(gap - (peak - b) / peak) < 1e-6, (m, gap)
print(f"bound {b}; " + ", ".join(f"{m} {peak} ({gap:.3f} above)" for m, (peak, _, gap) in plans.items()))
PY
	# the straight-line search's cost model (issue 40): over every choice it planned, its peak at or above the
	# bytes the plan's tensors hold at once, and at most 25% above them (23.6% the most measured, 2026-11-27:
	# Inception at B=8, choices the least search's threshold accepting reaches, most values computed each time)
	check "least/model against plan $s: the model's peak from the live bytes to 25% above, on every choice planned" \
		python3 - "$o" "$s" <<'PY'
import json, os, sys
o, s = sys.argv[1], sys.argv[2]
seen = 0
for m in ("least", "auto", "third", "half"):
    f = f"{o}/bound.{s}-{m}.json"
    if not (os.path.exists(f) and os.path.getsize(f)):
        continue
    c = json.load(open(f)).get("straight_line", {}).get("model_checked")
    if c:
        seen += c["choices"]
        lo, hi = c["over_live"]
        assert lo >= 0 and hi <= 0.25, (m, c)
print(f"{seen} choices")
PY
}
bound_samples="classifier resmlp gpt resnet densenet inception unet dranet oscillator"
$sanitized && bound_samples="classifier gpt densenet oscillator"
for s in $bound_samples; do
	bound_all "$s" samples/$s.dp
done
# near_bound NAME NONE LEAST: LEAST's peak (a --schedule-json) at most 2 points of NONE's (store-everything's)
# above its proven bound
near_bound() {
	check "$1: within 2 points of store-everything above it" python3 - "$2" "$3" <<'PY'
import json, sys
none, least = (json.load(open(f)) for f in sys.argv[1:3])
full, peak, bound = none["peak_device_bytes"]["total"], least["peak_device_bytes"]["total"], least["peak_lower_bound"]
gap = (peak - bound) / full
assert bound <= peak and gap <= 0.02, (full, peak, bound, gap)
print(f"least {peak} bytes, bound {bound}: {100 * gap:.2f} points of store-everything's {full}")
PY
}
# at the samples' own sizes (measured 2026-11-28: classifier 1.04 points, DenseNet 0.87, U-Net 0.34, the
# oscillator 0.01, GPT 1.74, the residual MLP 0.03, DRANet 1.11, ResNet 1.18 with its loops' snapshots packed
# by their lives (2.95 when they were fixed regions); Inception's least, 3.51 points above, is the MILP's
# optimum over any schedule, checked below)
for s in classifier densenet unet oscillator gpt resmlp dranet resnet; do
	case " $bound_samples " in *" $s "*) ;; *) continue ;; esac
	near_bound "least/least near the bound $s" "$o/bound.$s-none.json" "$o/bound.$s-least.json"
done
# with loops, min-memory at or below the least auto reaches (its error at a budget no plan meets names it):
# the loops' least shape alone held ResNet at 343,808 bytes where auto reached 253,952 (2026-11-27). Left to
# the plain run under sanitizers: the same plans, and auto's budget search is slow there
for s in resnet gpt resmlp dranet oscillator; do
	$sanitized && break
	least=$("$DPC" --target cpu samples/$s.dp --checkpoint auto --stream none --device-mem 1 -o /dev/null 2>&1 |
		grep -o 'needs [^(]*([0-9]* bytes' | grep -o '[0-9]* bytes' | cut -d' ' -f1)
	check "least/least with loops $s: min-memory at or below auto's least (${least:-none} bytes)" python3 -c "
import json, sys
peak = json.load(open(sys.argv[1]))['peak_device_bytes']['total']
assert peak <= int(sys.argv[2]), (peak, sys.argv[2])
print(peak)" "$o/bound.$s-least.json" "${least:-0}"
done
# a budget that min-memory's plan fits compiles under auto, whose own fit of the loops may stop higher (ResNet:
# 247,808 bytes where min-memory's plan needs 210,944, 2026-11-28), and trains bitwise as store-everything; a
# byte less is refused, naming min-memory's plan
if ! $sanitized; then
	lb=$(json "$o/bound.resnet-least.json" peak_device_bytes total) lw="$o/within.resnet"
	if "$DPC" --target cpu samples/resnet.dp -o "$lw.none" >"$lw.log" 2>&1 &&
		"$lw.none" --steps 2 --quiet --dump-grads "$lw.none.g" >>"$lw.log" 2>&1 &&
		"$DPC" --target cpu samples/resnet.dp --checkpoint auto --stream none --device-mem "$lb" --schedule-json "$lw.json" \
			-o "$lw" >>"$lw.log" 2>&1 &&
		"$lw" --steps 2 --quiet --dump-grads "$lw.g" --summary-json "$lw.run.json" >>"$lw.log" 2>&1 &&
		cmp "$lw.none.g" "$lw.g" >>"$lw.log" 2>&1 &&
		[ "$(json "$lw.run.json" peak_device_bytes)" -le "$lb" ]; then
		ok "least/within min-memory's least resnet: auto under $lb bytes compiles, bitwise, peak within"
	else
		notok "least/within min-memory's least resnet" "$lw.log"
	fi
	expect "least/below min-memory's least resnet: refused, naming it" 1 \
		"needs .*($lb bytes).*more than --device-mem.*min-memory's plan, the least dpc finds" \
		"$DPC" --target cpu samples/resnet.dp --checkpoint auto --stream none --device-mem $((lb - 1)) -o /dev/null
fi
# min-memory on the loop samples (their taped steps compute values again at each adjoint read, keeping those
# that cost no peak: ckpt_steps_each): gradients and parameters bitwise as store-everything's, the measured peak
# the planned one, the recomputed FLOPs as planned, and no more than store-everything's peak nor min-memory's
# before (2026-11-28, the seventh step's table: ResNet 219,392 bytes, GPT 492,544, the residual MLP 1,263,360,
# DRANet 73,728; a loop inside a loop 2,816, store-everything's; since 2026-12-02 the MLP's layer gradients are
# made on their own before they are added, ir_may_absorb, 1,296,640); under sanitizers GPT, the MLP and the
# nested loops (ResNet's and DRANet's searches take a minute there)
loop_least="resnet:219392 gpt:492544 resmlp:1296640 dranet:73728 tests/ops/nested:2816"
$sanitized && loop_least="gpt:492544 resmlp:1296640 tests/ops/nested:2816"
for spec in $loop_least; do
	s=${spec%:*} was=${spec#*:}
	dp=samples/$s.dp b="$o/loop.$(basename "$s")" lg="$o/loop.$(basename "$s").log"
	[ -f "$s.dp" ] && dp=$s.dp
	if "$DPC" --target cpu "$dp" --schedule-json "$b.none.json" -o "$b.none" >"$lg" 2>&1 &&
		"$b.none" --steps 2 --quiet --dump-grads "$b.none.g" --save "$b.none.p" >>"$lg" 2>&1 &&
		"$DPC" --target cpu "$dp" --checkpoint min-memory --stream none --schedule-json "$b.json" -o "$b" >>"$lg" 2>&1 &&
		"$b" --steps 2 --quiet --dump-grads "$b.g" --save "$b.p" --summary-json "$b.run.json" >>"$lg" 2>&1 &&
		cmp "$b.none.g" "$b.g" >>"$lg" 2>&1 && cmp "$b.none.p" "$b.p" >>"$lg" 2>&1; then
		check "least/loops $s: min-memory bitwise as store-everything, peak and FLOPs as planned" python3 - "$b.json" \
			"$b.run.json" "$was" "$b.none.json" <<'PY'
import json, sys
plan, run, was = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
full = json.load(open(sys.argv[4]))["peak_device_bytes"]["total"]
peak = plan["peak_device_bytes"]["total"]
assert run["peak_device_bytes"] == run["predicted_device_bytes"] == peak <= min(was, full), (run, peak, was, full)
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"], (run["recomputed_flops"], plan["recomputed_flops"])
print(f"{peak} bytes (before: {was}; store-everything {full}), {plan['recomputed_fraction']:.3f} of a forward again")
PY
	else
		notok "least/loops $s: min-memory bitwise as store-everything" "$lg"
	fi
done
# cross_entropy_grad writes in its logits where they die there (GPT-2's logits are 1.6 GB at B=8): the plan
# says so, the bound counts one of the two (above: one bound for all), and the runs above compare its
# gradients bitwise with the interpreter's order of work (tests/reference checks the values)
"$DPC" --target cpu samples/gpt.dp --emit=stream -o "$o/gpt.stream" >"$o/gpt.stream.log" 2>&1
check "least/cross_entropy_grad in its logits" grep -E "^#   %[0-9]+ +in %logits\.[0-9]+, its operand, which dies there" "$o/gpt.stream"
# the sizes at which issue 40 measured the skip-connected graphs
for s in densenet inception unet; do
	$sanitized && break
	bound_all "$s-b8" samples/$s.dp -D B=8 -D S=32 -D C=16
done
# the least peak near the bound (issue 40): on the skip-connected samples at both sizes issue 40 measured,
# min-memory's peak at most 2 points of store-everything's above the proven bound (measured 2026-11-27, at
# B=8 and B=32: U-Net 0.60 and 0.11, DenseNet 0.71 and 0.12, Inception 0.15 and 0.04)
for s in densenet:8:32 inception:8:32 unet:8:32 densenet:32:32 inception:32:32 unet:32:64; do
	$sanitized && break
	IFS=: read -r n b sz <<<"$s"
	size=(-D B=$b -D S=$sz)
	[ "$n$b" = unet8 ] && size+=(-D C=16)
	lg="$o/near.$n$b.log"
	if "$DPC" --target cpu "${size[@]}" samples/$n.dp --checkpoint none --emit=schedule --schedule-json "$o/near.$n$b.none.json" \
		>"$lg" 2>&1 &&
		"$DPC" --target cpu "${size[@]}" samples/$n.dp --checkpoint min-memory --stream none --emit=schedule \
			--schedule-json "$o/near.$n$b.least.json" >>"$lg" 2>&1; then
		near_bound "least/least near the bound $n B=$b" "$o/near.$n$b.none.json" "$o/near.$n$b.least.json"
	else
		notok "least/least near the bound $n B=$b" "$lg"
	fi
done
# fits_budget DP BYTES JSON: DP compiles within BYTES (--stream none) and its plan's peak is at most BYTES
fits_budget() {
	"$DPC" --target cpu "$1" --device-mem "$2" --stream none --emit=schedule --schedule-json "$3" >/dev/null &&
		python3 - "$3" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
peak = d["peak_device_bytes"]["total"]
assert peak <= int(sys.argv[2]), (peak, sys.argv[2])
print(f"{peak} bytes within {sys.argv[2]}; {d['recomputed_flops']} FLOPs recomputed")
PY
}
# and on the networks of Feng & Huang's table that bench/graphs.sh plans (bench/graphs.py writes them at
# their sizes): long chains (ResNet-152), dense blocks, parallel branches and NASNet's and DARTS's cells, each
# min-memory's peak within 2 points of store-everything's above the bound (measured 2026-11-27: 0.09 to 1.77)
for spec in resnet152:16:224 densenet121:32:224 densenet201:16:224 inception_v3:32:299 nasnet:64:32 darts:64:32; do
	IFS=: read -r n b sz <<<"$spec"
	$sanitized && [ "$n" != resnet152 ] && break
	lg="$o/net.$n.log"
	if python3 bench/graphs.py "$n" "$b" "$sz" >"$o/net.$n.dp" 2>"$lg" &&
		"$DPC" --target cpu "$o/net.$n.dp" --checkpoint none --stream none --emit=schedule \
			--schedule-json "$o/net.$n.none.json" >>"$lg" 2>&1 &&
		"$DPC" --target cpu "$o/net.$n.dp" --checkpoint min-memory --stream none --emit=schedule \
			--schedule-json "$o/net.$n.least.json" -o "$o/net.$n.least.s" >>"$lg" 2>&1; then
		near_bound "least/least near the bound $n" "$o/net.$n.none.json" "$o/net.$n.least.json"
	else
		notok "least/least near the bound $n" "$lg"
	fi
	# on one thread the same plan: with two, the chain start that keeps the tiny values is improved beside the
	# evaluation of the one that does not, and stopped where that one is taken (all but Inception-v3 and DARTS
	# here), so both ways of it run
	[ -s "$o/net.$n.least.s" ] && check "least/least of $n on one thread: the same schedule" \
		eval '"$DPC" --target cpu "$o/net.$n.dp" --checkpoint min-memory --stream none --threads 1 --emit=schedule \
			-o "$o/net.$n.least1.s" >>"$lg" 2>&1 && cmp "$o/net.$n.least.s" "$o/net.$n.least1.s"'

	# budgets there compile and fit: a fit's choice the searches' quick packing puts over the budget is
	# packed harder on graphs this large and taken with that packing's gap to spare (Inception-v3 at 75%
	# failed without it: the final program packs differently from the checkpoint pass's)
	full=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_device_bytes']['total'])" \
		"$o/net.$n.none.json" 2>/dev/null)
	for pc in 75 50; do
		[ -n "$full" ] || break
		check "least/budget $pc% of $n: compiles, and its plan fits" fits_budget "$o/net.$n.dp" $((full * pc / 100)) \
			"$o/net.$n.$pc.json"
	done
	# a long chain at a budget one point past Feng & Huang's cut (81%: the weights, their gradients and 18% of
	# store-everything's other bytes): the chain planner's nested checkpoints, at most one forward recomputed
	# (issue 62; the 3-state selection alone recomputed 0.69 there)
	[ "$n" = resnet152 ] && [ -n "$full" ] &&
		check "least/chain $n at Feng & Huang's cut + 1: nested checkpoints, at most one forward recomputed" python3 - \
			"$DPC" "$o/net.$n.dp" "$o/net.$n.none.json" "$o/net.$n.cut.json" <<'PY'
import json, subprocess, sys
dpc, dp, none, out = sys.argv[1:]
p = json.load(open(none))["peak_device_bytes"]
w = p["params"] + p["grads"] + p["optimizer"]
budget = int(w + 0.18 * (p["total"] - w))
subprocess.run([dpc, "--target", "cpu", dp, "--device-mem", str(budget), "--stream", "none", "--emit=schedule",
                "-o", "/dev/null", "--schedule-json", out], check=True, stdout=subprocess.DEVNULL)
d = json.load(open(out))
assert d["peak_device_bytes"]["total"] <= budget, (d["peak_device_bytes"], budget)
assert d["straight_line"]["search"] == "chain", d["straight_line"]["search"]
assert d["recomputed_fraction"] <= 1.0, d["recomputed_fraction"]
print(f"{d['peak_device_bytes']['total']} bytes within {budget}, {d['recomputed_fraction']:.3f} of a forward again")
PY
done
# The chain planner's plans run (DPC_SELECT_CHAIN=1 takes its plan wherever it fits, not only where it
# recomputes less): a chain of 20 heterogeneous blocks at four budgets, two steps' gradients and parameters
# bitwise store-everything's, the measured peak the planned one within the budget, the FLOPs as planned. At 70%
# the chain plans only with a block held bare (its fallback where nothing else fits; before it, no chain plan)
c20=tests/least/chain20.dp
if "$DPC" --target cpu $c20 --stream none --schedule-json "$o/c20.none.json" -o "$o/c20.none" >"$o/c20.log" 2>&1 &&
	"$o/c20.none" --steps 2 --quiet --dump-grads "$o/c20.none.g" --save "$o/c20.none.p" >>"$o/c20.log" 2>&1; then
	full=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_device_bytes']['total'])" "$o/c20.none.json")
	for pc in 90 80 75 70; do
		b=$((full * pc / 100)) x="$o/c20.$pc"
		if DPC_SELECT_CHAIN=1 "$DPC" --target cpu $c20 --stream none --device-mem $b --schedule-json "$x.json" -o "$x" \
			>"$x.log" 2>&1 && "$x" --steps 2 --quiet --dump-grads "$x.g" --save "$x.p" --summary-json "$x.run.json" >>"$x.log" 2>&1 &&
			cmp "$o/c20.none.g" "$x.g" >>"$x.log" 2>&1 && cmp "$o/c20.none.p" "$x.p" >>"$x.log" 2>&1; then
			check "least/chain chain20 at $pc%: nested checkpoints bitwise as store-everything, peak and FLOPs as planned" \
				python3 - "$x.json" "$x.run.json" $b <<'PY'
import json, sys
plan, run, budget = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
peak = plan["peak_device_bytes"]["total"]
assert plan["straight_line"]["search"] == "chain", plan["straight_line"]["search"]
assert run["peak_device_bytes"] == run["predicted_device_bytes"] == peak <= budget, (run, peak, budget)
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"] > 0, (run["recomputed_flops"], plan["recomputed_flops"])
print(f"{peak} bytes within {budget}, {plan['recomputed_fraction']:.3f} of a forward again")
PY
		else
			notok "least/chain chain20 at $pc%: nested checkpoints bitwise as store-everything" "$x.log"
		fi
	done
else
	notok "least/chain chain20: store-everything compiles and runs" "$o/c20.log"
fi
# A search cut short says so (issue 62, item 4): on problems of over 1,200 values and positions the least search's
# walks take fewer moves in proportion and its second pass (packed harder) does not run. chain20 (1,199) is planned
# whole; the same chain of 24 blocks, written here, is cut, and its schedule names the size it was cut at
# chain_n N FILE: chain20's blocks repeated to N (block i with block i mod 20's widths)
chain_n() {
	python3 - "$c20" "$1" "$2" <<'PY'
import sys
lines, n = open(sys.argv[1]).read().splitlines(), int(sys.argv[2])
w_out, ret = lines.index("param W_out : f32[D, 1] = normal(0.1)"), lines.index("  return mse(h20 @ W_out, y)")
params = [l.replace(f"{c}{i % 20} ", f"{c}{i} ") for i in range(20, n) for c in "AC"
          for l in lines if l.startswith(f"param {c}{i % 20} ")]
blocks = [f"  let u{i} = tanh(h{i} @ A{i})\n  let h{i + 1} = h{i} + (relu(u{i}) * sigmoid(u{i})) @ C{i}" for i in range(20, n)]
out = lines[:w_out] + params + lines[w_out:ret] + blocks + [f"  return mse(h{n} @ W_out, y)"] + lines[ret + 1:]
open(sys.argv[3], "w").write("\n".join(out) + "\n")
PY
}
c24="$o/chain24.dp"
chain_n 24 "$c24"
for c in chain20 chain24; do
	f=$c20
	[ $c = chain24 ] && f=$c24
	"$DPC" --target cpu "$f" --checkpoint min-memory --stream none --emit=schedule -o "$o/cut.$c.txt" \
		--schedule-json "$o/cut.$c.json" >"$o/cut.$c.log" 2>&1
done
check "least/cut short: chain24's walks cut and said so, chain20's whole" python3 - "$o" <<'PY'
import json, sys
o = sys.argv[1]
d20, d24 = (json.load(open(f"{o}/cut.{c}.json")) for c in ("chain20", "chain24"))
t20, t24 = (open(f"{o}/cut.{c}.txt").read() for c in ("chain20", "chain24"))
assert d20["straight_line"]["walks_cut_at"] == 0 and "cut short" not in t20, d20["straight_line"]
cut = d24["straight_line"]["walks_cut_at"]
assert cut > 1200, d24["straight_line"]
assert f"its kicks a twentieth of their rounds, then 1200 of every {cut}" in t24 and "no plan goes below" in t24, t24
assert d24["peak_device_bytes"]["total"] >= d24["peak_lower_bound"] > 0, d24
print(f"chain24: cut at {cut} values and positions, {d24['peak_gap']:.3f} of its least above the bound")
PY
# min-memory takes the chain planner's least where it recomputes less at a peak at most a 256th higher (issue 62,
# item 3): chain20's blocks repeated to 54 (272 candidates, past the 256 where the least is a greedy search's). At
# 8a5e166 min-memory planned the selection's least there, 12,706,816 bytes at 114.2 forwards recomputed; the chain
# planner's least, its blocks held bare where nothing else fits, is 12,690,432 bytes at 2.21. Its plan runs: two
# steps' gradients and parameters bitwise store-everything's, the measured peak and FLOPs the planned ones
c54="$o/chain54.dp"
chain_n 54 "$c54"
if "$DPC" --target cpu "$c54" --stream none -o "$o/c54.none" >"$o/c54.log" 2>&1 &&
	"$o/c54.none" --steps 2 --quiet --dump-grads "$o/c54.none.g" --save "$o/c54.none.p" >>"$o/c54.log" 2>&1 &&
	"$DPC" --target cpu "$c54" --stream none --checkpoint min-memory --schedule-json "$o/c54.min.json" -o "$o/c54.min" \
		>>"$o/c54.log" 2>&1 &&
	"$o/c54.min" --steps 2 --quiet --dump-grads "$o/c54.min.g" --save "$o/c54.min.p" --summary-json "$o/c54.run.json" \
		>>"$o/c54.log" 2>&1 &&
	cmp "$o/c54.none.g" "$o/c54.min.g" >>"$o/c54.log" 2>&1 && cmp "$o/c54.none.p" "$o/c54.min.p" >>"$o/c54.log" 2>&1; then
	check "least/chain least: chain54 at min-memory plans the chain's least (2.2 forwards again, not 114), bitwise as store-everything, peak and FLOPs as planned" \
		python3 - "$o/c54.min.json" "$o/c54.run.json" <<'PY'
import json, sys
plan, run = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
peak = plan["peak_device_bytes"]["total"]
assert plan["straight_line"]["search"] == "chain", plan["straight_line"]["search"]
assert plan["recomputed_fraction"] < 4, plan["recomputed_fraction"]
assert run["peak_device_bytes"] == run["predicted_device_bytes"] == peak, (run, peak)
assert run["recomputed_flops"] == 2 * plan["recomputed_flops"] > 0, (run["recomputed_flops"], plan["recomputed_flops"])
print(f"{peak} bytes, {plan['recomputed_fraction']:.3f} of a forward again")
PY
else
	notok "least/chain least: chain54 at min-memory runs bitwise as store-everything" "$o/c54.log"
fi
# Against the MILP (issue 40): bench/milp.py's optima over dpc's own problem, solved once by HiGHS and
# committed (tests/least/milp/regen.sh makes them again). min-memory's peak is never below the least any
# schedule reaches (a proven bound: a plan below it would be the memory plan's error) and at most 1% above the
# least of dpc's three states per value; a budget's fit stays within it and never recomputes fewer FLOPs than
# the fewest any schedule needs (how far above is printed: issue 40, item 3), and a budget no schedule fits
# is refused. The FLOPs' bound dpc prints, at a budget and at the least, is at or below the MILP's fewest.
for dp in $(python3 -c "import json,sys; print(' '.join(sorted(json.load(open(sys.argv[1])))))" tests/least/milp/expected.json); do
	$sanitized && break
	n=$(echo "$dp" | tr / _)
	if "$DPC" --target cpu "$dp" --checkpoint min-memory --stream none --schedule-json "$o/milp.$n.json" -o /dev/null \
		>"$o/milp.$n.log" 2>&1; then
		check "least/milp $dp: min-memory at the MILP's least, within 1%; its FLOPs within 10% of the MILP's fewest there, their bound at or below" python3 - "$dp" "$o/milp.$n.json" <<'PY'
import json, sys
want = json.load(open("tests/least/milp/expected.json"))[sys.argv[1]]
d = json.load(open(sys.argv[2]))
peak, flops, fb = d["peak_device_bytes"]["total"], d["recomputed_flops"], d["straight_line"].get("flops_bound")
lo, hi = want["least_any"], want["least_states"]
assert lo <= peak <= hi * 1.01, (peak, lo, hi)
# at the least of dpc's states, the FLOPs' printed bound is a bound: at or below the fewest any schedule needs;
# and dpc's FLOPs there within 10% of the fewest over its states (issue 40, item 3; 2026-11-28: within 5%)
assert peak != hi or fb is None or fb <= want["least_flops_any"], (fb, want)
assert peak != hi or flops <= 1.10 * want["least_flops_states"], (flops, want)
print(f"least {peak} bytes; the MILP's {hi} (three states), {lo} (any schedule): {100 * (peak / hi - 1):+.2f}%; "
      f"{flops} FLOPs recomputed, bound {fb}; the MILP's fewest there {want['least_flops_states']} (three states), "
      f"{want['least_flops_any']} (any schedule)")
PY
	else
		notok "least/milp $dp: min-memory" "$o/milp.$n.log"
	fi
	for b in $(python3 -c "import json,sys; print(' '.join(json.load(open(sys.argv[1]))[sys.argv[2]]['budgets']))" \
		tests/least/milp/expected.json "$dp"); do
		if [ "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]['budgets'][sys.argv[3]].get('flops_any', 0))" \
			tests/least/milp/expected.json "$dp" "$b")" = None ]; then
			expect "least/milp $dp: $b bytes, below the MILP's least, refused" 1 "more than --device-mem" \
				"$DPC" --target cpu "$dp" --checkpoint auto --stream none --device-mem "$b" -o /dev/null
		elif "$DPC" --target cpu "$dp" --checkpoint auto --stream none --device-mem "$b" --schedule-json "$o/milp.$n.$b.json" \
			-o /dev/null >"$o/milp.$n.$b.log" 2>&1; then
			# every fit at the MILP's optimum over dpc's three states (2026-11-29: the fit's drop and refill
			# reached the last three, the DenseNet sample at 50%, 60% and 75%); where HiGHS ran out of time (the
			# Inception sample at 50%), at or below what it found
			what="at the MILP's fewest FLOPs over dpc's states"
			python3 -c "import json,sys; sys.exit('flops_states' in json.load(open(sys.argv[1]))[sys.argv[2]]['budgets'][sys.argv[3]])" \
				tests/least/milp/expected.json "$dp" "$b" && what="at or below the FLOPs HiGHS found in its time"
			check "least/milp $dp: within $b bytes, $what, no fewer than any schedule's fewest, its printed bound no more" \
				python3 - "$dp" "$b" "$o/milp.$n.$b.json" <<'PY'
import json, sys
want = json.load(open("tests/least/milp/expected.json"))[sys.argv[1]]["budgets"][sys.argv[2]]
d = json.load(open(sys.argv[3]))
peak, flops, budget = d["peak_device_bytes"]["total"], d["recomputed_flops"], int(sys.argv[2])
fb = d["straight_line"].get("flops_bound")
# where HiGHS stopped at its time limit, its bound over any schedule bounds the FLOPs, and what it found over
# dpc's states bounds the printed bound and what dpc must reach
least = want["flops_any"] if "flops_any" in want else want["flops_any_bound"]
found = want.get("flops_any", want.get("flops_any_found"))
assert peak <= budget and flops >= least, (peak, budget, flops, want)
assert fb is None or found is None or fb <= found, (fb, want)  # the printed bound is one
assert flops <= want.get("flops_states", want.get("flops_states_found")), (flops, want)
print(f"peak {peak}, {flops} FLOPs recomputed, bound {fb}; the MILP's fewest "
      f"{want.get('flops_states', want.get('flops_states_found'))} (three states), {found} (any schedule)")
PY
		else
			notok "least/milp $dp: within $b bytes" "$o/milp.$n.$b.log"
		fi
	done
done
cat >"$o/one_op.dp" <<'DP'
input x : f32[1024, 256]
param w : f32[1] = ones
loss { return sum(sum(x * w, 1)) }
DP
bound_check one_op "$o/one_op.dp"
check "least/peak bound: tight where one op's working set is the peak" python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
peak, b = d['peak_device_bytes']['total'], d['peak_lower_bound']
assert b <= peak <= b + 4096, (peak, b)
print(peak, b)" "$o/bound.one_op.json"
finish
