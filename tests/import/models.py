#!/usr/bin/env python3
"""Small ONNX models for tests/import, built with onnx.helper (no PyTorch).

  python3 tests/import/models.py OUTDIR

Each is written as OUTDIR/NAME.onnx with the data its test feeds
(NAME.x.npy, NAME.y.npy). The weights are random with a fixed seed; the
ops are those torchvision's CNNs and a GPT export to.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

R = np.random.default_rng(7)
OPSET = 17


def w(name, *shape, scale=0.3):
    return numpy_helper.from_array((R.standard_normal(shape) * scale).astype(np.float32), name)


def const(name, arr):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(arr), name + "_v"))


def save(out, name, nodes, inputs, outputs, inits, x, y):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tests/import")
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, name + ".onnx"))
    np.save(os.path.join(out, name + ".x.npy"), x)
    np.save(os.path.join(out, name + ".y.npy"), y)


def cnn(out):
    """conv, batchnorm, relu, pools, residual blocks, asymmetric pads, concat, global pool, flatten, gemm"""
    N, C, S, K = 4, 3, 8, 8
    bn = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in (
        ("bn.weight", 1 + 0.1 * R.standard_normal(K)), ("bn.bias", 0.1 * R.standard_normal(K)),
        ("bn.running_mean", 0.1 * R.standard_normal(K)), ("bn.running_var", 1 + 0.2 * R.random(K)))]
    inits = [w("conv1.weight", K, C, 3, 3), w("conv1.bias", K), w("conv2.weight", 6, K, 1, 3),
             w("conv3.weight", 6, K, 3, 1), w("fc.weight", 5, 12), w("fc.bias", 5)] + bn
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], pads=[1, 1, 1, 1], name="/conv1/Conv"),
        n("BatchNormalization", ["c1", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
          ["b1"], epsilon=1e-5, momentum=0.9, name="/bn/BatchNormalization"),
        n("Relu", ["b1"], ["r1"], name="/relu/Relu"),
        n("MaxPool", ["r1"], ["h0"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], name="/pool/MaxPool"),
    ]
    for i in range(6):  # residual blocks
        inits.append(w(f"layer.{i}.conv.weight", K, K, 3, 3, scale=0.15))
        nodes += [n("Conv", [f"h{i}", f"layer.{i}.conv.weight"], [f"l{i}c"], pads=[1, 1, 1, 1],
                    name=f"/layer.{i}/conv/Conv"),
                  n("Relu", [f"l{i}c"], [f"l{i}r"], name=f"/layer.{i}/relu/Relu"),
                  n("Add", [f"h{i}", f"l{i}r"], [f"h{i + 1}"], name=f"/layer.{i}/Add")]
    nodes += [
        n("Conv", ["h6", "conv2.weight"], ["c2"], pads=[0, 1, 0, 1], name="/conv2/Conv"),
        n("Conv", ["h6", "conv3.weight"], ["c3"], pads=[1, 0, 1, 0], name="/conv3/Conv"),
        n("AveragePool", ["c3"], ["a3"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
          count_include_pad=1, name="/avg/AveragePool"),
        n("Tanh", ["c2"], ["t2"]),
        n("Concat", ["t2", "a3"], ["cat"], axis=1, name="/cat/Concat"),
        n("GlobalAveragePool", ["cat"], ["gp"]),
        n("Flatten", ["gp"], ["fl"], axis=1),
        n("Gemm", ["fl", "fc.weight", "fc.bias"], ["logits"], transB=1, name="/fc/Gemm"),
    ]
    x = R.standard_normal((N, C, S, S))
    y = R.integers(0, 5, N).astype(np.int64)
    save(out, "cnn", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, C, S, S])],
         [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [N, 5])], inits, x, y)


def gpt(out):
    """embeddings, layernorm, attention written out (split, reshape, transpose, a causal mask by
    Trilu and Where, softmax), an erf GELU, a residual stream and a head"""
    B, T, D, H, V = 2, 8, 8, 2, 11
    hd = D // H
    inits = [w("wte", V, D), w("wpe", T, D), w("ln.weight", D, scale=0.1), w("ln.bias", D, scale=0.1),
             w("attn.c_attn.weight", D, 3 * D), w("attn.c_attn.bias", 3 * D), w("attn.c_proj.weight", D, D),
             w("mlp.fc.weight", D, 2 * D), w("mlp.proj.weight", 2 * D, D), w("head.weight", D, V)]
    inits[2] = numpy_helper.from_array((1 + R.standard_normal(D) * 0.1).astype(np.float32), "ln.weight")
    n = helper.make_node
    nodes = [
        const("pos", np.arange(T, dtype=np.int64)),
        n("Gather", ["wte", "ids"], ["tok"], axis=0, name="/wte/Gather"),
        n("Gather", ["wpe", "pos"], ["pe"], axis=0, name="/wpe/Gather"),
        n("Add", ["tok", "pe"], ["h0"]),
        n("LayerNormalization", ["h0", "ln.weight", "ln.bias"], ["ln"], axis=-1, epsilon=1e-5, name="/ln/LN"),
        n("MatMul", ["ln", "attn.c_attn.weight"], ["qkv0"]),
        n("Add", ["qkv0", "attn.c_attn.bias"], ["qkv"]),
        const("split", np.array([D, D, D], np.int64)),
        n("Split", ["qkv", "split"], ["q0", "k0", "v0"], axis=2),
        const("heads", np.array([B, T, H, hd], np.int64)),
    ]
    for t in ("q", "k", "v"):
        nodes += [n("Reshape", [t + "0", "heads"], [t + "1"]),
                  n("Transpose", [t + "1"], [t], perm=[0, 2, 1, 3])]
    nodes += [
        n("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        n("MatMul", ["q", "kt"], ["s0"]),
        const("scale", np.array(1 / np.sqrt(hd), np.float32)),
        n("Mul", ["s0", "scale"], ["s"]),
        const("ones", np.ones((T, T), np.float32)),
        n("Trilu", ["ones"], ["tril"], upper=0),
        const("zero", np.array(0, np.float32)),
        n("Equal", ["tril", "zero"], ["masked"]),
        const("ninf", np.array(-np.inf, np.float32)),
        n("Where", ["masked", "ninf", "s"], ["sm"]),
        n("Softmax", ["sm"], ["p"], axis=-1),
        n("MatMul", ["p", "v"], ["o0"]),
        n("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
        const("flat", np.array([B, T, D], np.int64)),
        n("Reshape", ["o1", "flat"], ["o"]),
        n("MatMul", ["o", "attn.c_proj.weight"], ["a"]),
        n("Add", ["h0", "a"], ["h1"]),
        n("MatMul", ["h1", "mlp.fc.weight"], ["f0"]),
        const("rt2", np.array(np.sqrt(2), np.float32)),
        n("Div", ["f0", "rt2"], ["f1"]), n("Erf", ["f1"], ["f2"]),
        const("one", np.array(1, np.float32)), const("half", np.array(0.5, np.float32)),
        n("Add", ["f2", "one"], ["f3"]), n("Mul", ["f0", "f3"], ["f4"]), n("Mul", ["f4", "half"], ["f5"]),
        n("MatMul", ["f5", "mlp.proj.weight"], ["m"]),
        n("Add", ["h1", "m"], ["h2"]),
        n("MatMul", ["h2", "head.weight"], ["logits"]),
    ]
    x = R.integers(0, V, (B, T)).astype(np.int64)
    y = R.integers(0, V, (B, T)).astype(np.int64)
    save(out, "gpt", nodes, [helper.make_tensor_value_info("ids", TensorProto.INT64, [B, T])],
         [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [B, T, V])], inits, x, y)


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cnn(out)
    gpt(out)
