"""The least recomputation a checkpoint schedule of one loop can reach in a
given memory when snapshots and tape rows share that memory as they please
(a row may use what a snapshot frees later, and the reverse), among
schedules of the recursive kind that optimal reversal schedules take. dpc's
--checkpoint auto keeps s snapshot slots and k rows apart; this bound says
how far that is from the best a pooled schedule could do.

    python3 bench/bound.py -n 1024 --units 24 --row 2

Memory is counted in units of one snapshot (the loop's state); a taped step
keeps `--row` units. The model, by dynamic programming over (steps, units):
reversing n steps from a held state with m units free costs n forward steps
if the n steps fit a tape (row n <= m), else the least over j of
  j + R(n - j, m - 1) + R(j, m)   (advance j, keep a snapshot, recurse), and
  n + R(j, m) where row (n - j) <= m   (advance j, tape the rest at once).
The loss's forward sweep is free: its first descent costs nothing beyond
the n steps it runs anyway. Prints the recomputed steps (forward steps
beyond the first n) and the step's cost against store-everything, counting
a forward step as 1 and its adjoint as 2, as bench/RESULTS.md does.
"""
import argparse

import numpy as np


def bound(n, units, row):
    inf = np.iinfo(np.int64).max // 4
    js = np.arange(n + 1)
    R = [None] * (units + 1)  # reversals from a held state
    T = [None] * (units + 1)  # the same, the first descent free
    for m in range(units + 1):
        r = np.full(n + 1, inf, dtype=np.int64)
        t = np.full(n + 1, inf, dtype=np.int64)
        r[0] = t[0] = 0
        for k in range(1, n + 1):
            if row * k <= m:
                r[k] = t[k] = k
                continue
            j = js[1:k]
            best = besf = inf
            if m >= 1 and k > 1:
                best = (j + R[m - 1][k - j] + r[j]).min()
                besf = (j + T[m - 1][k - j] + r[j]).min()
            tail = j[row * (k - j) <= m]
            if len(tail):
                c = (k + r[tail]).min()
                best, besf = min(best, c), min(besf, c)
            r[k], t[k] = best, besf
        R[m], T[m] = r, t
    return int(T[units][n]) - n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=1024, help="steps of the loop")
    ap.add_argument("--units", type=int, nargs="+", default=[24], help="memory in snapshots")
    ap.add_argument("--row", type=float, default=2.0, help="a taped step's bytes, in snapshots")
    a = ap.parse_args()
    for m in a.units:
        rec = bound(a.n, m, a.row)
        print(f"n {a.n}, {m} units, rows of {a.row:g}: at least {rec} recomputed steps, "
              f"{(3 * a.n + rec) / (3 * a.n):.3f}x store-everything")


if __name__ == "__main__":
    main()
