"""The C API on the GPU (issue 65), through the Python package: the classifier's library for cuda, 5
steps on one batch given as CUDA tensors (device memory, no host copy) and as host arrays: the same
bits; against the CPU library's parameters within 1e-4; a device batch read by one step only.

    python3 tests/gpu/api_gpu.py DIR      (DIR: gpu_build/api, from tests/gpu/run.sh build)"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import dpc  # noqa: E402

d = sys.argv[1]
r = np.random.default_rng(11)
x = r.standard_normal((128, 20)).astype(np.float32)
y = r.integers(0, 10, 128).astype(np.int32)
run = {"seed": 3, "quiet": True}


def train(lib, xs, ys):
    t = dpc.load(os.path.join(d, lib), run=run)
    for _ in range(5):
        t.step(xs, ys)
    sd = t.state_dict("numpy")
    t.close()
    return sd


dev = train("libclassifier_cuda.so", torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda())
host = train("libclassifier_cuda.so", x, y)
cpu = train("libclassifier_cpu.so", x, y)
assert sorted(dev) == sorted(host) == sorted(cpu)
for k in dev:
    assert dev[k].tobytes() == host[k].tobytes(), "device and host batches differ at " + k
    rel = np.abs(dev[k] - cpu[k]).max() / max(np.abs(cpu[k]).max(), 1e-12)
    assert rel <= 1e-4, (k, rel)
t = dpc.load(os.path.join(d, "libclassifier_cuda.so"), run=run)
t.step(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda())
try:
    t.step()
    raise SystemExit("a device batch was read twice")
except dpc.Error as e:
    assert "put it again" in str(e), e
t.close()
print("device puts bitwise the host's, the GPU within 1e-4 of the CPU, a device batch read once")
