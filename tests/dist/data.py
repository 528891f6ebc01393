"""data.py DIR N: a regression set for samples/resmlp.dp (x f64[N, 32], y f64[N, 1] = tanh of a
random projection) as DIR/x.npy and DIR/y.npy, without NumPy."""
import math
import random
import struct
import sys


def npy(path, rows, cols, vals):
    h = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + struct.pack("<%dd" % len(vals), *vals))


d, n = sys.argv[1], int(sys.argv[2])
random.seed(0)
x = [random.gauss(0, 1) for _ in range(n * 32)]
w = [random.gauss(0, 1) for _ in range(32)]
y = [math.tanh(0.3 * sum(x[i * 32 + j] * w[j] for j in range(32))) for i in range(n)]
npy(f"{d}/x.npy", n, 32, x)
npy(f"{d}/y.npy", n, 1, y)
