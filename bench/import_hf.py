#!/usr/bin/env python3
"""HuggingFace's decoders and BERT through ONNX into dpc, checked against PyTorch (issue 61).

  python3 bench/import_hf.py [MODEL ...] [--size tiny|small] [--exporters dynamo,legacy] [--dpc bin/dpc] [--out DIR]

MODEL: llama, mistral, qwen2, neox (causal LMs, dpc --loss causal_lm) and bert
(BertForSequenceClassification, an attention mask input); all by default.
Needs bench/import_torch.py's venv (torch, transformers, onnx, onnxscript).
Sizes: tiny (vocab 64, hidden 32, intermediate 48, 3 layers, 4 heads, 2 kv heads,
max positions 64; mistral's sliding window 8, shorter than the 16 tokens), or
small (GPT-2-small's: vocab 50257, hidden 768, intermediate 3072, 12 layers,
12 heads, 4 kv heads; 181M parameters, untied head: a 1.45 GB f64 export, and
about 20 minutes for llama alone on 2 cores). --stream-only runs check 4 alone.

The batch: 2 rows of 16 token ids. The causal LMs' labels are the ids with some
set to -100 (the padded tail of row 1 and one in row 0), given unshifted as to
HuggingFace's labels= (which shifts by one and ignores -100); their loss in
PyTorch is the module's own labels= loss. BERT's row 1 is padded from position
12 (attention_mask 0, token id 0, the pad id), and row 0 holds the pad id
once where it is attended (a padded position feeds nothing to the classifier,
so only there does padding_idx change a gradient); its loss cross-entropy on 3
classes. Dropout is off. Each model is exported by the dynamo exporter
(optimize=False) and the legacy one (opset 17, training mode); an export that
dpc does not import is reported without failing the run; one that imports is
checked as a dynamo one. The legacy exporter is given the module called by
name (ByName: ids, and a decoder an attention mask of ones; its initializers
then are m.NAME) with eager attention (it cannot convert grouped-query SDPA),
and dpc is told what that export loses: --params-from (the module's
parameters) and --padding-idx (each embedding's padding_idx).

The float64 reference. HuggingFace computes RMSNorm, the rotary tables and the
attention softmax in float32 even in a .double() module (x.to(torch.float32),
.float(), softmax(dtype=torch.float32)); a float64 check against that would
show 1e-7. So the module is exported, and PyTorch's reference runs, under F64,
a TorchFunctionMode that turns every cast to float32 into one to float64
(Tensor.float, Tensor.to(torch.float32), any dtype=torch.float32 argument:
to, softmax): the file and the reference then compute the same function in
float64 throughout. One constant stays float32: the dynamo exporter's
decomposition of scaled_dot_product_attention scales q and k each by
sqrt(scaling), written as a float32 constant, which moves q and k's gradients
6e-8; the reference scales its attention by that constant squared
(as_exported, as bench/import_torch.py's GPT-2 GELU).

Checks, for each model and export:
  1. f64: the first step's gradient of every parameter (state-dict names)
     against PyTorch's under F64, each relative to the tensor's largest entry
     (or 1e-4 of the model's largest, as bench/import_torch.py): within 1e-10;
     and the first loss. An embedding with padding_idx (BERT's word embeddings,
     pad id 0, which the batch holds) has its padding row's gradient zero in
     PyTorch; the column "padding row" shows dpc's, which the gradients check
     holds to zero too (dpc reads padding_idx from the dynamo export, and is
     given it by --padding-idx for the legacy one; without it dpc trains that
     row), and beside it the error of every other gradient;
  2. the losses of 10 SGD steps (import_torch's LR) against PyTorch's: f64
     within 1e-4 relative, or twice PyTorch's own spread (threads, oneDNN,
     input moved 1e-15); f32 within 1e-4 or twice PyTorch's own f32 from f64;
  3. f32 under --device-mem at half of store-everything's peak (--checkpoint
     auto, --stream none): gradients bitwise as store-everything's;
  4. llama only (dynamo): f64 compiled under a --device-mem below its weights'
     bytes (65%; at the small size 90%, its embedding tied to its head, see
     streamed) streams its layers (stream_h2d_bytes > 0): its 10 losses
     within 1e-12 of the resident run's, the first step's gradients likewise.
Prints a table (markdown) for bench/RESULTS.md; exit status 1 if any check fails.
"""
import argparse
import copy
import json
import os
import sys
import time
import warnings

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "../tests/import"))
import reference  # noqa: E402  (a safetensors reader apart from dpc's)
from import_torch import LR, aliases, find, grad_error, half_peak, run, torch_variants, worst  # noqa: E402

