"""PyTorch eager reference for samples/oscillator.dp: the same damped
oscillators, semi-implicit Euler, a Python loop over T steps; with
--segments K each of K segments runs under torch.utils.checkpoint (the
usual way to fit a long simulation's tape), without it the whole tape is
kept. fp32, plain SGD. Prints ms/step (CUDA events on the GPU, the wall
clock on the CPU, after warm-up).

    python3 bench/sim_torch.py -T 10000 [--segments 100] [--steps 5] [--device cpu]
"""
import argparse
import math
import time

import torch
import torch.utils.checkpoint


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-T", type=int, default=10000)
    ap.add_argument("-B", type=int, default=32)
    ap.add_argument("--segments", type=int, default=-1, help="checkpointed segments (default sqrt(T); 0: none)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    dev = a.device
    segs = round(math.sqrt(a.T)) if a.segments < 0 else a.segments
    g = torch.Generator(device=dev).manual_seed(0)
    k = (0.5 + torch.rand(1, device=dev, generator=g)).requires_grad_()
    c = (0.1 + 0.2 * torch.rand(1, device=dev, generator=g)).requires_grad_()
    gain = (0.1 * torch.randn(1, device=dev, generator=g)).requires_grad_()
    drive = (0.1 * torch.randn(1, device=dev, generator=g)).requires_grad_()
    x0 = torch.randn(a.B, device=dev, generator=g)
    target = torch.randn(a.B, device=dev, generator=g)
    opt = torch.optim.SGD([k, c, gain, drive], lr=a.lr)
    dt = 0.001

    def run(x, v, n):
        for _ in range(n):
            v = v + dt * (drive - k * x - c * v)
            x = x + dt * v
        return x, v

    def step():
        opt.zero_grad(set_to_none=False)
        x, v = x0 * gain, x0 * 0
        if segs:
            bounds = [a.T * i // segs for i in range(segs + 1)]
            for lo, hi in zip(bounds, bounds[1:]):
                x, v = torch.utils.checkpoint.checkpoint(run, x, v, hi - lo, use_reentrant=False)
        else:
            x, v = run(x, v, a.T)
        loss = torch.mean((x - target) ** 2)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    cuda = dev == "cuda"
    if cuda:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    if cuda:
        end.record()
        torch.cuda.synchronize()
        ms = start.elapsed_time(end) / a.steps
    else:
        ms = 1000 * (time.perf_counter() - t0) / a.steps
    print(f"torch eager T={a.T} B={a.B} segments={segs} on {dev}: {ms:.3f} ms/step, loss {loss.item():.6g}")


if __name__ == "__main__":
    main()
