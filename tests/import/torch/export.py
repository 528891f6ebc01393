#!/usr/bin/env python3
"""Small models exported by PyTorch's own exporters, with PyTorch's results, for tests/import.

  python3 tests/import/torch/export.py [OUTDIR]    (default: this folder)

Needs PyTorch, torchvision and transformers (bench/import_torch.py's venv);
make test does not: it reads what this writes, which is committed.
For each model, in float64 (so that the check is 1e-10, not f32's noise):
  NAME.onnx               the export (legacy exporter in training mode, opset 17;
                          HuggingFace's GPT-2 through the dynamo exporter, optimize=False)
  NAME.x.npy, NAME.y.npy  one batch and its labels
  NAME.ref.npz            PyTorch's loss on it (cross-entropy) and the gradient of every
                          parameter, under its state-dict name (train mode, dropout off),
                          and the other names of a tied one
The models: a DenseNet from torchvision's own class (growth 4, two blocks of 2 layers:
convolution, batch normalization with batch statistics, concatenation, pools) and
HuggingFace's GPT-2 (2 layers of 32, a vocabulary of 64: one loop, a tied head).
"""
import json
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../bench"))
import import_torch  # noqa: E402  (PyTorch's gradients and tied names, as the bench takes them)

warnings.filterwarnings("ignore")
out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)


def reference(name, m, x, y):
    loss, grads = import_torch.torch_grads(m, x, y)
    # the other names of a tied tensor (GPT-2's lm_head.weight is transformer.wte.weight)
    aliases = {k: v for k, v in import_torch.aliases(m).items() if k in grads and len(v) > 1}
    np.savez(os.path.join(out, name + ".ref.npz"), __loss__=np.array(loss),
             __aliases__=np.array(json.dumps(aliases)), **grads)
    np.save(os.path.join(out, name + ".x.npy"), x.numpy())
    np.save(os.path.join(out, name + ".y.npy"), y.numpy())


def densenet():
    import torchvision
    m = torchvision.models.DenseNet(growth_rate=4, block_config=(2, 2), num_init_features=8, bn_size=2,
                                    num_classes=5).double()
    x, y = torch.randn(4, 3, 16, 16, dtype=torch.float64), torch.randint(0, 5, (4,))
    torch.onnx.export(m.train(), (x,), os.path.join(out, "densenet.onnx"), dynamo=False, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["x"], output_names=["logits"])
    reference("densenet", m, x, y)


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0,
                     embd_pdrop=0, attn_pdrop=0, use_cache=False)
    m = GPT2LMHeadModel(cfg).double()
    x, y = torch.randint(0, 64, (2, 16)), torch.randint(0, 64, (2, 16))
    torch.onnx.export(m.train(), (x,), dynamo=True, optimize=False, input_names=["x"]).save(
        os.path.join(out, "gpt2.onnx"))
    # the reference computes what the file holds: the exporter writes gelu_new's constants in float32
    reference("gpt2", import_torch.as_exported(m), x, y)


densenet()
gpt2()
