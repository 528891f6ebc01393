#!/usr/bin/env python3
"""dpc's --precision bf16-mixed beside PyTorch's autocast (issue 60, item 6).

  python3 bench/mixed_torch.py [--dpc bin/dpc] [--out DIR] [--steps 20]

Needs PyTorch (and, for the imported model, onnx and onnxscript): a venv,
pip install torch onnx onnxscript; make test does not. Two models, each
from the same weights on the same batch, AdamW (lr 1e-3, weight decay 0.01
on the weights of two or more dimensions a layer, as dpc decays) for
--steps steps, on this CPU:
  1. samples/gpt.dp without its dropout (its mask cannot match PyTorch's),
     at its default shape, and its twin written here in PyTorch;
  2. bench/import_torch.py's nanoGPT, exported to ONNX as docs/import.md
     says and converted by dpc.
Runs: PyTorch in f64 (the reference), in f32, and under
torch.autocast(bfloat16) with f32 parameters and AdamW state; dpc in f64,
f32, bf16-mixed and pure bf16. Prints, per run, the largest distance of its
parameters from PyTorch f64's after the last step (relative to each
tensor's largest entry), how far the layernorm gains moved from 1, and how
far they are from f64's: under
pure bf16 their updates are below half a bf16 step and they stay at 1,
where bf16-mixed moves them as f32 and autocast do. Exit status 1 if dpc's
f64 is not within 1e-4 of PyTorch's f64 (the same model: AdamW, dividing
by each gradient's size, turns the last-bit differences of two f64 sums
into differences of a millionth of a step where a gradient is as small as
eps, 1e-8, 1.6e-6 of the largest weight measured on the nanoGPT from the
first step on), or bf16-mixed's gains do not move.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
LR, DECAY = 1e-3, 0.01


def write_st(path, tensors):
    """a safetensors file of f32 (or f64) numpy arrays"""
    meta, off, blobs = {}, 0, []
    for k, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        meta[k] = {"dtype": {np.float32: "F32", np.float64: "F64"}[a.dtype.type], "shape": list(a.shape),
                   "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(meta).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    out = {}
    for k, v in json.loads(b[8:8 + n]).items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        raw = b[8 + n + s:8 + n + e]
        if v["dtype"] == "BF16":
            a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, {"F32": np.float32, "F64": np.float64}[v["dtype"]])
        out[k] = a.reshape(v["shape"]).astype(np.float64)
    return out


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stdout}{r.stderr}")
    return r.stdout


def adamw(params, decays):
    """torch's AdamW with dpc's decay: the weights of two or more dimensions a layer"""
    groups = [{"params": [p for p, d in zip(params, decays) if d], "weight_decay": DECAY},
              {"params": [p for p, d in zip(params, decays) if not d], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.999), eps=1e-8)


def torch_train(loss_fn, params, decays, steps, amp):
    opt = adamw(params, decays)
    for _ in range(steps):
        opt.zero_grad()
        if amp:
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                loss = loss_fn()
        else:
            loss = loss_fn()
        loss.backward()
        opt.step()


def distance(got, want):
    """the largest difference of any tensor, relative to its largest entry; not the attention's key biases
    (marked None in want), whose gradient is zero in exact arithmetic: AdamW, which divides by the
    gradient's size, turns its rounding noise into full steps in every precision but f64's"""
    return max(float(np.abs(got[k] - want[k]).max() / max(np.abs(want[k]).max(), 1e-30)) for k in want
               if want[k] is not None)


def without_key_bias(ps, key):
    """ps with the key biases (key: a name, or (name, lo, hi) for a part of a tensor) left out of distance"""
    ps = dict(ps)
    if isinstance(key, str):
        ps[key] = None
    else:
        name, lo, hi = key
        a = ps[name].copy()
        a[..., lo:hi] = 0
        ps[name] = a
    return ps


def gains_moved(ps, names):
    return max(float(np.abs(ps[k] - 1).max()) for k in names)


def report(title, runs, ref, gains):
    print(f"\n### {title}\n")
    print("| run | largest distance from PyTorch f64 | layernorm gains moved up to | the gains' distance from f64's |")
    print("|---|---|---|---|")
    for name, ps in runs.items():
        g = max(float(np.abs(ps[k] - ref[k]).max()) for k in gains)
        print(f"| {name} | {distance(ps, ref):.3g} | {gains_moved(ps, gains):.4g} | {g:.3g} |")


# ---- 1. samples/gpt.dp's twin ----

def gpt_twin(args):
    L, D, H, T, V, B = 2, 32, 4, 32, 256, 4  # samples/gpt.dp's defaults
    rng = np.random.default_rng(0)
    n = lambda sd, *s: (rng.standard_normal(s) * sd).astype(np.float32)
    init = {"wte": n(0.02, V, D), "wpe": n(0.01, T, D), "ln1_g": np.ones((L, D), np.float32), "ln1_b": n(0.0, L, D),
            "w_q": n(0.02, L, D, D), "w_k": n(0.02, L, D, D), "w_v": n(0.02, L, D, D), "b_q": n(0.0, L, D),
            "b_k": n(0.0, L, D), "b_v": n(0.0, L, D), "w_o": n(0.01, L, D, D), "b_o": n(0.0, L, D),
            "ln2_g": np.ones((L, D), np.float32), "ln2_b": n(0.0, L, D), "w_fc": n(0.02, L, D, 4 * D),
            "b_fc": n(0.0, L, 4 * D), "w_proj": n(0.01, L, 4 * D, D), "b_proj": n(0.0, L, D),
            "lnf_g": np.ones(D, np.float32), "lnf_b": n(0.0, D)}
    text = rng.integers(0, V, (B, T + 1)).astype(np.int32)
    o = args.out
    write_st(f"{o}/gpt.init.st", init)
    np.save(f"{o}/gpt.text.npy", text)
    # the program without its dropout
    src = open(os.path.join(HERE, "../samples/gpt.dp")).read()
    src = re.sub(r"dropout\((.*), 0\.1\)", r"\1", src)
    open(f"{o}/gpt_nodrop.dp", "w").write(src)
    decays = {k: a.ndim - (1 if k not in ("wte", "wpe", "lnf_g", "lnf_b") else 0) >= 2 for k, a in init.items()}

    def torch_run(dtype, amp):
        P = {k: torch.tensor(a, dtype=dtype, requires_grad=True) for k, a in init.items()}
        tx = torch.tensor(text, dtype=torch.long)

        def loss():
            h = F.embedding(tx[:, :T], P["wte"]) + P["wpe"]
            for l in range(L):
                a = F.layer_norm(h, (D,), P["ln1_g"][l], P["ln1_b"][l])
                q, k, v = ((a @ P["w_" + c][l] + P["b_" + c][l]).view(B, T, H, D // H).transpose(1, 2) for c in "qkv")
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                h = h + y.transpose(1, 2).reshape(B, T, D) @ P["w_o"][l] + P["b_o"][l]
                m = F.layer_norm(h, (D,), P["ln2_g"][l], P["ln2_b"][l])
                h = h + F.gelu(m @ P["w_fc"][l] + P["b_fc"][l], approximate="tanh") @ P["w_proj"][l] + P["b_proj"][l]
            logits = F.layer_norm(h, (D,), P["lnf_g"], P["lnf_b"]) @ P["wte"].t()
            return F.cross_entropy(logits.reshape(B * T, V).float(), tx[:, 1:].reshape(B * T))

        names = list(P)
        torch_train(loss, [P[k] for k in names], [decays[k] for k in names], args.steps, amp)
        return {k: P[k].detach().double().numpy() for k in names}

    runs = {"PyTorch f32": torch_run(torch.float32, False),
            "PyTorch autocast bf16 (f32 weights and AdamW state)": torch_run(torch.float32, True)}
    ref = without_key_bias(torch_run(torch.float64, False), "b_k")
    for prec in ("f64", "f32", "bf16-mixed", "bf16"):
        exe = f"{o}/gpt.{prec}"
        run([args.dpc, "--target", "cpu", "--precision", prec, "--optimizer", "adam", f"{o}/gpt_nodrop.dp", "-o", exe])
        run([exe, "--steps", str(args.steps), "--optimizer", "adamw", "--lr", str(LR), "--weight-decay", str(DECAY),
             "--init", f"{o}/gpt.init.st", "--data", f"{o}/gpt.text.npy", "--save", f"{exe}.st", "--quiet"])
        runs[f"dpc {prec}"] = read_st(f"{exe}.st")
    report(f"samples/gpt.dp (no dropout), {args.steps} AdamW steps", runs, ref, ["ln1_g", "ln2_g", "lnf_g"])
    return runs, ref


# ---- 2. an imported model: nanoGPT through ONNX ----

def imported(args):
    sys.path.insert(0, HERE)
    from import_torch import NanoGPT, export  # noqa: E402
    o = args.out
    torch.manual_seed(0)
    m0 = NanoGPT()
    x, y = torch.randint(0, 64, (2, 16)), torch.randint(0, 64, (2, 16))
    export(m0, x, "legacy", f"{o}/nanogpt.onnx")
    np.save(f"{o}/nanogpt.x.npy", x.numpy().astype(np.int32))
    np.save(f"{o}/nanogpt.y.npy", y.numpy().astype(np.int32))
    state = {k: v.detach().numpy().copy() for k, v in m0.state_dict().items()}
    gains = [k for k in state if re.search(r"ln_.*weight|ln_f\.weight", k)]

    def torch_run(dtype, amp):
        m = NanoGPT()
        m.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
        m = m.to(dtype)
        names = [k for k, _ in m.named_parameters()]
        params = [p for _, p in m.named_parameters()]
        # dpc's decay: the weights of two or more dimensions (an embedding, a linear layer's matrix)
        torch_train(lambda: F.cross_entropy(m(x).reshape(-1, 64).float(), y.reshape(-1)), params,
                    [p.dim() >= 2 for p in params], args.steps, amp)
        return {k: p.detach().double().numpy() for k, p in zip(names, params)}

    # c_attn's bias: q's, k's, v's, each d wide
    kb = [(k, 32, 64) for k in state if k.endswith("c_attn.bias")]
    ref = torch_run(torch.float64, False)
    runs = {"PyTorch f32": torch_run(torch.float32, False),
            "PyTorch autocast bf16 (f32 weights and AdamW state)": torch_run(torch.float32, True)}
    for prec in ("f64", "f32", "bf16-mixed", "bf16"):
        exe = f"{o}/nanogpt.{prec}"
        run([args.dpc, f"{o}/nanogpt.onnx", "--target", "cpu", "--precision", prec, "--optimizer", "adam", "-o", exe])
        run([exe, "--steps", str(args.steps), "--optimizer", "adamw", "--lr", str(LR), "--weight-decay", str(DECAY),
             "--data", f"{o}/nanogpt.x.npy", "--labels", f"{o}/nanogpt.y.npy", "--save", f"{exe}.st", "--quiet"])
        got = read_st(f"{exe}.st")
        runs[f"dpc {prec}"] = {k: got[k] for k in ref if k in got}
    missing = [k for k in ref if k not in runs["dpc f32"]]
    if missing:
        sys.exit(f"the imported model's saved weights lack {missing}")
    for key in kb:
        ref = without_key_bias(ref, key)
        runs = {n: without_key_bias(ps, key) for n, ps in runs.items()}
    report(f"nanoGPT imported through ONNX, {args.steps} AdamW steps", runs, ref, gains)
    return runs, ref, gains


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dpc", default=os.path.join(HERE, "../bin/dpc"))
    ap.add_argument("--out", default="/tmp/mixed_torch")
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    print(f"## bf16-mixed beside PyTorch {torch.__version__}'s autocast (bench/mixed_torch.py)")
    fails = []
    runs, ref = gpt_twin(args)
    iruns, iref, igains = imported(args)
    for name, rs, r, g in (("gpt.dp", runs, ref, ["ln1_g", "ln2_g", "lnf_g"]), ("nanoGPT", iruns, iref, igains)):
        if distance(rs["dpc f64"], r) > 1e-4:
            fails.append(f"{name} in f64: {distance(rs['dpc f64'], r):.3g} from PyTorch's f64")
        if gains_moved(rs["dpc bf16-mixed"], g) < 1e-3:
            fails.append(f"{name}: bf16-mixed's layernorm gains did not move")
    for f in fails:
        print(f"FAIL: {f}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
