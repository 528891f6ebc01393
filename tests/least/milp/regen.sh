#!/usr/bin/env bash
# tests/least/milp/regen.sh: the optima that tests/least/run.sh checks dpc's
# least peaks and fits against (issue 40), solved again by bench/milp.py
# with HiGHS (pip install -r bench/requirements-milp.txt; make test needs
# neither). For each graph here and samples/unet.dp, densenet.dp and
# inception.dp at their default sizes: store-everything's peak, the problem
# dpc's least search states (DPC_SELECT_DUMP), and the MILP's optima over
# it, over any schedule
# on dpc's order of ops (a bound no plan goes below) and over dpc's own three
# states per value: the least peak, and at 60% and 75% of store-everything
# the fewest FLOPs recomputed (null where no plan fits), and at the least peak
# of dpc's three states the fewest FLOPs (least_flops_any, least_flops_states:
# what min-memory's FLOPs' bound must not pass). Writes expected.json beside
# this script. LEAST_FLOPS_ONLY=1 solves only the last two again, at the least
# peaks expected.json holds, and adds them to it. MORE_FRACTIONS="0.3 0.5"
# solves only the fewest FLOPs at those fractions of the store-everything
# peak expected.json holds, and adds them to it; a solve that HiGHS stops at
# its time limit (TIME seconds each, default 300) is kept as what it found
# and its bound (flops_MODE_found, flops_MODE_bound), not as an optimum.
#   PYTHON=/path/to/venv/bin/python bash tests/least/milp/regen.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
DPC=${DPC:-bin/dpc}
PYTHON=${PYTHON:-python3}
[ -x "$DPC" ] || make -s bin/dpc
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
graphs=(tests/least/milp/unet.dp tests/least/milp/densenet.dp tests/least/milp/inception.dp samples/unet.dp
	samples/densenet.dp samples/inception.dp)
# the fewest FLOPs at the least peak: GRAPH's problem dumped to $out/NAME.problem.json, the least in bytes
least_flops() {
	for mode in any states; do
		flag=()
		[ $mode = states ] && flag=(--states)
		"$PYTHON" bench/milp.py "$out/$1.problem.json" "${flag[@]}" --no-least --budget "$2" --time 1200 \
			--json "$out/$1.$mode.atleast.json"
	done
}
if [ -n "${MORE_FRACTIONS:-}" ]; then
	fractions=()
	for x in $MORE_FRACTIONS; do
		fractions+=(--budget-fraction "$x")
	done
	for dp in "${graphs[@]}"; do
		name=$(echo "$dp" | tr / _)
		full=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]['store_everything'])" \
			"$here/expected.json" "$dp")
		DPC_SELECT_DUMP="$out/$name.problem.json" "$DPC" --target cpu "$dp" --checkpoint min-memory --stream none -o /dev/null
		for mode in any states; do
			flag=()
			[ $mode = states ] && flag=(--states)
			"$PYTHON" bench/milp.py "$out/$name.problem.json" "${flag[@]}" --no-least --full "$full" "${fractions[@]}" \
				--time "${TIME:-300}" --json "$out/$name.$mode.more.json"
		done
	done
	"$PYTHON" - "$out" "$here/expected.json" "${graphs[@]}" <<'PY'
import json, math, os, sys
out, dest, graphs = sys.argv[1], sys.argv[2], sys.argv[3:]
res = json.load(open(dest))
for dp in graphs:
    name = dp.replace("/", "_")
    for mode in ("any", "states"):
        for b in json.load(open(f"{out}/{name}.{mode}.more.json"))["budgets"]:
            e = res[dp].setdefault("budgets", {}).setdefault(str(b["budget"]), {"fraction": b["fraction"]})
            for k in (f"flops_{mode}", f"flops_{mode}_found", f"flops_{mode}_bound"):
                e.pop(k, None)
            if b["status"] == "Optimal":
                e[f"flops_{mode}"] = round(b["objective"])
            elif b["status"] == "Infeasible":
                e[f"flops_{mode}"] = None  # no plan fits: dpc must refuse the budget
            else:
                if b["objective"] is not None and math.isfinite(b["objective"]):
                    e[f"flops_{mode}_found"] = round(b["objective"])
                e[f"flops_{mode}_bound"] = math.ceil(b["bound"] - 1e-6)
