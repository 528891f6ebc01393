"""compare.py A B TOL: two safetensors files of the same tensors (F64, F32 or BF16) agree
within TOL relative, tensor by tensor: ||a - b|| <= TOL ||b|| (L2 norms); prints the worst."""
import json
import struct
import sys


def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head, data = json.loads(b[8:8 + n]), b[8 + n:]
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        lo, hi = v["data_offsets"]
        raw = data[lo:hi]
        if v["dtype"] == "BF16":
            out[k] = [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
        else:
            f = {"F64": "d", "F32": "f"}[v["dtype"]]
            out[k] = struct.unpack("<%d%s" % (len(raw) // struct.calcsize(f), f), raw)
    return out


a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
worst, name = 0.0, None
for k in b:
    assert len(a[k]) == len(b[k]), k
    diff = sum((x - y) ** 2 for x, y in zip(a[k], b[k])) ** 0.5
    ref = sum(y * y for y in b[k]) ** 0.5
    if diff / (ref or 1e-300) > worst:
        worst, name = diff / (ref or 1e-300), k
print(f"worst relative difference {worst:.3g} ({name})")
assert worst <= tol, (worst, tol)
