#!/usr/bin/env python3
"""Small models exported by PyTorch's own exporters, with PyTorch's results, for tests/import.

  python3 tests/import/torch/export.py [OUTDIR [NAME ...]]    (default: this folder, every model)

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
convolution, batch normalization with batch statistics, concatenation, pools),
HuggingFace's GPT-2 (2 layers of 32, a vocabulary of 64: one loop, a tied head), and
HuggingFace's Llama and BERT (issue 61; bench/import_hf.py's models, smaller), both through
the dynamo exporter, under bench/import_hf.py's F64 (HuggingFace's float32 upcasts made
float64: the file and the reference compute in float64 throughout), each seeded alone:
  llama  LlamaForCausalLM (2 layers of 16, 4 heads, 2 kv heads, vocabulary 64): RMSNorm,
         rotary embedding, grouped-query attention, SiLU MLP; the loss HuggingFace's labels=
         (dpc --loss causal_lm): NAME.y.npy the ids with three -100 (a padded tail and
         one more), unshifted; the reference's attention scaled by the float32 constants
         the exporter writes (import_hf.as_exported)
  bert   BertForSequenceClassification (2 layers of 16, 3 classes) of two inputs, ids
         (NAME.x.npy, name input_ids) and attention_mask (NAME.mask.npy): row 1 padded
         from position 12 (mask 0, id 0, BERT's pad id and its word embeddings'
         padding_idx, whose row's gradient is zero in PyTorch), and id 0 once in row 0 where
         it is attended (a padded position feeds nothing to the [CLS] output, so only there
         does padding_idx change a gradient); cross-entropy
llama's and bert's .onnx without the exporter's debugging metadata of each node (stack trace,
namespace, class hierarchy, name scopes: 70% of the bytes); its fx_node, which the converter
reads, stays. densenet and gpt2 draw from one seed in turn: regenerate them together.
"""
import json
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../bench"))
import import_torch  # noqa: E402  (PyTorch's gradients and tied names, as the bench takes them)
import import_hf  # noqa: E402  (HuggingFace's models in float64 throughout, as that bench takes them)

warnings.filterwarnings("ignore")
out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
names = sys.argv[2:] or ["densenet", "gpt2", "llama", "bert"]
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


DEBUG = {"pkg.torch.onnx.stack_trace", "namespace", "pkg.torch.onnx.class_hierarchy", "pkg.torch.onnx.name_scopes"}


def hf(name, m, inputs, y):
    """a HuggingFace model exported by dynamo in float64 throughout, with the reference of its own labels= loss"""
    import onnx
    m = m.double().train()
    path = os.path.join(out, name + ".onnx")
    import_hf.export(m, inputs, "dynamo", path, torch.float64)
    # the exporter's debugging metadata, 70% of the file, dropped: fx_node stays (the converter reads it)
    f = onnx.load(path)
    for n in f.graph.node:
        keep = [p for p in n.metadata_props if p.key not in DEBUG]
        del n.metadata_props[:]
        n.metadata_props.extend(keep)
    onnx.save(f, path)
    ref = import_hf.as_exported(m, "dynamo")
    loss, grads = import_hf.torch_grads(ref, inputs, y, torch.float64)
    aliases = {k: v for k, v in import_torch.aliases(ref).items() if k in grads and len(v) > 1}
    np.savez(os.path.join(out, name + ".ref.npz"), __loss__=np.array(loss),
             __aliases__=np.array(json.dumps(aliases)), **grads)
    files = {"input_ids": "x", "attention_mask": "mask"}
    for k, v in inputs.items():
        np.save(os.path.join(out, f"{name}.{files[k]}.npy"), v.numpy())
    np.save(os.path.join(out, name + ".y.npy"), y.numpy())


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    m = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                     use_cache=False))
    x = torch.randint(1, 64, (2, 16))
    y = x.clone()
    y[1, 12:] = -100
    y[0, 5] = -100
    hf("llama", m, {"input_ids": x}, y)


def bert():
    from transformers import BertConfig, BertForSequenceClassification
    torch.manual_seed(0)
    m = BertForSequenceClassification(BertConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                                                 num_hidden_layers=2, num_attention_heads=4,
                                                 max_position_embeddings=32, hidden_dropout_prob=0,
                                                 attention_probs_dropout_prob=0, num_labels=3, use_cache=False))
    x, mask = torch.randint(1, 64, (2, 16)), torch.ones(2, 16, dtype=torch.long)
    x[1, 12:], mask[1, 12:] = 0, 0
    x[0, 3] = 0  # the pad id where it is attended: its row's gradient is zero only by padding_idx
    hf("bert", m, {"input_ids": x, "attention_mask": mask}, torch.tensor([2, 0]))


for f in names:
    globals()[f]()