with open(dest + ".tmp", "w") as f:
    json.dump(res, f, indent=1, sort_keys=True)
    f.write("\n")
os.replace(dest + ".tmp", dest)
PY
	exit 0
fi
if [ "${LEAST_FLOPS_ONLY:-0}" = 1 ]; then
	for dp in "${graphs[@]}"; do
		name=$(echo "$dp" | tr / _)
		DPC_SELECT_DUMP="$out/$name.problem.json" "$DPC" --target cpu "$dp" --checkpoint min-memory --stream none -o /dev/null
		least_flops "$name" "$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]['least_states'])" \
			"$here/expected.json" "$dp")"
	done
fi
for dp in "${graphs[@]}"; do
	[ "${LEAST_FLOPS_ONLY:-0}" = 1 ] && break
	name=$(echo "$dp" | tr / _)
	"$DPC" --target cpu "$dp" --checkpoint none --stream none --schedule-json "$out/$name.none.json" -o /dev/null
	full=$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_device_bytes']['total'])" "$out/$name.none.json")
	DPC_SELECT_DUMP="$out/$name.problem.json" "$DPC" --target cpu "$dp" --checkpoint min-memory --stream none -o /dev/null
	for mode in any states; do
		flag=()
		[ $mode = states ] && flag=(--states)
		"$PYTHON" bench/milp.py "$out/$name.problem.json" "${flag[@]}" --full "$full" --budget-fraction 0.6 \
			--budget-fraction 0.75 --time 1200 --json "$out/$name.$mode.json"
	done
	least_flops "$name" "$("$PYTHON" -c "import json,sys; print(round(json.load(open(sys.argv[1]))['least']['objective']))" \
		"$out/$name.states.json")"
done
"$PYTHON" - "$out" "$here/expected.json" "${LEAST_FLOPS_ONLY:-0}" "${graphs[@]}" <<'PY'
import json, os, sys
out, dest, only, graphs = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4:]
res = json.load(open(dest)) if only else {}
for dp in graphs:
    name = dp.replace("/", "_")
    for mode in ("any", "states"):
        (b,) = json.load(open(f"{out}/{name}.{mode}.atleast.json"))["budgets"]
        if b["status"] != "Optimal":
            sys.exit(f"regen.sh: {dp} ({mode}) at its least: HiGHS stopped with '{b['status']}', not an optimum")
        res.setdefault(dp, {})[f"least_flops_{mode}"] = round(b["objective"])
    if only:
        continue
    full = json.load(open(f"{out}/{name}.none.json"))["peak_device_bytes"]["total"]
    r = res.setdefault(dp, {})
    r["store_everything"] = full
    for mode in ("any", "states"):
        m = json.load(open(f"{out}/{name}.{mode}.json"))
        for x in [m["least"]] + m["budgets"]:
            if x["status"] not in ("Optimal", "Infeasible") or (x is m["least"] and x["status"] != "Optimal"):
                sys.exit(f"regen.sh: {dp} ({mode}): HiGHS stopped with '{x['status']}', not an optimum")
        r[f"least_{mode}"] = round(m["least"]["objective"])
        for b in m["budgets"]:
            # null: no plan fits (dpc must refuse the budget)
            r.setdefault("budgets", {}).setdefault(str(b["budget"]), {"fraction": b["fraction"]})[f"flops_{mode}"] = \
                round(b["objective"]) if b["status"] == "Optimal" else None
    res[dp] = r
with open(dest + ".tmp", "w") as f:
    json.dump(res, f, indent=1, sort_keys=True)
    f.write("\n")
os.replace(dest + ".tmp", dest)
print(json.dumps(res, indent=1, sort_keys=True))
PY
