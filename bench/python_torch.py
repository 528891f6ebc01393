"""dpc from PyTorch as a user brings a model (issue 65): torchvision's resnet18 on small images and
HuggingFace's GPT-2 (a tiny config, random init), each trained from a torch.utils.data.DataLoader
through dpc.compile, the weights put back into the user's module by load_into, and those weights
compared bit for bit with the executable's (dpc's CLI: the same export, batches and seed, --in-order).

    PYTHONPATH=python DPC=bin/dpc DPC_TARGET=cpu V/bin/python bench/python_torch.py OUT

V: a venv with torch, torchvision, transformers and onnxscript (bench/python.sh makes one). Prints one
line per model (ok / not ok, the keys compared, the seconds of each phase) and exits non-zero on a
mismatch. Not part of make test (it needs PyTorch)."""
import copy
import os
import subprocess
import sys
import time

import numpy as np
import torch

import dpc
from dpc import _export

out = sys.argv[1] if len(sys.argv) > 1 else "bench/out/python"
os.makedirs(out, exist_ok=True)
dpc_exe = dpc.find_dpc()
failed = 0


def cli_weights(ref, example, loss, batches, names, tag):
    """the executable's parameters after the same batches: the same export of the module as it was,
    dpc's CLI, the batches one after another in one file each (--in-order)"""
    onnx_path, prefix = _export.export(ref, example, os.path.join(out, tag + ".onnx"))
    exe = os.path.join(out, tag)
    subprocess.run([dpc_exe, onnx_path, "--loss", loss, "--optimizer", "adam", "-o", exe], check=True,
                   capture_output=True)
    files = []
    for i, name in enumerate(names):
        arr = np.concatenate([b[i].numpy() for b in batches])
        path = os.path.join(out, "%s.%s.npy" % (tag, name))
        np.save(path, arr.astype(np.int32) if arr.dtype == np.int64 else arr)
        files += ["--input", "%s=%s" % (name, path)]
    saved = os.path.join(out, tag + ".safetensors.out")
    subprocess.run([exe, "--seed", "3", "--quiet", "--steps", str(len(batches)), "--in-order", "--save", saved] + files,
                   check=True, capture_output=True)
    w = dpc._read_safetensors(saved)
    return {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in w.items()}


def torch_ms(model, loss, batches):
    """PyTorch's own training step on the same batches (Adam, the same loss), in ms a step, the first
    left out"""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    times = []
    for b in batches:
        t = time.time()
        out = model(b[0])
        logits = out.logits if hasattr(out, "logits") else out
        if loss == "causal_lm":
            l = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), b[1][:, 1:].reshape(-1))
        else:
            l = torch.nn.functional.cross_entropy(logits, b[1])
        opt.zero_grad()
        l.backward()
        opt.step()
        times.append(time.time() - t)
    return 1000 * sum(times[1:]) / max(1, len(times) - 1)


def case(tag, model, example, loss, loader, names, per_step):
    global failed
    ref = copy.deepcopy(model)  # the module as it was, for the executable's export
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batches = [per_step(b) for b in loader]
    t0 = time.time()
    tr = dpc.compile(model, example, loss=loss, optimizer="adam", run={"seed": 3, "quiet": True})
    t1 = time.time()
    losses = [tr.step(*b) for b in batches]
    t2 = time.time()
    res = tr.load_into(model)
    peak = tr.plan["peak_device_bytes"]["total"]
    tr.close()
    t3 = time.time()
    eager = torch_ms(copy.deepcopy(ref), loss, batches)
    want = cli_weights(ref, example, loss, batches, names, tag)
    sd = model.state_dict()
    bad = [k for k, v in want.items() if k not in sd or
           sd[k].detach().cpu().contiguous().view(torch.uint8).numpy().tobytes() != v.tobytes()]
    moved = sum(not torch.equal(before[k], sd[k]) for k in want if k in before)
    good = not bad and not res.missing_keys and moved > 0
    failed += not good
    print("%s - %s: %d steps from a DataLoader, loss %.4f -> %.4f; %d tensors back in the module, %d changed, "
          "bit for bit the executable's%s; missing %s; compile %.1f s, steps %.2f s (%.1f ms/step), load_into %.2f s; "
          "planned peak %.1f MiB; PyTorch eager %.1f ms/step here, dpc/eager %.2f"
          % ("ok" if good else "not ok", tag, len(batches), losses[0], losses[-1], len(want), moved,
             "" if not bad else " but %d: %s" % (len(bad), bad[:5]), res.missing_keys, t1 - t0, t2 - t1,
             1000 * (t2 - t1) / len(batches), t3 - t2, peak / 2**20, eager, 1000 * (t2 - t1) / len(batches) / eager))


def resnet():
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    g = torch.Generator().manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(64, 3, 32, 32, generator=g), torch.randint(0, 10, (64,), generator=g))
    loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True, drop_last=True, generator=g)
    case("resnet18", model, (torch.randn(8, 3, 32, 32),), "cross_entropy", loader, ["x", "labels"],
         lambda b: (b[0], b[1]))


def gpt2():
    import transformers
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=256, n_positions=64, n_embd=64, n_layer=2, n_head=2,
                                  bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(cfg).train()
    g = torch.Generator().manual_seed(2)
    data = torch.utils.data.TensorDataset(torch.randint(0, 256, (64, 32), generator=g))
    loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True, drop_last=True, generator=g)
    # the labels are the ids, unshifted, as HuggingFace's labels=
    case("gpt2", model, (torch.randint(0, 256, (4, 32)),), "causal_lm", loader, ["input_ids", "labels"],
         lambda b: (b[0], b[0]))


resnet()
gpt2()
sys.exit(1 if failed else 0)