MODELS = ["llama", "mistral", "qwen2", "neox", "bert"]
B, T = 2, 16


class F64(TorchFunctionMode):
    """every cast to float32 a cast to float64 (HuggingFace's float32 upcasts in a float64 module)"""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is torch.Tensor.float:
            return args[0].double()
        if func is torch.Tensor.to:
            args = tuple(torch.float64 if a is torch.float32 else a for a in args)
        if kwargs.get("dtype") is torch.float32:
            kwargs["dtype"] = torch.float64
        return func(*args, **kwargs)


class NoMode:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def mode(dtype):
    return F64() if dtype == torch.float64 else NoMode()


def config(name, size):
    import transformers as tr
    if size == "small":
        dims = dict(vocab_size=50257, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                    num_attention_heads=12, max_position_embeddings=1024)
        kv = 4
    else:
        dims = dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
                    max_position_embeddings=64)
        kv = 2
    dims["use_cache"] = False
    if name == "llama":
        return tr.LlamaForCausalLM(tr.LlamaConfig(num_key_value_heads=kv, **dims))
    if name == "mistral":
        return tr.MistralForCausalLM(tr.MistralConfig(num_key_value_heads=kv, sliding_window=8, **dims))
    if name == "qwen2":
        return tr.Qwen2ForCausalLM(tr.Qwen2Config(num_key_value_heads=kv, **dims))
    if name == "neox":
        return tr.GPTNeoXForCausalLM(tr.GPTNeoXConfig(hidden_dropout=0, attention_dropout=0, **dims))
    if name == "bert":
        return tr.BertForSequenceClassification(tr.BertConfig(hidden_dropout_prob=0, attention_probs_dropout_prob=0,
                                                              num_labels=3, **dims))
    raise SystemExit(f"no model {name}: {', '.join(MODELS)}")


def make(name, size="tiny"):
    """the module (float32, train mode), its inputs by ONNX name (ids first) and its labels"""
    torch.manual_seed(0)
    m = config(name, size).train()
    vocab = m.config.vocab_size
    ids = torch.randint(1, vocab, (B, T))
    if name == "bert":
        mask = torch.ones(B, T, dtype=torch.long)
        mask[1, 12:] = 0
        ids[1, 12:] = 0  # the pad token, BERT's padding_idx
        ids[0, 3] = 0  # and once where it is attended: its row's gradient then is zero only by padding_idx
        return m, {"input_ids": ids, "attention_mask": mask}, torch.tensor([2, 0][:B])
    labels = ids.clone()
    labels[1, 12:] = -100  # a padded tail
    labels[0, 5] = -100
    return m, {"input_ids": ids}, labels


def hf_loss(m, inputs, y):
    """the module's own loss: HuggingFace's labels= (causal LMs: shifted, -100 ignored; BERT: cross-entropy)"""
    return m(**inputs, labels=y).loss


def torch_grads(m, inputs, y, dtype):
    m.train()
    m.zero_grad()
    with mode(dtype):
        loss = hf_loss(m, inputs, y)
        loss.backward()
    return float(loss), {k: p.grad.detach().numpy().copy() for k, p in m.named_parameters() if p.grad is not None}


