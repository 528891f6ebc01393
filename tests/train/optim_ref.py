#!/usr/bin/env python3
"""optim_ref.py EXE OUTDIR OPTIMIZER SCHEDULE [CLIP [ACCUM]]: trains tests/train/optim.dp
(compiled in float64 to EXE) for 10 steps with the given optimizer (sgd,
adam or adamw) and --lr-schedule (constant, cosine or linear, after 3
warmup steps), and the same model here in plain float64 Python with
torch.optim.AdamW's and torch.optim.SGD's update rules and the schedule's
formula, and with CLIP torch.nn.utils.clip_grad_norm_'s (one L2 norm over
every gradient, each scaled by min(1, CLIP / (norm + 1e-6))), and with
ACCUM that many micro-batches a step, their gradients summed (the data is
one batch, so the sum is ACCUM times its gradient; clipping sees the sum);
the saved
parameters must agree within 1e-10 (relative to
max(1, |value|)). AdamW decays W, not the bias b (1-D, as the executable
does by default) nor S (marked nodecay)."""
import json, math, os, random, struct, subprocess, sys

B, D, O, STEPS, WARMUP = 8, 4, 3, 10, 3
LR, MIN_LR, DECAY = 0.05, 0.005, 0.1


def write_npy(path, shape, values):
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (%s), }" % "".join("%d, " % d for d in shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%dd" % len(values), *values))


def write_st(path, tensors):
    meta, off, blobs = {}, 0, []
    for name, (shape, vals) in tensors.items():
        b = struct.pack("<%dd" % len(vals), *vals)
        meta[name] = {"dtype": "F64", "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(meta).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k != "__metadata__":
            a, e = v["data_offsets"]
            out[k] = list(struct.unpack("<%dd" % ((e - a) // 8), b[8 + n + a:8 + n + e]))
    return out


def lr_at(t, schedule):
    if t < WARMUP:
        return LR * (t + 1) / WARMUP
    f = (t - WARMUP) / (STEPS - WARMUP)
    if schedule == "cosine":
        return MIN_LR + 0.5 * (LR - MIN_LR) * (1 + math.cos(math.pi * f))
    if schedule == "linear":
        return LR - (LR - MIN_LR) * f
    return LR


def main():
    exe, out, opt, schedule = sys.argv[1:5]
    clip = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    accum = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    rng = random.Random(7)
    x = [rng.gauss(0, 1) for _ in range(B * D)]
    y = [rng.gauss(0, 1) for _ in range(B * O)]
    p = {"W": [rng.gauss(0, 0.5) for _ in range(D * O)], "b": [rng.gauss(0, 0.1) for _ in range(O)],
         "S": [rng.gauss(0, 0.5) for _ in range(2 * D * O)]}
    write_npy(f"{out}/x.npy", [B, D], x)
    write_npy(f"{out}/y.npy", [B, O], y)
    write_st(f"{out}/init.st", {"W": ([D, O], p["W"]), "b": ([O], p["b"]), "S": ([2, D, O], p["S"])})
    args = [exe, "--steps", str(STEPS), "--lr", str(LR), "--optimizer", opt, "--lr-schedule", schedule,
            "--warmup", str(WARMUP), "--min-lr", str(MIN_LR), "--init", f"{out}/init.st", "--data", f"{out}/x.npy",
            "--labels", f"{out}/y.npy", "--save", f"{out}/out.st", "--quiet"]
    if opt == "adamw":
        args += ["--weight-decay", str(DECAY)]
    if clip:
        args += ["--clip-grad", str(clip)]
    if accum > 1:
        args += ["--accum", str(accum)]
    clipped = 0
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    got = read_st(f"{out}/out.st")

    m = {k: [0.0] * len(v) for k, v in p.items()}
    v2 = {k: [0.0] * len(v) for k, v in p.items()}
    for t in range(STEPS):
        W, b, S = p["W"], p["b"], p["S"]
        # h = x (W + S0 - S1) + b; loss = mean((h - y)^2); g = dloss/dh
        g = [0.0] * (B * O)
        for r in range(B):
            for o in range(O):
                h = b[o] + sum(x[r * D + d] * (W[d * O + o] + S[d * O + o] - S[D * O + d * O + o]) for d in range(D))
                g[r * O + o] = 2 * (h - y[r * O + o]) / (B * O)
        gW = [sum(x[r * D + d] * g[r * O + o] for r in range(B)) for d in range(D) for o in range(O)]
        grads = {"W": gW, "b": [sum(g[r * O + o] for r in range(B)) for o in range(O)], "S": gW + [-a for a in gW]}
        grads = {k: [accum * a for a in v] for k, v in grads.items()}
        if clip:
            norm = math.sqrt(sum(g * g for k in grads for g in grads[k]))
            coef = min(1.0, clip / (norm + 1e-6))
            clipped += coef < 1
            grads = {k: [g * coef for g in v] for k, v in grads.items()}
        lr = lr_at(t, schedule)
        for k in p:
            if opt == "sgd":
                p[k] = [a - lr * ga for a, ga in zip(p[k], grads[k])]
                continue
            step = t + 1
            bc1, bc2 = 1 - 0.9 ** step, 1 - 0.999 ** step
            for i, gi in enumerate(grads[k]):
                if opt == "adamw" and k == "W":
                    p[k][i] *= 1 - lr * DECAY
                m[k][i] = 0.9 * m[k][i] + (1 - 0.9) * gi
                v2[k][i] = 0.999 * v2[k][i] + (1 - 0.999) * gi * gi
                denom = math.sqrt(v2[k][i]) / math.sqrt(bc2) + 1e-8
                p[k][i] -= (lr / bc1) * m[k][i] / denom
    worst = max(abs(a - e) / max(1.0, abs(e)) for k in p for a, e in zip(got[k], p[k]))
    moved = max(abs(a - e) for k in p for a, e in zip(p[k], read_st(f"{out}/init.st")[k]))
    print(f"{opt} {schedule}{f' clip {clip} ({clipped} of {STEPS} steps clipped)' if clip else ''}"
          f"{f' accum {accum}' if accum > 1 else ''}: max difference "
          f"{worst:.1e} after {STEPS} steps (parameters moved by up to {moved:.2f})")
    sys.exit(0 if worst <= 1e-10 and moved > 1e-3 and (not clip or clipped >= 3) else 1)


main()
