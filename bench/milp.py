#!/usr/bin/env python3
"""The least device peak of a straight-line program, and the fewest FLOPs
under a budget, as a mixed-integer program over dpc's own selection problem
(issue 40), solved with HiGHS.

  DPC_SELECT_DUMP=p.json dpc model.dp --checkpoint min-memory --stream none --schedule-json s.json
  python3 bench/milp.py p.json [--schedule s.json] [--states] [--full BYTES --budget-fraction 0.6 ...]

The problem (written by compiler/checkpoint_pass/graph.c) lists each value
the choice decides (bytes, FLOPs, operands among them, the operands an
elementwise value may take the storage of, definition, last forward use,
adjoint uses) and, per position (a top-level op of the training step,
forward then adjoint), the bytes no choice changes: the fixed values held
across its op and into it, and the op's own working set.

The program is Checkmate's (Jain et al., MLSys 2020) on dpc's fixed
order of ops: for each value v and position t,
  A[t,v]  v is in device memory at t (binary),
  R[t,v]  v is computed again at t, before the op there (binary; only in
          the adjoint part, and only where the adjoint op there or a user
          computed again there needs it),
  Y[t,v]  v is held across the op at t,
with
  A[t,v] = 1 from v's definition to its last forward use and at each of its
          adjoint uses,
  A[t,v] <= A[t-1,v] + R[t,v]       (held from before, or made at t),
  R[t,v] <= A[t,u] for each operand u that is decided (the others are always there),
  Y[t,v] >= A[t,v] + A[t+1,v] - R[t+1,v] - 1,
  M >= fixed + held[t] + ws[t] + sum over v not named by op t of bytes[v] Y[t,v]   (while the op runs),
and while each copy k at t is made, in the forward's order as dpc's
rewrite makes them,
  M >= fixed + into[t] + bytes[k] R[t,k] + sum over w of bytes[w] L[t,k,w],
  L[t,k,w] >= (w present: held into t, or made at t before k)
              + (w still needed: read by k or a later copy at t, by the op
                 at t, or held past t) - 1,
where a copy that may take an elementwise operand's storage does not count
that operand as read by it. These are the two moments dpc's cost model and
memory plan count (compiler/select/select.h), so on a choice of dpc's the
program's M is the bytes the plan's tensors hold at once: the problem's
optimum is a lower bound on every plan's peak without offloading (the plan
adds its packing's gaps), and the fewest FLOPs under a budget a lower bound
on what any plan within that budget recomputes.

--states restricts it to dpc's own choices (select.h): each value kept
(never made again), made once (at most one copy, freed after its last
forward use until then), or made at each position that needs it and held
there only. Its optimum is then a choice dpc can plan: --choice FILE writes
it (the least, and FILE.BUDGET for each budget) as DPC_SELECT_CHOICE=FILE
makes dpc plan it in place of its own search's, and --fix FILE solves with
the states fixed as FILE says (DPC_SELECT_DUMP writes dpc's own least as
p.json.choice).

--lp solves the LP relaxation instead (every binary in [0, 1]): its
optimum is a lower bound on the program's, what a bound from the linear
relaxation alone (no cuts, no branching) reaches.

Prints the optimum or HiGHS's bounds at the time limit, dpc's least peak
and bound beside it (from --schedule), and with --budget-fraction the
fewest FLOPs under each budget (a fraction of store-everything's peak,
--full, in bytes).
"""
import argparse
import json
import os
import sys
import time

try:
    import highspy
except ImportError:
    sys.exit("milp.py: highspy is missing (pip install -r bench/requirements-milp.txt)")


def load(path):
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"milp.py: {path}: {e}")
    for key in ("npos", "nforward", "fixed", "positions", "values"):
        if key not in d:
            sys.exit(f"milp.py: {path}: no \"{key}\" (not a problem DPC_SELECT_DUMP wrote)")
    if d.get("loops"):
        sys.exit(f"milp.py: {path}: the program has loops at its top level; their insides are not in this program")
    return d