def torch_steps(m, inputs, y, dtype, steps=10):
    opt, losses = torch.optim.SGD(m.parameters(), lr=LR), []
    for _ in range(steps):
        loss, _ = torch_grads(m, inputs, y, dtype)
        losses.append(loss)
        opt.step()
    return losses


class ByName(torch.nn.Module):
    """the module called with its inputs by name, returning its logits: for the legacy exporter, which
    traces a positional call (the model's own signature would make logits_to_keep an input) and writes
    the initializers as m.NAME. A decoder gets an attention mask of ones: without one, and without a cache,
    HuggingFace looks for packed sequences in the positions with torch.diff, which the legacy exporter
    does not convert"""

    def __init__(self, m, names):
        super().__init__()
        self.m, self.names = m, names

    def forward(self, *args):
        kw = dict(zip(self.names, args))
        kw.setdefault("attention_mask", torch.ones_like(args[0]))
        return self.m(**kw).logits


def export(m, inputs, how, path, dtype):
    m.train()
    args, names = tuple(inputs.values()), list(inputs)
    with mode(dtype):
        if how == "dynamo":
            # the module itself, so that the initializers keep its state-dict names; its first output the logits
            torch.onnx.export(m, args, dynamo=True, optimize=False, input_names=names).save(path)
        else:
            # eager attention: the legacy exporter does not convert scaled_dot_product_attention with
            # grouped-query heads (enable_gqa); the same function
            m = copy.deepcopy(m)
            m.set_attn_implementation("eager")
            torch.onnx.export(ByName(m, names), args, path, dynamo=False, opset_version=17,
                              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                              input_names=names, output_names=["logits"])


def as_exported(m, how):
    """the float64 reference computing what the file holds: the dynamo exporter scales q and k each by
    sqrt(scaling) (PyTorch's decomposition of scaled_dot_product_attention), a float32 constant in the file,
    so the scores are scaled by that constant squared, 6e-8 from scaling; the module's attention then
    scales by the same"""
    if how == "dynamo":
        for mod in m.modules():
            if isinstance(getattr(mod, "scaling", None), float):
                mod.scaling = float(np.float32(np.sqrt(mod.scaling))) ** 2
    return m


def padding_rows(m):
    """(parameter name, padding_idx) of each embedding that has one"""
    names = {id(p): k for k, p in m.named_parameters()}
    return [(names[id(e.weight)], e.padding_idx) for e in m.modules()
            if isinstance(e, torch.nn.Embedding) and e.padding_idx is not None and id(e.weight) in names]


def dpc_grads(path, want, alias):
    got = {k[2:] if k.startswith("m.") else k: v for k, v in reference.read_safetensors(path).items()}  # ByName's
    return {k: find(got, k, alias) for k in want if find(got, k, alias) is not None}


