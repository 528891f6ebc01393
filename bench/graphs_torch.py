#!/usr/bin/env python3
"""graphs_torch.py: PyTorch twins of samples/densenet.dp, samples/inception.dp
and samples/unet.dp, trained with SGD on random data, for bench/graphs.sh gpu.

  graphs_torch.py MODEL B S MODE [STEPS]

MODE: none (store everything), checkpoint (torch.utils.checkpoint around
each dense layer, Inception module or U-Net level, non-reentrant),
budget=X (torch.compile with torch._functorch.config.activation_memory_budget
= X, PyTorch 2.4 and later), or offload (every saved tensor in pinned host
memory, torch.autograd.graph.save_on_cpu). Prints one line: the model, the mode, the peak
CUDA memory the step allocated (torch.cuda.max_memory_allocated, bytes) and
ms per step over STEPS steps after 3 warm-up steps. On a machine without a
GPU it runs on the CPU and prints 0 for the peak."""
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

G = 2


def gn_relu(c):
    return nn.Sequential(nn.GroupNorm(G, c), nn.ReLU())


class Ckpt(nn.Module):
    """runs a part under torch.utils.checkpoint when asked"""

    def __init__(self, part, on):
        super().__init__()
        self.part, self.on = part, on

    def forward(self, *x):
        return checkpoint(self.part, *x, use_reentrant=False) if self.on and self.training else self.part(*x)


class DenseLayer(nn.Module):
    def __init__(self, c, k):
        super().__init__()
        self.f = nn.Sequential(gn_relu(c), nn.Conv2d(c, k, 3, padding=1, bias=False))

    def forward(self, *feats):
        return self.f(torch.cat(feats, 1))


class DenseNet(nn.Module):
    """samples/densenet.dp: C=8, K=4, two blocks of 4 layers"""

    def __init__(self, ck, C=8, K=4):
        super().__init__()
        self.stem = nn.Conv2d(3, C, 3, padding=1, bias=False)
        self.b1 = nn.ModuleList(Ckpt(DenseLayer(C + i * K, K), ck) for i in range(4))
        c1 = C + 4 * K
        self.trans = nn.Sequential(gn_relu(c1), nn.Conv2d(c1, c1 // 2, 1, bias=False), nn.AvgPool2d(2))
        self.b2 = nn.ModuleList(Ckpt(DenseLayer(c1 // 2 + i * K, K), ck) for i in range(4))
        c2 = c1 // 2 + 4 * K
        self.head = gn_relu(c2)
        self.fc = nn.Linear(c2, 10)

    def forward(self, x):
        feats = [self.stem(x)]
        for layer in self.b1:
            feats.append(layer(*feats))
        feats = [self.trans(torch.cat(feats, 1))]
        for layer in self.b2:
            feats.append(layer(*feats))
        return self.fc(self.head(torch.cat(feats, 1)).mean((2, 3)))


class Module(nn.Module):
    """one Inception module of samples/inception.dp"""

    def __init__(self, cin, P=4, R=4):
        super().__init__()
        conv = lambda i, o, k: nn.Conv2d(i, o, k, padding=k // 2, bias=False)
        self.a = conv(cin, P, 1)
        self.b = nn.Sequential(conv(cin, R, 1), nn.ReLU(), conv(R, P, 3))
        self.c = nn.Sequential(conv(cin, R, 1), nn.ReLU(), conv(R, R, 3), nn.ReLU(), conv(R, P, 3))
        self.d = conv(cin, P, 1)
        self.norm = gn_relu(4 * P)

    def forward(self, h):
        pool = F.max_pool2d(h, 3, stride=1, padding=1)
        return self.norm(torch.cat([self.a(h), self.b(h), self.c(h), self.d(pool)], 1))


class Inception(nn.Module):
    def __init__(self, ck, C=8, P=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, C, 3, padding=1, bias=False), nn.ReLU())
        self.m1, self.m2, self.m3 = Ckpt(Module(C), ck), Ckpt(Module(4 * P), ck), Ckpt(Module(4 * P), ck)
        self.fc = nn.Linear(4 * P, 10)

    def forward(self, x):
        h = self.m2(self.m1(self.stem(x)))
        return self.fc(self.m3(F.max_pool2d(h, 2)).mean((2, 3)))


def double(i, o):
    return nn.Sequential(nn.Conv2d(i, o, 3, padding=1, bias=False), gn_relu(o), nn.Conv2d(o, o, 3, padding=1, bias=False),
                         gn_relu(o))


class UNet(nn.Module):
    """samples/unet.dp: C=4, K=3 classes"""

    def __init__(self, ck, C=4, K=3):
        super().__init__()
        self.e1, self.e2 = Ckpt(double(3, C), ck), Ckpt(double(C, 2 * C), ck)
        self.m = Ckpt(double(2 * C, 4 * C), ck)
        self.d2, self.d1 = Ckpt(double(6 * C, 2 * C), ck), Ckpt(double(3 * C, C), ck)
        self.out = nn.Conv2d(C, K, 1, bias=False)

    def forward(self, x):
        up = lambda t: F.interpolate(t, scale_factor=2, mode="bilinear", align_corners=False)
        x1 = self.e1(x)
        x2 = self.e2(F.max_pool2d(x1, 2))
        m = self.m(F.max_pool2d(x2, 2))
        y2 = self.d2(torch.cat([up(m), x2], 1))
        y1 = self.d1(torch.cat([up(y2), x1], 1))
        return self.out(y1)


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    name, B, S, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 20
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    net = {"densenet": DenseNet, "inception": Inception, "unet": UNet}[name](mode == "checkpoint").to(dev)
    x = torch.randn(B, 3, S, S, device=dev)
    y = torch.randint(0, 3, (B, S, S), device=dev) if name == "unet" else torch.randint(0, 10, (B,), device=dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)

    def step():
        opt.zero_grad(set_to_none=False)
        if mode == "offload":
            with torch.autograd.graph.save_on_cpu(pin_memory=dev == "cuda"):
                loss = F.cross_entropy(net(x), y)
        else:
            loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()

    if mode.startswith("budget="):
        import torch._functorch.config as fc
        fc.activation_memory_budget = float(mode.split("=")[1])
        step = torch.compile(step)
    for _ in range(3):
        step()
    if dev == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    if dev == "cuda":
        torch.cuda.synchronize()
    ms = 1000 * (time.perf_counter() - t) / steps
    peak = torch.cuda.max_memory_allocated() if dev == "cuda" else 0
    print(f"torch {name} B={B} S={S} {mode}: peak {peak} bytes, {ms:.3f} ms/step")


if __name__ == "__main__":
    main()