class Model:
    """the variables and rows of the program on problem d"""

    def __init__(self, d, states=False):
        self.d = d
        self.h = highspy.Highs()
        self.h.setOptionValue("output_flag", False)
        self.inf = highspy.kHighsInf
        self.ncol = 0
        self.lower, self.upper, self.integer = [], [], []
        self.relax = False  # --lp: every binary in [0, 1]
        self.rows = []  # (lower, upper, {col: coef})
        vals = {v["id"]: v for v in d["values"]}
        self.vals = vals
        npos, nfwd = d["npos"], d["nforward"]
        users = {v: [] for v in vals}
        for v in vals.values():
            for u in v["in"]:
                if u in users:
                    users[u].append(v["id"])
        # the last position where v may be needed: its own last use, or a user's
        last = {}
        for vid in sorted(vals, reverse=True):
            v = vals[vid]
            own = max([v["fwd_last"], v["def"]] + v["adj"])
            last[vid] = max([own] + [last[w] for w in users[vid]])
        self.last = last
        self.A, self.R, self.Y = {}, {}, {}
        for vid, v in vals.items():
            d0, fl = v["def"], max(v["fwd_last"], v["def"])
            uses = set(v["adj"])
            for t in range(fl + 1, last[vid] + 1):
                need = t in uses
                self.A[t, vid] = self.col(1 if need else 0, 1, True)
                if t >= nfwd:
                    self.R[t, vid] = self.col(0, 1, True)
            for t in range(d0, last[vid]):
                self.Y[t, vid] = self.col(0, 1, False)
        # held from before, or made at t
        for (t, vid), a in self.A.items():
            prev = self.A.get((t - 1, vid))
            row = {a: 1.0}
            if prev is not None:
                row[prev] = -1.0
            r = self.R.get((t, vid))
            if r is not None:
                row[r] = row.get(r, 0) - 1.0
            # A[t] - A[t-1] - R[t] <= 0 (A[t-1] is 1 where it is no variable: its forward life)
            self.rows.append((-self.inf, 0.0 if prev is not None or t - 1 > vals[vid]["fwd_last"] else 1.0, row))
        # a recomputation reads its operands at t
        for (t, vid), r in self.R.items():
            for u in vals[vid]["in"]:
                if u not in vals:
                    continue
                a = self.A.get((t, u))
                if a is None:
                    if t <= max(vals[u]["fwd_last"], vals[u]["def"]):
                        continue  # in memory through its forward life
                    self.rows.append((-self.inf, 0.0, {r: 1.0}))  # past u's last need: never
                    continue
                self.rows.append((-self.inf, 0.0, {r: 1.0, a: -1.0}))
        # held across op t
        for (t, vid), y in self.Y.items():
            a0 = self.A.get((t, vid))
            a1 = self.A.get((t + 1, vid))
            r1 = self.R.get((t + 1, vid))
            fl = max(vals[vid]["fwd_last"], vals[vid]["def"])
            const = (1 if a0 is None and t <= fl else 0) + (1 if a1 is None and t + 1 <= fl else 0) - 1
            row = {y: 1.0}
            if a0 is not None:
                row[a0] = -1.0
            if a1 is not None:
                row[a1] = row.get(a1, 0) - 1.0
            if r1 is not None:
                row[r1] = row.get(r1, 0) + 1.0
            # Y - A[t] - A[t+1] + R[t+1] >= const
            self.rows.append((float(const), self.inf, row))
        # the peak
        self.M = self.col(0, self.inf, False)
        self.users = users
        # made again only where something needs it: an adjoint op there, or a user made again there
        for (t, vid), r in self.R.items():
            row = {r: 1.0}
            for l in users[vid]:
                if (t, l) in self.R:
                    row[self.R[t, l]] = -1.0
            self.rows.append((-self.inf, 1.0 if t in vals[vid]["adj"] else 0.0, row))
        self.state = {}
        if states:
            self.three_states()
        self.copies(d)
        self.mem_rows = []
        pos = d["positions"]
        for t in range(npos):
            named = set(pos[t]["named"])
            row = {self.M: 1.0}
            for vid in vals:
                y = self.Y.get((t, vid))
                if y is not None and vid not in named:
                    row[y] = -float(vals[vid]["bytes"])
            floor = float(d["fixed"] + pos[t]["held"] + pos[t]["ws"])
            self.mem_rows.append(len(self.rows))
            self.rows.append((floor, self.inf, row))

    def a(self, t, vid):
        """A[t,v]: a column, or the constant 1 (its forward life) or 0 (before it, after its last need)"""
        c = self.A.get((t, vid))
        if c is not None:
            return c
        v = self.vals[vid]
        return 1 if v["def"] <= t <= max(v["fwd_last"], v["def"]) else 0

    def at_least(self, col, plus, minus, const):
        """col >= sum(plus) - sum(minus) + const; a term is a column (int) or a constant (float)"""
        row = {col: 1.0}
        for x, sign in [(x, -1.0) for x in plus] + [(x, 1.0) for x in minus]:
            if isinstance(x, float):
                const -= sign * x
            else:
                row[x] = row.get(x, 0) + sign
        self.rows.append((float(const), self.inf, row))

    def three_states(self):
        """dpc's own choices (select.h): each value kept (never made again), made once (at most one copy),
        or made at each position that needs it and held there only"""
        nf = self.d["nforward"]
        spans = {}
        for (t, vid) in self.R:
            spans.setdefault(vid, []).append(t)
        for vid, ts in spans.items():
            keep, once, each = (self.col(0, 1, True) for _ in range(3))
            self.state[vid] = (keep, once, each)
            self.rows.append((1.0, 1.0, {keep: 1.0, once: 1.0, each: 1.0}))
            row = {self.R[t, vid]: 1.0 for t in ts}
            row[once] = -1.0
            row[each] = -float(len(ts))
            self.rows.append((-self.inf, 0.0, row))
            # not kept: freed after its last forward use, as dpc's plans free it
            fl = max(self.vals[vid]["fwd_last"], self.vals[vid]["def"])
            if (fl + 1, vid) in self.A:
                self.rows.append((-self.inf, 0.0, {self.A[fl + 1, vid]: 1.0, keep: -1.0}
                                  | ({self.R[fl + 1, vid]: -1.0} if (fl + 1, vid) in self.R else {})))
            for t in ts:
                a = self.A.get((t, vid))
                if a is not None and t >= nf:
                    # each: A[t] <= R[t] + 1 - each
                    self.rows.append((-self.inf, 1.0, {a: 1.0, self.R[t, vid]: -1.0, each: 1.0}))

    def write_choice(self, path):
        """the last solution's states, as DPC_SELECT_CHOICE reads them (0 once, 1 keep, 2 each)"""
        x = self.h.getSolution().col_value
        with open(path + ".tmp", "w") as f:
            for vid, (keep, once, each) in sorted(self.state.items()):
                f.write(f"{vid} {1 if x[keep] > 0.5 else 2 if x[each] > 0.5 else 0}\n")
        os.replace(path + ".tmp", path)

    def pres(self, t, vid):
        """A[t,v] as a column, or the constant 1.0 or 0.0 (a float, never taken for a column)"""
        c = self.A.get((t, vid))
        return c if c is not None else float(self.a(t, vid))

    def copies(self, d):
        """While each copy at t is made (in the forward's order, as the rewrite makes them): the fixed values
        held into t, the copy itself, and every value present then (held into t, or a copy made before it
        there) that is still needed: read by this copy or a later one there, by the op at t, or held past
        t. An elementwise copy may take an operand's storage (share): that operand counts only where it is
        needed after the copy, as dpc's model and memory plan count it."""
        vals, pos = self.vals, d["positions"]
        made = {}
        for (t, vid) in self.R:
            made.setdefault(t, []).append(vid)
        for t, vids in made.items():
            vids.sort()
            here = set(vids)
            named = set(pos[t]["named"])
            alive = [w for w in vals if vals[w]["def"] < t <= self.last[w]]
            cache = {}
            agg_terms = {}
            for k in vids:
                row = {self.M: 1.0, self.R[t, k]: -float(vals[k]["bytes"])}
                shared = [u for u in vals[k].get("share", []) if vals[k]["in"].count(u) == 1]
                for w in alive:
                    if w == k:
                        continue
                    later = tuple(l for l in self.users[w] if l in here and (l > k or (l == k and w not in shared)))
                    before = not (w in here and w > k)
                    key = (w, later, before)
                    if key not in cache:
                        cache[key] = self.holds(t, w, later, before, w in named)
                    L = cache[key]
                    if L is None:
                        continue
                    if w not in here and not any(l in here for l in self.users[w]):
                        agg_terms[w] = L  # the same at every copy here: summed once
                        continue
                    row[L] = row.get(L, 0) - float(vals[w]["bytes"])
                if agg_terms:
                    if "S" not in cache:
                        S = self.col(0, self.inf, False)
                        cache["S"] = S
                    row[cache["S"]] = row.get(cache["S"], 0) - 1.0
                self.rows.append((float(d["fixed"] + pos[t]["into"]), self.inf, row))
            if "S" in cache:
                # S >= the bytes of the values held through every copy here
                row = {cache["S"]: 1.0}
                for w, L in agg_terms.items():
                    row[L] = row.get(L, 0) - float(vals[w]["bytes"])
                self.rows.append((0.0, self.inf, row))

    def holds(self, t, w, later, before, op_reads):
        """a column that is 1 where w is present (held into t, or made at t already if before) and needed
        (made again later at t by a user in later, read by the op at t, or held past t); None: never"""
        a = self.pres(t, w)
        r = self.R.get((t, w))
        presence = [a]
        minus = [] if before or r is None else [r]
        if a == 0.0:
            return None
        needs = [([self.R[t, l]], []) for l in later]
        if op_reads:
            needs.append(([1.0], []))
        if t + 1 <= self.last[w]:
            a1, r1 = self.pres(t + 1, w), self.R.get((t + 1, w))
            if a1 != 0.0:
                needs.append(([a1], [r1] if r1 is not None else []))
        if not needs:
            return None
        L = self.col(0, 1, False)
        for plus, neg in needs:
            self.at_least(L, presence + plus, minus + neg, -1.0)
        return L

    def col(self, lo, hi, integer):
        self.lower.append(float(lo))
        self.upper.append(float(hi))
        self.integer.append(integer)
        self.ncol += 1
        return self.ncol - 1

    def build(self, cost):
        h = self.h
        h.clearModel()
        lp = highspy.HighsLp()
        lp.num_col_ = self.ncol
        lp.num_row_ = len(self.rows)
        lp.col_cost_ = [float(cost.get(j, 0.0)) for j in range(self.ncol)]
        lp.col_lower_ = self.lower
        lp.col_upper_ = self.upper
        lp.row_lower_ = [r[0] for r in self.rows]
        lp.row_upper_ = [r[1] for r in self.rows]
        starts, index, value = [], [], []
        cols = [[] for _ in range(self.ncol)]
        for i, (_, _, row) in enumerate(self.rows):
            for j, c in row.items():
                cols[j].append((i, c))
        for j in range(self.ncol):
            starts.append(len(index))
            for i, c in cols[j]:
                index.append(i)
                value.append(c)
        starts.append(len(index))
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = starts
        lp.a_matrix_.index_ = index
        lp.a_matrix_.value_ = value
        lp.integrality_ = [highspy.HighsVarType.kInteger if x and not self.relax else highspy.HighsVarType.kContinuous
                           for x in self.integer]
        h.passModel(lp)

    def solve(self, limit):
        h = self.h
        h.setOptionValue("time_limit", float(limit))
        h.setOptionValue("mip_rel_gap", 1e-4)
        t0 = time.time()
        h.run()
        info = h.getInfo()
        status = h.modelStatusToString(h.getModelStatus())
        return {
            "status": status,
            "objective": info.objective_function_value,
            "bound": info.objective_function_value if self.relax else info.mip_dual_bound,
            "gap": 0.0 if self.relax else info.mip_gap,
            "seconds": round(time.time() - t0, 1),
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("problem", help="the JSON that DPC_SELECT_DUMP wrote")
    ap.add_argument("--schedule", help="dpc's --schedule-json of the same compile: its least peak and bound beside")
    ap.add_argument("--full", type=int, help="store-everything's peak in bytes (for --budget-fraction)")
    ap.add_argument("--budget-fraction", type=float, action="append", default=[],
                    help="the fewest FLOPs within this fraction of --full (repeatable)")
    ap.add_argument("--budget", type=int, action="append", default=[],
                    help="the fewest FLOPs within this many bytes (repeatable)")
    ap.add_argument("--no-least", action="store_true", help="only the budgets' FLOPs, not the least peak")
    ap.add_argument("--time", type=float, default=60, help="HiGHS's time limit per solve, seconds (default 60)")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--states", action="store_true",
                    help="dpc's own three states per value (kept, made once, made each time) instead of any schedule")
    ap.add_argument("--choice", help="write the least peak's choice here (with --states), as DPC_SELECT_CHOICE reads it")
    ap.add_argument("--lp", action="store_true",
                    help="solve the LP relaxation (every binary in [0, 1]): a lower bound on the optimum")
    ap.add_argument("--fix", help="(with --states) each value's state fixed as this file says (DPC_SELECT_CHOICE's form)")
    a = ap.parse_args()
    d = load(a.problem)
    m = Model(d, a.states)
    m.relax = a.lp
    out = {"values": len(m.vals), "positions": d["npos"], "binaries": sum(m.integer), "columns": m.ncol,
           "rows": len(m.rows)}
    print(f"{a.problem}: {out['values']} values over {out['positions']} positions; {out['binaries']} binaries, "
          f"{out['columns']} columns, {out['rows']} rows")
    if a.fix:
        if not a.states:
            sys.exit("milp.py: --fix needs --states (a choice is one of dpc's three states per value)")
        for line in open(a.fix):
            vid, st = (int(x) for x in line.split())
            if vid in m.state:
                for j, c in enumerate(m.state[vid]):
                    m.lower[c] = m.upper[c] = 1.0 if j == [1, 0, 2][st] else 0.0
    if not a.no_least:
        m.build({m.M: 1.0})
        least = m.solve(a.time)
        out["least"] = least
        print(f"least peak: {least['status']} after {least['seconds']} s; best found {least['objective']:.0f} bytes, "
              f"no plan below {least['bound']:.0f} bytes (gap {100 * least['gap']:.2f}%)")
    if a.choice and not a.no_least:
        if not a.states:
            sys.exit("milp.py: --choice needs --states (a choice is one of dpc's three states per value)")
        m.write_choice(a.choice)
    if a.schedule and not a.no_least:
        s = json.load(open(a.schedule))
        dpc, bound = s["peak_device_bytes"]["total"], s["peak_lower_bound"]
        out["dpc"] = {"least": dpc, "peak_lower_bound": bound}
        print(f"dpc: least {dpc} bytes ({100 * (dpc / least['bound'] - 1):+.2f}% of the program's bound), "
              f"its own bound {bound} ({100 * (bound / least['bound'] - 1):+.2f}%)")
    if a.budget_fraction and not a.full:
        sys.exit("milp.py: --budget-fraction needs --full (store-everything's peak)")
    for frac, budget in [(f, int(a.full * f)) for f in a.budget_fraction] + [(None, b) for b in a.budget]:
        cost = {r: float(m.vals[vid]["flops"]) for (t, vid), r in m.R.items()}
        m.upper[m.M] = float(budget)
        m.build(cost)
        r = m.solve(a.time)
        m.upper[m.M] = m.inf
        out.setdefault("budgets", []).append({"fraction": frac, "budget": budget, **r})
        if a.choice and r["status"] == "Optimal":
            m.write_choice(f"{a.choice}.{budget}")
        within = f"within {frac:g} of store-everything ({budget} bytes)" if frac else f"within {budget} bytes"
        if r["status"] == "Infeasible":
            print(f"{within}: no plan")
        else:
            print(f"{within}: {r['status']} after {r['seconds']} s; "
                  f"best found {r['objective']:.0f} FLOPs recomputed, no plan fewer than {r['bound']:.0f}")
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
