"""PyTorch references for samples/gpt.dp and samples/resnet.dp: the same
networks (GPT with its residual dropout of 0.1 since 2026-11-26; before, the
twin had none), the same shapes, fp32 (or bf16 with --bf16), plain SGD, random data. Prints one line per
mode (eager, and torch.compile where this PyTorch has it): ms/step (CUDA
events after warm-up; the clock on the CPU), throughput and peak memory.

    python3 bench/nets_torch.py gpt -L 12 -D 768 -H 12 -T 1024 -V 50257 -B 8
    python3 bench/nets_torch.py resnet -B 128 -S 32 -C 16 -N 9
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F


def gpt(a, dev, g):
    L, D, H, T, V, B = a.L, a.D, a.H, a.T, a.V, a.B
    r = lambda *s, sd: (torch.randn(*s, device=dev, generator=g) * sd).requires_grad_()
    z = lambda *s: torch.zeros(*s, device=dev, requires_grad=True)
    o = lambda *s: torch.ones(*s, device=dev, requires_grad=True)
    P = dict(wte=r(V, D, sd=0.02), wpe=r(T, D, sd=0.01), lnf_g=o(D), lnf_b=z(D))
    layers = [dict(ln1_g=o(D), ln1_b=z(D), w_q=r(D, D, sd=0.02), w_k=r(D, D, sd=0.02), w_v=r(D, D, sd=0.02),
                   b_q=z(D), b_k=z(D), b_v=z(D), w_o=r(D, D, sd=0.01), b_o=z(D), ln2_g=o(D), ln2_b=z(D),
                   w_fc=r(D, 4 * D, sd=0.02), b_fc=z(4 * D), w_proj=r(4 * D, D, sd=0.01), b_proj=z(D))
              for _ in range(L)]
    text = torch.randint(0, V, (B, T + 1), device=dev, generator=g)

    def heads(t):
        return t.view(B, T, H, D // H).transpose(1, 2)

    def loss():
        h = F.embedding(text[:, :T], P["wte"]) + P["wpe"]
        for p in layers:
            x = F.layer_norm(h, (D,), p["ln1_g"], p["ln1_b"])
            q, k, v = (heads(x @ p["w_" + c] + p["b_" + c]) for c in "qkv")
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True) if hasattr(F, "scaled_dot_product_attention") \
                else torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(D // H)).masked_fill(
                    torch.ones(T, T, dtype=torch.bool, device=dev).triu(1), float("-inf")), -1) @ v
            # GPT-2's residual dropout, as samples/gpt.dp has it (--dropout 0 leaves it out)
            h = h + F.dropout(y.transpose(1, 2).reshape(B, T, D) @ p["w_o"] + p["b_o"], a.dropout)
            m = F.layer_norm(h, (D,), p["ln2_g"], p["ln2_b"])
            h = h + F.dropout(F.gelu(m @ p["w_fc"] + p["b_fc"], approximate="tanh") @ p["w_proj"] + p["b_proj"], a.dropout)
        logits = F.layer_norm(h, (D,), P["lnf_g"], P["lnf_b"]) @ P["wte"].t()
        return F.cross_entropy(logits.reshape(B * T, V), text[:, 1:].reshape(B * T))

    return loss, [*P.values()] + [t for p in layers for t in p.values()], B * T, "tokens"


def resnet(a, dev, g):
    B, S, K, C, N, G = a.B, a.S, 10, a.C, a.N, 2
    r = lambda *s, sd: (torch.randn(*s, device=dev, generator=g) * sd).requires_grad_()
    z = lambda *s: torch.zeros(*s, device=dev, requires_grad=True)
    o = lambda *s: torch.ones(*s, device=dev, requires_grad=True)
    params = []

    def keep(*ts):
        params.extend(ts)
        return ts

    stem, = keep(r(C, 3, 3, 3, sd=0.3))

    def blocks(c, sd):
        return [keep(o(c), z(c), r(c, c, 3, 3, sd=sd), o(c), z(c), r(c, c, 3, 3, sd=sd)) for _ in range(N)]

    def transition(c, sd):
        return keep(o(c), z(c), r(2 * c, c, 3, 3, sd=sd), o(2 * c), z(2 * c), r(2 * c, 2 * c, 3, 3, sd=sd), r(2 * c, c, 1, 1, sd=0.3))

    s1, t2, s2, t3, s3 = blocks(C, 0.1), transition(C, 0.1), blocks(2 * C, 0.07), transition(2 * C, 0.07), blocks(4 * C, 0.05)
    gf, bf, fc, fb = keep(o(4 * C), z(4 * C), r(4 * C, K, sd=0.1), z(K))
    x = torch.randn(B, 3, S, S, device=dev, generator=g)
    y = torch.randint(0, K, (B,), device=dev, generator=g)
    pre = lambda h, gg, bb: F.relu(F.group_norm(h, G, gg, bb))

    def stage(h, bs):
        for ga, ba, wa, gb, bb, wb in bs:
            h = h + F.conv2d(pre(F.conv2d(pre(h, ga, ba), wa, padding=1), gb, bb), wb, padding=1)
        return h

    def trans(h, t):
        ga, ba, wa, gb, bb, wb, wp = t
        p = pre(h, ga, ba)
        return F.conv2d(p, wp, stride=2) + F.conv2d(pre(F.conv2d(p, wa, stride=2, padding=1), gb, bb), wb, padding=1)

    def loss():
        h = stage(F.conv2d(x, stem, padding=1), s1)
        h = stage(trans(h, t2), s2)
        h = stage(trans(h, t3), s3)
        return F.cross_entropy(pre(h, gf, bf).mean((2, 3)) @ fc + fb, y)

    return loss, params, B, "images"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("net", choices=["gpt", "resnet"])
    for k, v in dict(L=12, D=768, H=12, T=1024, V=50257, B=8, S=32, C=16, N=9).items():
        ap.add_argument("-" + k, type=int, default=v)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dropout", type=float, default=0.1, help="gpt: the residual dropout (samples/gpt.dp's 0.1)")
    ap.add_argument("--bf16", action="store_true", help="parameters, data and activations in bfloat16 (as dpc --precision bf16)")
    ap.add_argument("--profile", action="store_true",
                    help="eager only: after the timed steps, two more under torch.profiler, and the GPU's time by kind "
                         "of kernel (GEMMs, attention, the rest) and the largest kernels, in ms a step")
    a = ap.parse_args()
    if a.bf16:
        torch.set_default_dtype(torch.bfloat16)
    dev = a.device
    g = torch.Generator(device=dev).manual_seed(0)
    loss, params, per_step, unit = (gpt if a.net == "gpt" else resnet)(a, dev, g)
    opt = torch.optim.SGD(params, lr=a.lr)
    nparams = sum(p.numel() for p in params)
    modes = [("eager", loss)]
    if hasattr(torch, "compile") and not a.profile:
        modes.append(("torch.compile", torch.compile(loss)))
    for name, fn in modes:
        def step():
            opt.zero_grad(set_to_none=False)
            l = fn()
            l.backward()
            opt.step()
            return l
        for _ in range(a.warmup):
            step()
        if dev == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
        else:
            c0 = time.perf_counter()
        for _ in range(a.steps):
            l = step()
        if dev == "cuda":
            t1.record()
            torch.cuda.synchronize()
            ms = t0.elapsed_time(t1) / a.steps
            peak = torch.cuda.max_memory_allocated()
        else:
            ms = (time.perf_counter() - c0) * 1000 / a.steps
            peak = 0
        print(f"PyTorch {torch.__version__} {name}{' bf16' if a.bf16 else ''} {a.net} ({nparams} params): {ms:.3f} ms/step, "
              f"{per_step * 1000 / ms:.0f} {unit}/s, peak {peak / 2**30:.2f} GiB, loss {l.item():.4f}")
        if a.profile:
            try:
                profiled(step, dev)
            except Exception as e:  # the timings above stand without it
                print(f"PyTorch profile: failed ({type(e).__name__}: {e})")


def kind(name):
    """a kernel's kind by its name: cuBLAS's and CUTLASS's GEMMs, attention's, or the rest"""
    n = name.lower()
    if any(s in n for s in ("gemm", "cutlass", "xmma", "cublas", "sm90_", "ampere_s", "splitk")):
        return "GEMMs"
    if any(s in n for s in ("fmha", "flash", "attention", "mem_eff")):
        return "attention"
    return "the rest"


def profiled(step, dev, steps=2):
    """the device's time a step by kind of kernel, and the ten largest kernels"""
    from torch.profiler import ProfilerActivity, profile
    cuda = dev == "cuda"
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", None) if cuda else e.self_cpu_time_total
        if us is None:
            us = getattr(e, "self_cuda_time_total", 0)
        if us > 0:
            rows.append((us / 1000 / steps, e.key))
    by = {}
    for ms, key in rows:
        by[kind(key)] = by.get(kind(key), 0) + ms
    print("PyTorch profile: " + ", ".join(f"{k} {v:.2f} ms/step" for k, v in sorted(by.items(), key=lambda x: -x[1])) +
          f" ({sum(by.values()):.2f} in all)")
    for ms, key in sorted(rows, reverse=True)[:10]:
        print(f"PyTorch profile:   {ms:8.3f} ms/step  {key[:100]}")


main()
