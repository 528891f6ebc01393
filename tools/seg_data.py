#!/usr/bin/env python3
"""A toy segmentation set for samples/dranet.dp, without numpy: N images
[3, S, S] made of B x B blocks, each block one of K classes, painted in its
class's colour plus noise; the labels [S, S] are the blocks' classes, with
a few pixels marked 255 (ignored). Writes X.npy and Y.npy.

usage: seg_data.py X.npy Y.npy [N S K B]"""
import os
import random
import struct
import sys


def write_npy(path, code, shape, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        code, "".join("%d, " % d for d in shape))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path + ".tmp", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%d%s" % (len(values), "f" if code[1] == "f" else "i"), *values))
    os.replace(path + ".tmp", path)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    n, s, k, b = (int(a) for a in (sys.argv[3:] + ["32", "16", "4", "4"][len(sys.argv) - 3:]))
    rng = random.Random(1)
    colours = [[rng.gauss(0, 1) for _ in range(3)] for _ in range(k)]
    xs, ys = [], []
    for _ in range(n):
        cls = [[rng.randrange(k) for _ in range(s // b + 1)] for _ in range(s // b + 1)]
        lab = [[cls[i // b][j // b] for j in range(s)] for i in range(s)]
        for ch in range(3):
            xs += [colours[lab[i][j]][ch] + 0.3 * rng.gauss(0, 1) for i in range(s) for j in range(s)]
        ys += [255 if rng.random() < 0.02 else lab[i][j] for i in range(s) for j in range(s)]
    write_npy(sys.argv[1], "<f4", (n, 3, s, s), xs)
    write_npy(sys.argv[2], "<i4", (n, s, s), ys)


main()
