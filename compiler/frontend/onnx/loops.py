"""Loops recovered from an unrolled ONNX graph.

ONNX writes every layer out. Consecutive blocks of nodes with the same ops,
attributes and initializer shapes, each reading the one before it (a
transformer's layers, a ResNet stage's blocks), are one loop over stacked
parameters in dp, where binomial checkpointing and streaming apply.

find(nodes, inits, params, outputs) returns the loops (inits: every value
known before the run, initializers and folded constants, by name; params:
the names of those that train), each a Loop: the nodes
[start, start + period * count), and for block 0's node i and input j what
it is in every block: a value of the same block (internal), the value the
block before made (carried), a value from before the loop (invariant), or
one initializer a block (stacked).
"""
import hashlib

import numpy as np
import onnx
from onnx import numpy_helper


class Loop:
    def __init__(self, start, period, count):
        self.start, self.period, self.count = start, period, count
        self.carried = {}  # (i, j) -> (i', o'): block k's input is block k-1's output o' of node i'
        self.stacked = {}  # block 0's initializer name -> its name in each block
        self.outputs = {}  # (i', o') carried -> the last block's output name

    @property
    def end(self):
        return self.start + self.period * self.count


def signature(node, inits, params):
    """what must agree between blocks: op, attributes, and each input's kind"""
    h = hashlib.sha1()
    h.update(f"{node.domain}/{node.op_type}/{len(node.output)}".encode())
    for at in sorted(node.attribute, key=lambda a: a.name):
        if at.type == onnx.AttributeProto.TENSOR:  # its value, not the name the exporter gave it
            a = numpy_helper.to_array(at.t)
            h.update(f"{at.name}{a.dtype}{a.shape}".encode() + a.tobytes())
        else:
            h.update(at.SerializeToString())
    for n in node.input:
        if n in inits:
            a = inits[n]
            h.update(f"init{a.shape}{a.dtype}".encode())
            if n not in params:  # a constant: its value
                h.update(a.tobytes())
        else:
            h.update(b"v" if n else b"-")
    return h.hexdigest()


def check(nodes, inits, params, users, outputs, start, period, count):
    """the loop of these blocks, or None when they do not make one"""
    L = Loop(start, period, count)
    where = {}  # a value made in the region -> (block, node, output)
    for k in range(count):
        for i in range(period):
            for o, name in enumerate(nodes[start + k * period + i].output):
                if name:
                    where[name] = (k, i, o)
    params0 = {}
    for i in range(period):
        n0 = nodes[start + i]
        for j, x0 in enumerate(n0.input):
            w0 = where.get(x0)
            for k in range(1, count):
                xk = nodes[start + k * period + i].input[j]
                wk = where.get(xk)
                if not x0 and not xk:
                    continue
                if w0 is not None:  # made in block 0: made at the same place in block k
                    if wk != (k, w0[1], w0[2]):
                        return None
                elif x0 in params:
                    if xk == x0:  # shared by every block: a parameter of its own
                        continue
                    if xk not in params or params0.setdefault((x0, k), xk) != xk:
                        return None
                elif xk == x0 or (x0 in inits and xk in inits and inits[x0].dtype == inits[xk].dtype and
                                  np.array_equal(inits[x0], inits[xk])):  # from before the loop, or equal constants
                    if (i, j) in L.carried:
                        return None
                elif wk is not None and wk[0] == k - 1:  # the block before made it: carried
                    if L.carried.setdefault((i, j), (wk[1], wk[2])) != (wk[1], wk[2]):
                        return None
                else:
                    return None
    # the values carried in: block 0 reads, at every place one is carried to, the same value from before
    L.initial = {}
    for (i, j), at in L.carried.items():
        x0 = nodes[start + i].input[j]
        if L.initial.setdefault(at, x0) != x0:
            return None
    for (x0, k), xk in params0.items():
        L.stacked.setdefault(x0, [x0] + [None] * (count - 1))[k] = xk
    if any(None in names for names in L.stacked.values()):
        return None
    if any(len(set(names)) != count for names in L.stacked.values()):
        return None
    if not L.stacked:  # a loop trains stacked parameters, or it is shape arithmetic
        return None
    # each stacked parameter's layers numbered in their names (h.0.w, h.1.w), so that they are saved
    # under them again (Inception's Mixed_6c and Mixed_6d are alike but named by letters: not a loop)
    if any(layer_pattern(names) is None for names in L.stacked.values()):
        return None
    stacked_names = {n for names in L.stacked.values() for n in names}
    if any(u for n in stacked_names for u in users.get(n, []) if not start <= u < L.end):
        return None  # an initializer a block also read outside the loop
    # what a block makes is read by itself and the next, and only the carried values after the loop
    carried_at = set(L.carried.values())
    for name, (k, i, o) in where.items():
        for u in users.get(name, []):
            if start <= u < L.end:
                ku = (u - start) // period
                if ku == k:
                    continue
                if ku == k + 1 and (i, o) in carried_at:
                    continue
                return None
            if k != count - 1 or (i, o) not in carried_at:
                return None
        if name in outputs and (k != count - 1 or (i, o) not in carried_at):
            return None
    for (i, o) in carried_at:
        L.outputs[(i, o)] = nodes[start + (count - 1) * period + i].output[o]
    return L


def find(nodes, inits, params, outputs):
    """the loops among nodes, largest first, none overlapping"""
    sig = np.array([int(signature(n, inits, params)[:15], 16) for n in nodes], dtype=np.int64)
    users = {}
    for u, n in enumerate(nodes):
        for x in n.input:
            users.setdefault(x, []).append(u)

    def search(lo, hi):
        """the largest loop in nodes[lo:hi], then those before and after it"""
        n = hi - lo
        cands = []
        for p in range(1, n // 2 + 1):
            eq = sig[lo:hi - p] == sig[lo + p:hi]
            # runs of eq: [a, b) where the node at j equals the one at j + p
            d = np.diff(np.concatenate(([0], eq.astype(np.int8), [0])))
            for a, b in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)):
                if b - a >= p:
                    cands.append((-((b - a + p) // p) * p, p, lo + int(a), lo + int(b)))
        cands.sort()
        for cover, p, a, b in cands:
            # the rotation with the most blocks, then the fewest values carried (a transformer's residual stream)
            best = None
            for s in range(a, a + p):
                count = (b + p - s) // p
                if count < 2 or (best and count < best.count):
                    break
                L = check(nodes, inits, params, users, outputs, s, p, count)
                if L and (not best or len(L.initial) < len(best.initial)):
                    best = L
            if best:
                return search(lo, best.start) + [best] + search(best.end, hi)
        return []

    return search(0, len(nodes))


def layer_pattern(names):
    """one name with {B} where the names hold B, B + 1, ...: h.0.w, h.1.w -> h.{0}.w; None if none"""
    first, last = names[0], names[-1]
    p = 0
    while p < min(len(first), len(last)) and first[p] == last[p]:
        p += 1
    while p and first[p - 1].isdigit():
        p -= 1
    s = 0
    while s < min(len(first), len(last)) - p and first[-1 - s] == last[-1 - s]:
        s += 1
    while s and first[len(first) - s].isdigit():
        s -= 1
    prefix, suffix = first[:p], first[len(first) - s:] if s else ""
    try:
        base = int(first[p:len(first) - s])
    except ValueError:
        return None
    pat = f"{prefix}{{{base}}}{suffix}"
    if "{" in prefix + suffix or "}" in prefix + suffix:
        return None
    if [f"{prefix}{base + k}{suffix}" for k in range(len(names))] != list(names):
        return None
    return pat
