"""PyTorch eager reference for bench/resmlp_big.dp: the same residual MLP,
the same shapes, fp32, plain SGD. Prints ms/step (CUDA events, after warm-up).

    python3 bench/resmlp_torch.py [--steps N] [--checkpoint-segments K] [-L 64] [--device cpu]

On the CPU the time is the wall clock and no peak memory is measured.
"""
import argparse
import math
import time

import torch
import torch.utils.checkpoint


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("-L", type=int, default=64)
    ap.add_argument("-H", type=int, default=1024)
    ap.add_argument("-B", type=int, default=1024)
    ap.add_argument("-D", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--checkpoint-segments", type=int, default=0,
                    help="use torch.utils.checkpoint.checkpoint_sequential with K segments")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    dev = a.device
    cuda = dev == "cuda"
    g = torch.Generator(device=dev).manual_seed(0)
    w_in = (torch.randn(a.D, a.H, device=dev, generator=g) * 0.03).requires_grad_()
    # one tensor per layer, as a PyTorch user writes it: indexing one stacked
    # tensor would make every layer's backward scatter into the whole stack
    ws = [(torch.randn(a.H, a.H, device=dev, generator=g) * 0.001).requires_grad_() for _ in range(a.L)]
    bs = [torch.zeros(a.H, device=dev, requires_grad=True) for _ in range(a.L)]
    w_out = (torch.randn(a.H, 1, device=dev, generator=g) * 0.01).requires_grad_()
    params = [w_in, *ws, *bs, w_out]
    x = torch.randn(a.B, a.D, device=dev, generator=g)
    y = torch.randn(a.B, 1, device=dev, generator=g)
    opt = torch.optim.SGD(params, lr=a.lr)

    class Block(torch.nn.Module):
        def __init__(self, l):
            super().__init__()
            self.l = l

        def forward(self, h):
            return h + torch.relu(h @ ws[self.l] + bs[self.l])

    blocks = torch.nn.Sequential(*[Block(l) for l in range(a.L)])

    def step():
        opt.zero_grad(set_to_none=False)
        h = torch.tanh(x @ w_in)
        if a.checkpoint_segments:
            try:
                h = torch.utils.checkpoint.checkpoint_sequential(
                    blocks, a.checkpoint_segments, h, use_reentrant=False)
            except ValueError:  # PyTorch before 2.0 has only the reentrant form
                h = torch.utils.checkpoint.checkpoint_sequential(blocks, a.checkpoint_segments, h)
        else:
            h = blocks(h)
        loss = torch.mean((h @ w_out - y) ** 2)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    if not cuda:
        t0 = time.perf_counter()
        for _ in range(a.steps):
            loss = step()
        ms = 1000 * (time.perf_counter() - t0) / a.steps
        print(f"torch L={a.L} H={a.H} B={a.B} segments={a.checkpoint_segments}: "
              f"{ms:.3f} ms/step, peak n/a (cpu), loss {loss.item():.6g}")
        return
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(a.steps):
        loss = step()
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / a.steps
    peak = torch.cuda.max_memory_allocated()
    print(f"torch L={a.L} H={a.H} B={a.B} segments={a.checkpoint_segments}: "
          f"{ms:.3f} ms/step, peak {peak / 2**20:.1f} MiB, loss {loss.item():.6g}")


if __name__ == "__main__":
    main()