def streamed(a, d, loss, row, fails):
    """llama's layers streamed through device slots under a budget below its weights (65% of them), against
    the resident run: f64, 10 SGD steps and the first step's gradients. At the tiny size the working set
    outweighs the weights, so a wider llama streams (hidden 128, intermediate 256, 6 layers). At the small
    size the embedding ties the head, as GPT-2's does, and the budget is 90% of the weights: only a loop's
    stacked parameters stream, and an untied embedding and head with their gradients (1.2 GB in f64) are more
    than the weights' 1.45 GB less the layers' slots, the tied table and its gradient (0.6 GB) are not."""
    torch.manual_seed(0)
    import transformers as tr
    if a.size == "tiny":
        m = tr.LlamaForCausalLM(tr.LlamaConfig(vocab_size=64, hidden_size=128, intermediate_size=256,
                                               num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                                               max_position_embeddings=64, use_cache=False))
    else:
        m = tr.LlamaForCausalLM(tr.LlamaConfig(vocab_size=50257, hidden_size=768, intermediate_size=3072,
                                               num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4,
                                               max_position_embeddings=1024, use_cache=False, tie_word_embeddings=True))
    _, inputs, y = make("llama", a.size)
    s = os.path.join(d, "stream")
    os.makedirs(s, exist_ok=True)
    np.save(f"{s}/input_ids.npy", inputs["input_ids"].numpy())
    np.save(f"{s}/y.npy", y.numpy())
    data = ["--data", f"{s}/input_ids.npy", "--labels", f"{s}/y.npy"]
    export(m.double(), inputs, "dynamo", f"{s}/m.onnx", torch.float64)
    run([a.dpc, f"{s}/m.onnx", "--target", "cpu", "--precision", "f64", "-o", f"{s}/resident",
         "--schedule-json", f"{s}/resident.json", *loss])
    weights = json.load(open(f"{s}/resident.json"))["peak_device_bytes"]["params"]
    budget = weights * (65 if a.size == "tiny" else 90) // 100
    try:
        run([a.dpc, f"{s}/m.onnx", "--target", "cpu", "--precision", "f64", "-o", f"{s}/streamed",
             "--device-mem", str(budget), *loss])
        out = {}
        for exe in ("resident", "streamed"):
            run([f"{s}/{exe}", "--steps", "1", "--lr", "0", "--dump-grads", f"{s}/{exe}.grads.safetensors"] + data)
            run([f"{s}/{exe}", "--steps", "10", "--lr", str(LR), "--log-json", f"{s}/{exe}.log.json",
                 "--summary-json", f"{s}/{exe}.summary.json"] + data)
            out[exe] = ([json.loads(line)["loss"] for line in open(f"{s}/{exe}.log.json")],
                        reference.read_safetensors(f"{s}/{exe}.grads.safetensors"),
                        json.load(open(f"{s}/{exe}.summary.json")))
        (lr_, gr, _), (ls, gs, ss) = out["resident"], out["streamed"]
        el = max(abs(u - v) / abs(u) for u, v in zip(lr_, ls)) if len(ls) == len(lr_) == 10 else float("nan")
        eg = max((worst(gr[k], gs[k], 1.0) for k in gr if k in gs), default=float("nan"))
        row["streamed"] = (f"{budget / 1e6:.2f} MB < {weights / 1e6:.2f} MB of weights: h2d "
                           f"{ss['stream_h2d_bytes'] / 1e6:.1f} MB, peak {ss['peak_device_bytes'] / 1e6:.2f} MB; "
                           f"10 losses {el:.0e}, grads {eg:.0e} from resident")
        if not (ss["stream_h2d_bytes"] > 0 and el <= 1e-12 and eg <= 1e-12 and gr.keys() == gs.keys()):
            fails.append(f"streamed: losses {el:.2e}, gradients {eg:.2e}, h2d {ss['stream_h2d_bytes']}")
        if ss["peak_device_bytes"] > budget:
            fails.append(f"streamed: measured peak {ss['peak_device_bytes']} over the budget {budget}")
    except RuntimeError as e:
        row["streamed"] = "FAILED"
        fails.append(f"streamed: {str(e).splitlines()[-1][:200]}")


