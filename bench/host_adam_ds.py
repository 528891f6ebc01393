"""bench/host_adam_ds.py N THREADS: DeepSpeed's CPU Adam (DeepSpeedCPUAdam,
AdamW, the step ZeRO-Offload runs on the host) on N f32 parameters with f32
gradients, at THREADS threads (OpenMP), the best of 5 steps after one to
warm up (the first use builds DeepSpeed's op, about 4 minutes). Prints one
line: "deepspeed THREADS PARAMS_PER_S". bench/host_adam.sh runs it beside
dpc's host update on the same tensors."""
import os
import sys
import time

n, threads = int(sys.argv[1]), int(sys.argv[2])
os.environ["OMP_NUM_THREADS"] = str(threads)
import torch  # noqa: E402
from deepspeed.ops.adam import DeepSpeedCPUAdam  # noqa: E402

torch.set_num_threads(threads)
i = torch.arange(n, dtype=torch.float32)
p = torch.nn.Parameter((i % 1000) * 1e-3)
p.grad = ((i * 7) % 1000) * 1e-4 - 0.05
opt = DeepSpeedCPUAdam([p], lr=1e-3, weight_decay=0.01, adamw_mode=True)
best = float("inf")
for k in range(6):
    t0 = time.perf_counter()
    opt.step()
    t = time.perf_counter() - t0
    if k > 0:
        best = min(best, t)
print(f"deepspeed {threads} {n / best:.6g}")
