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
# the fewest FLOPs recomputed (null where no plan fits). Writes expected.json
# beside this script.
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
for dp in "${graphs[@]}"; do
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
done
"$PYTHON" - "$out" "$here/expected.json" "${graphs[@]}" <<'PY'
import json, os, sys
out, dest, graphs = sys.argv[1], sys.argv[2], sys.argv[3:]
res = {}
for dp in graphs:
    name = dp.replace("/", "_")
    full = json.load(open(f"{out}/{name}.none.json"))["peak_device_bytes"]["total"]
    r = {"store_everything": full}
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