def check(name, how, a, rows):
    dpc, size = a.dpc, a.size
    d = os.path.join(a.out, f"{name}-{how}")
    os.makedirs(d, exist_ok=True)
    row = {"model": name, "export": how}
    m0, inputs, y = make(name, size)
    alias = aliases(m0)
    for k, v in inputs.items():
        np.save(f"{d}/{k}.npy", v.numpy())
    np.save(f"{d}/y.npy", y.numpy())
    causal = name != "bert"
    if causal:
        data = ["--data", f"{d}/input_ids.npy", "--labels", f"{d}/y.npy"]
        loss = ["--loss", "causal_lm"]
    else:
        data = [a for k in inputs for a in ("--input", f"{k}={d}/{k}.npy")] + ["--labels", f"{d}/y.npy"]
        loss = []
    fails = []

    if how == "legacy":
        # what the legacy export does not record, given as docs/import.md says: the parameters (every other
        # initializer is a buffer, kept fixed) and each embedding's padding_idx; under ByName's m. prefix
        with open(f"{d}/params.txt", "w") as f:
            f.writelines(f"m.{k}\n" for k, _ in m0.named_parameters())
        loss = loss + ["--params-from", f"{d}/params.txt"]
        loss += [a for k, p in padding_rows(m0) for a in ("--padding-idx", f"m.{k}={p}")]
    # float64: export, import, the first step's gradients
    m64 = copy.deepcopy(m0).double()
    t = time.time()
    export(m64, inputs, how, f"{d}/m64.onnx", torch.float64)
    row["export s"] = round(time.time() - t, 1)
    t = time.time()
    try:
        run([dpc, f"{d}/m64.onnx", "--target", "cpu", "--precision", "f64", "-o", f"{d}/m64",
             "--schedule-json", f"{d}/m64.json", *loss])
    except RuntimeError as e:
        if how == "legacy":  # reported, not failed: the legacy export of the rotary models needs Sin and Cos
            err = [ln for ln in str(e).splitlines() if ln.strip()]
            row["result"] = "not imported: " + (err[-1][:200] if err else "?")
            rows.append(row)
            return True
        raise
    row["import s"] = round(time.time() - t, 1)
    dp = open(f"{d}/m64.dp").read()
    row["loops"] = " ".join(ln.split("..")[1].split()[0] for ln in dp.splitlines() if ln.startswith("  for "))
    run([f"{d}/m64", "--steps", "1", "--lr", "0", "--dump-grads", f"{d}/g64.safetensors",
         "--summary-json", f"{d}/s64.json"] + data)
    want_loss, want = torch_grads(as_exported(copy.deepcopy(m64), how), inputs, y, torch.float64)
    got = dpc_grads(f"{d}/g64.safetensors", want, alias)
    missing = sorted(set(want) - set(got))
    e64 = grad_error(want, got)
    got_loss = json.load(open(f"{d}/s64.json"))["loss_first"]
    eloss = abs(got_loss - want_loss) / abs(want_loss)
    row["f64 loss"] = f"{eloss:.1e}"
    row["f64 grads"] = f"{e64:.1e}" + (f" ({len(missing)} missing)" if missing else "")
    if missing or not e64 <= 1e-10:
        fails.append(f"f64 gradients {e64:.2e}, missing {missing[:5]}")
    if not eloss <= 1e-10:
        fails.append(f"f64 loss {got_loss!r} vs PyTorch's {want_loss!r}")
    pads = []
    for k, p in padding_rows(m0):
        if k in got and any(int(v.eq(p).sum()) for v in inputs.values() if v.dtype == torch.long):
            rest_w = {j: (np.delete(v, p, 0) if j == k else v) for j, v in want.items()}
            rest_g = {j: (np.delete(v, p, 0) if j == k else v) for j, v in got.items()}
            pads.append(f"{k}[{p}]: PyTorch {np.abs(want[k][p]).max():.0e}, dpc {np.abs(got[k][p]).max():.1e}; "
                        f"others {grad_error(rest_w, rest_g):.1e}")
    row["padding row"] = "; ".join(pads) or "-"

    # float32: store-everything, and under half its peak
    m32 = copy.deepcopy(m0)
    export(m32, inputs, how, f"{d}/m32.onnx", torch.float32)
    run([dpc, f"{d}/m32.onnx", "--target", "cpu", "-o", f"{d}/m32", "--checkpoint", "none",
         "--schedule-json", f"{d}/m32.json", *loss])
    run([f"{d}/m32", "--steps", "1", "--lr", "0", "--dump-grads", f"{d}/g32.safetensors"] + data)
    _, want32 = torch_grads(copy.deepcopy(m0), inputs, y, torch.float32)
    row["f32 grads"] = f"{grad_error(want32, dpc_grads(f'{d}/g32.safetensors', want32, alias)):.1e}"

    # 10 SGD steps
    def dpc_steps(exe, extra=()):
        run([exe, "--steps", "10", "--lr", str(LR), "--log-json", f"{exe}.log.json", *extra] + data)
        return [json.loads(line)["loss"] for line in open(f"{exe}.log.json")]

    v64 = torch_variants(lambda: torch_steps(as_exported(copy.deepcopy(m64), how), inputs, y, torch.float64))
    t64, d64 = v64[0], dpc_steps(f"{d}/m64")
    t32, d32 = torch_steps(copy.deepcopy(m0), inputs, y, torch.float32), dpc_steps(f"{d}/m32")
    rel = lambda p, q: max(abs(u - v) / abs(u) for u, v in zip(p, q))  # noqa: E731
    el64 = rel(t64, d64) if len(d64) == 10 else float("nan")
    own64 = max(rel(t64, v) for v in v64[1:])
    el32 = max(abs(u - v) for u, v in zip(t32, d32)) if len(d32) == 10 else float("nan")
    own32 = max(abs(u - v) for u, v in zip(t64, t32))
    row["10 steps f64 (PyTorch's own)"] = f"{el64:.1e} ({own64:.1e})"
    row["10 steps f32 (PyTorch's f32 vs f64)"] = f"{el32:.1e} ({own32:.1e})"
    if not (el64 <= 1e-4 or el64 <= 2 * own64):
        fails.append(f"10 SGD steps in f64: {el64:.2e} relative, PyTorch's own {own64:.2e}: {t64} vs {d64}")
    if not (el32 <= 1e-4 or el32 <= 2 * own32):
        fails.append(f"10 SGD steps in f32: {el32:.2e}, PyTorch's f32 vs f64 {own32:.2e}")

    half_peak(dpc, d, data, row, fails, loss)

    if name == "llama" and how == "dynamo" and not a.stream_only:
        streamed(a, d, loss, row, fails)
    row["result"] = "pass" if not fails else "FAIL: " + "; ".join(fails)
    rows.append(row)
    return not fails


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=MODELS)
    ap.add_argument("--size", choices=["tiny", "small"], default="tiny")
    ap.add_argument("--exporters", default="dynamo,legacy")
    ap.add_argument("--dpc", default=os.path.join(HERE, "../bin/dpc"))
    ap.add_argument("--out", default="/tmp/dpc-import-hf")
    ap.add_argument("--stream-only", action="store_true", help="the streamed llama alone (check 4)")
    a = ap.parse_args()
    a.dpc = os.path.abspath(a.dpc)
    if a.stream_only:
        row, fails = {"model": "llama", "export": "dynamo"}, []
        d = os.path.join(a.out, "llama-stream")
        os.makedirs(d, exist_ok=True)
        streamed(a, d, ["--loss", "causal_lm"], row, fails)
        print(json.dumps(row), "\n" + ("pass" if not fails else "FAIL: " + "; ".join(fails)))
        sys.exit(0 if not fails else 1)
    rows, ok = [], True
    for name in a.models:
        for how in a.exporters.split(","):
            try:
                good = check(name, how, a, rows)
            except Exception as e:  # noqa: BLE001: the table records it and goes on
                rows.append({"model": name, "export": how, "result": f"FAIL: {str(e)[-600:]}"})
                good = False
            ok &= good
            print(json.dumps(rows[-1]), flush=True)
    cols = ["model", "export", "loops", "f64 loss", "f64 grads", "padding row", "f32 grads",
            "10 steps f64 (PyTorch's own)", "10 steps f32 (PyTorch's f32 vs f64)", "peak MB", "half peak", "streamed",
            "export s", "import s", "result"]
    print(f"\nsize {a.size}\n\n| " + " | ".join(cols) + " |\n|" + " --- |" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")).replace("|", "/") for c in cols) + " |")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
