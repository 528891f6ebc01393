# The pinned host-to-device bandwidth of this GPU, measured with PyTorch:
# copies of 256 MiB from page-locked memory, the best of 10. Prints GB/s;
# with `d2h` the device-to-host bandwidth the same way.
import sys
import time

import torch

n = 256 << 20
host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
dev = torch.empty(n, dtype=torch.uint8, device="cuda")
down = sys.argv[1:] == ["d2h"]
best = float("inf")
for _ in range(10):
    torch.cuda.synchronize()
    t = time.perf_counter()
    (host if down else dev).copy_(dev if down else host, non_blocking=True)
    torch.cuda.synchronize()
    best = min(best, time.perf_counter() - t)
print(f"{n / best / 1e9:.2f}")
