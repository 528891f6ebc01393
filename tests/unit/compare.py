"""compare.py A.safetensors B.safetensors TOL [LOSS_A LOSS_B]: every tensor of B
is in A and agrees within TOL times the tensor's largest entry (and the
losses within TOL relative). A tensor whose gradient is zero in exact
arithmetic (a key bias under softmax) holds rounding noise only: its scale is
at least 1e-6 of the largest entry of all of B (COMPARE_FLOOR: another
fraction, for f32 builds whose noise is larger)."""
import json, os, struct, sys


def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        a, e = v["data_offsets"]
        if v["dtype"] == "BF16":  # the high halves of f32s
            h = struct.unpack("<%dH" % ((e - a) // 2), b[8 + n + a:8 + n + e])
            out[k] = struct.unpack("<%df" % len(h), struct.pack("<%dI" % len(h), *(x << 16 for x in h)))
            continue
        f = "f" if v["dtype"] == "F32" else "d"
        out[k] = struct.unpack("<%d%s" % ((e - a) // struct.calcsize(f), f), b[8 + n + a:8 + n + e])
    return out


x, y, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
worst = 0.0
floor = float(os.environ.get("COMPARE_FLOOR", "1e-6")) * max(max(abs(v) for v in t) for t in y.values()) if y else 0.0
for k in y:
    scale = max(max(abs(v) for v in y[k]), floor) or 1.0
    worst = max(worst, max(abs(p - q) for p, q in zip(x[k], y[k])) / scale)
if len(sys.argv) > 5:
    la, lb = float(sys.argv[4]), float(sys.argv[5])
    worst = max(worst, abs(la - lb) / max(abs(lb), 1e-300))
print(f"max difference {worst:.2e}")
sys.exit(0 if worst <= tol else 1)
