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
    """conv, batchnorm, relu, pools (one in ceil_mode), residual blocks, asymmetric pads, concat, global pool,
    flatten, gemm"""
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
        inits += [numpy_helper.from_array(a.astype(np.float32), f"layer.{i}.bn.{n}") for n, a in (
            ("weight", 1 + 0.1 * R.standard_normal(K)), ("bias", 0.1 * R.standard_normal(K)),
            ("running_mean", 0.1 * R.standard_normal(K)), ("running_var", 1 + 0.2 * R.random(K)))]
        nodes += [n("Conv", [f"h{i}", f"layer.{i}.conv.weight"], [f"l{i}c"], pads=[1, 1, 1, 1],
                    name=f"/layer.{i}/conv/Conv"),
                  n("BatchNormalization", [f"l{i}c"] + [f"layer.{i}.bn.{n}" for n in
                                                        ("weight", "bias", "running_mean", "running_var")],
                    [f"l{i}b"], epsilon=1e-5, momentum=0.9, name=f"/layer.{i}/bn/BatchNormalization"),
                  n("Relu", [f"l{i}b"], [f"l{i}r"], name=f"/layer.{i}/relu/Relu"),
                  n("Add", [f"h{i}", f"l{i}r"], [f"h{i + 1}"], name=f"/layer.{i}/Add")]
    nodes += [
        n("Conv", ["h6", "conv2.weight"], ["c2"], pads=[0, 1, 0, 1], name="/conv2/Conv"),
        n("Conv", ["h6", "conv3.weight"], ["c3"], pads=[1, 0, 1, 0], name="/conv3/Conv"),
        n("AveragePool", ["c3"], ["a3"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
          count_include_pad=1, name="/avg/AveragePool"),
        n("Tanh", ["c2"], ["t2"]),
        n("Concat", ["t2", "a3"], ["cat"], axis=1, name="/cat/Concat"),
        # ceil_mode (SqueezeNet's, GoogLeNet's): 4 windows a side of 8 where rounding down makes 3
        n("MaxPool", ["cat"], ["catp"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, name="/ceil/MaxPool"),
        n("GlobalAveragePool", ["catp"], ["gp"]),
        n("Flatten", ["gp"], ["fl"], axis=1),
        n("Gemm", ["fl", "fc.weight", "fc.bias"], ["g"], transB=1, name="/fc/Gemm"),
        # Expand of a parameter to the batch (ViT's class token): its gradient summed over the batch
        const("batch_shape", np.array([N, 5], np.int64)),
        n("Expand", ["shift", "batch_shape"], ["shifts"], name="/shift/Expand"),
        n("Add", ["g", "shifts"], ["logits"]),
    ]
    inits.append(w("shift", 1, 5))
    x = R.standard_normal((N, C, S, S))
    y = R.integers(0, 5, N).astype(np.int64)
    save(out, "cnn", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, C, S, S])],
         [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [N, 5])], inits, x, y)


def gpt(out):
    """embeddings, NL layers each with layernorm, attention written out (split, reshape, transpose, a
    causal mask by Trilu and Where, softmax), an erf GELU and residual adds, then a head"""
    B, T, D, H, V, NL = 2, 8, 32, 2, 11, 8
    hd = D // H
    n = helper.make_node
    inits = [w("wte", V, D), w("wpe", T, D), w("head.weight", D, V)]
    nodes = [const("pos", np.arange(T, dtype=np.int64)),
             n("Gather", ["wte", "ids"], ["tok"], axis=0, name="/wte/Gather"),
             n("Gather", ["wpe", "pos"], ["pe"], axis=0, name="/wpe/Gather"),
             n("Add", ["tok", "pe"], ["h0_0"], name="/embed/Add")]
    for i in range(NL):
        p, h, o = f"h.{i}.", f"h{i}_0", f"h{i + 1}_0"
        inits += [numpy_helper.from_array((1 + R.standard_normal(D) * 0.1).astype(np.float32), p + "ln.weight"),
                  w(p + "ln.bias", D, scale=0.1), w(p + "attn.c_attn.weight", D, 3 * D),
                  w(p + "attn.c_attn.bias", 3 * D), w(p + "attn.c_proj.weight", D, D),
                  w(p + "mlp.fc.weight", D, 2 * D), w(p + "mlp.proj.weight", 2 * D, D)]
        v = lambda s: f"L{i}_{s}"  # noqa: E731
        nodes += [
            n("LayerNormalization", [h, p + "ln.weight", p + "ln.bias"], [v("ln")], axis=-1, epsilon=1e-5,
              name=f"/h.{i}/ln/LN"),
            n("MatMul", [v("ln"), p + "attn.c_attn.weight"], [v("qkv0")]),
            n("Add", [v("qkv0"), p + "attn.c_attn.bias"], [v("qkv")]),
            const(v("split"), np.array([D, D, D], np.int64)),
            n("Split", [v("qkv"), v("split")], [v("q0"), v("k0"), v("v0")], axis=2),
            const(v("heads"), np.array([B, T, H, hd], np.int64)),
        ]
        for t in ("q", "k", "v"):
            nodes += [n("Reshape", [v(t + "0"), v("heads")], [v(t + "1")]),
                      n("Transpose", [v(t + "1")], [v(t)], perm=[0, 2, 1, 3])]
        nodes += [
            n("Transpose", [v("k")], [v("kt")], perm=[0, 1, 3, 2]),
            n("MatMul", [v("q"), v("kt")], [v("s0")]),
            const(v("scale"), np.array(1 / np.sqrt(hd), np.float32)),
            n("Mul", [v("s0"), v("scale")], [v("s")]),
            const(v("ones"), np.ones((T, T), np.float32)),
            n("Trilu", [v("ones")], [v("tril")], upper=0),
            const(v("zero"), np.array(0, np.float32)),
            n("Equal", [v("tril"), v("zero")], [v("masked")]),
            const(v("ninf"), np.array(-np.inf, np.float32)),
            n("Where", [v("masked"), v("ninf"), v("s")], [v("sm")]),
            n("Softmax", [v("sm")], [v("p")], axis=-1),
            n("MatMul", [v("p"), v("v")], [v("o0")]),
            n("Transpose", [v("o0")], [v("o1")], perm=[0, 2, 1, 3]),
            const(v("flat"), np.array([B, T, D], np.int64)),
            n("Reshape", [v("o1"), v("flat")], [v("o")]),
            n("MatMul", [v("o"), p + "attn.c_proj.weight"], [v("a")]),
            n("Add", [h, v("a")], [v("h1_")]),
            n("MatMul", [v("h1_"), p + "mlp.fc.weight"], [v("f0")]),
            const(v("rt2"), np.array(np.sqrt(2), np.float32)),
            n("Div", [v("f0"), v("rt2")], [v("f1")]), n("Erf", [v("f1")], [v("f2")]),
            const(v("one"), np.array(1, np.float32)), const(v("half"), np.array(0.5, np.float32)),
            n("Add", [v("f2"), v("one")], [v("f3")]), n("Mul", [v("f0"), v("f3")], [v("f4")]),
            n("Mul", [v("f4"), v("half")], [v("f5")]),
            n("MatMul", [v("f5"), p + "mlp.proj.weight"], [v("m")]),
            n("Add", [v("h1_"), v("m")], [o], name=f"/h.{i}/Add_1"),
        ]
    nodes.append(n("MatMul", [f"h{NL}_0", "head.weight"], ["logits"]))
    x = R.integers(0, V, (B, T)).astype(np.int64)
    y = R.integers(0, V, (B, T)).astype(np.int64)
    save(out, "gpt", nodes, [helper.make_tensor_value_info("ids", TensorProto.INT64, [B, T])],
         [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [B, T, V])], inits, x, y)


def seq(out):
    """what the dynamo exporter writes: SplitToSequence and SequenceAt, CastLike, Shape of a computed value,
    softmax guarded by IsNaN and Where, And of masks, a Gather of constant position ids [1, T]; mse loss"""
    B, T, D = 2, 6, 4
    n = helper.make_node
    inits = [w("attn.weight", D, 3 * D), w("pos.weight", T, D), w("out.weight", D, D)]
    nodes = [
        const("ids", np.arange(T, dtype=np.int64).reshape(1, T)),
        n("Gather", ["pos.weight", "ids"], ["pe"], axis=0),
        n("Add", ["x", "pe"], ["h"]),
        n("MatMul", ["h", "attn.weight"], ["qkv"]),
        const("d", np.array(D, np.int64)),
        n("SplitToSequence", ["qkv", "d"], ["parts"], axis=2),
        const("i0", np.array(0, np.int64)), const("i1", np.array(1, np.int64)), const("i2", np.array(2, np.int64)),
        n("SequenceAt", ["parts", "i0"], ["q"]), n("SequenceAt", ["parts", "i1"], ["k"]),
        n("SequenceAt", ["parts", "i2"], ["v"]),
        n("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        n("MatMul", ["q", "kt"], ["s"]),
        const("ones", np.ones((T, T), bool)), const("low", np.tril(np.ones((T, T), bool))),
        n("And", ["ones", "low"], ["keep"]),
        const("ninf", np.array(-np.inf, np.float32)),
        n("Where", ["keep", "s", "ninf"], ["sm"]),
        n("Softmax", ["sm"], ["p"], axis=-1),
        n("IsNaN", ["p"], ["bad"]),
        const("zero", np.array(0, np.float32)),
        n("Where", ["bad", "zero", "p"], ["p2"]),
        n("MatMul", ["p2", "v"], ["o"]),
        n("Shape", ["o"], ["oshape"]),
        n("Reshape", ["o", "oshape"], ["o2"]),
        n("CastLike", ["o2", "x"], ["o3"]),
        n("MatMul", ["o3", "out.weight"], ["y"]),
    ]
    x = R.standard_normal((B, T, D))
    y = R.standard_normal((B, T, D))
    save(out, "seq", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, T, D])],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, T, D])], inits, x, y)


def mask(out):
    """attention over 80 positions with a causal mask as exporters fold it: a [1, 80, 80] constant, 0 on and
    below the diagonal and float32's lowest above, more elements than a literal, written from arange"""
    B, T, D = 2, 80, 16
    m = np.where(np.arange(T)[None, :] > np.arange(T)[:, None], np.finfo(np.float32).min, 0).astype(np.float32)
    n = helper.make_node
    nodes = [n("MatMul", ["x", "q.weight"], ["q"]),
             n("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
             n("MatMul", ["q", "xt"], ["s"]),
             const("causal", m[None]),
             n("Add", ["s", "causal"], ["sm"]),
             n("Softmax", ["sm"], ["p"], axis=-1),
             n("MatMul", ["p", "x"], ["y"])]
    x = R.standard_normal((B, T, D))
    y = R.standard_normal((B, T, D))
    save(out, "mask", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, T, D])],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, T, D])], [w("q.weight", D, D)], x, y)


def castmask(out):
    """an attention mask as BERT's legacy export reads it: an int64 input cast to BOOL, the tokens' embeddings
    kept where it is set (Where), then a head; its ids, mask and labels as castmask.ids/mask/y.npy"""
    B, T, V, D = 2, 6, 11, 4
    n = helper.make_node
    nodes = [n("Gather", ["wte", "ids"], ["emb"]),
             n("Cast", ["mask"], ["keep"], to=TensorProto.BOOL),
             n("Unsqueeze", ["keep", "axis"], ["keep3"]),
             const("axis", np.array([2], np.int64)),
             const("zero", np.array(0.0, np.float32)),
             n("Where", ["keep3", "emb", "zero"], ["kept"]),
             n("MatMul", ["kept", "head"], ["logits"])]
    nodes = [nodes[3], nodes[4]] + nodes[:3] + nodes[5:]
    g = helper.make_graph(nodes, "castmask", [helper.make_tensor_value_info("ids", TensorProto.INT64, [B, T]),
                                              helper.make_tensor_value_info("mask", TensorProto.INT64, [B, T])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [B, T, V])],
                          [w("wte", V, D), w("head", D, V)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tests/import")
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, "castmask.onnx"))
    np.save(os.path.join(out, "castmask.ids.npy"), R.integers(0, V, (B, T)))
    np.save(os.path.join(out, "castmask.mask.npy"), np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0]], np.int64))
    np.save(os.path.join(out, "castmask.y.npy"), R.integers(0, V, (B, T)))


def bufmod(out):
    """a normalisation mean, a registered buffer, before a linear layer: bufmod.onnx marks it a buffer as the
    dynamo exporter does (a value_info's metadata), bufplain.onnx does not (the legacy exporter's)"""
    B, D, C = 4, 3, 2
    n = helper.make_node
    nodes = [n("Sub", ["x", "mean"], ["centred"]), n("MatMul", ["centred", "w"], ["logits"])]
    for name, marked in (("bufmod", True), ("bufplain", False)):
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, D])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [B, C])],
                              [w("mean", D), w("w", D, C)])
        if marked:
            for t, kind in (("mean", "BUFFER"), ("w", "PARAMETER")):
                vi = helper.make_tensor_value_info(t, TensorProto.FLOAT, [D] if t == "mean" else [D, C])
                p = vi.metadata_props.add()
                p.key, p.value = "pkg.torch.export.graph_signature.InputSpec.kind", kind
                g.value_info.append(vi)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tests/import")
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(out, name + ".onnx"))
    np.save(os.path.join(out, "bufmod.x.npy"), R.standard_normal((B, D)))
    np.save(os.path.join(out, "bufmod.y.npy"), R.integers(0, C, (B,)))


def gathers(out):
    """gathers and scatters of constant indices as exporters write them (an attention mask's GatherND, a
    token-type GatherElements, a Gather on axis 1, ScatterND of rows, ScatterElements, slices with a step),
    each read by an mse
    loss: the gradient of a place read twice adds up, a place written over gets none"""
    B, D, H = 4, 6, 8
    n = helper.make_node
    i64 = lambda a: np.array(a, np.int64)  # noqa: E731
    nodes = [n("MatMul", ["x", "w"], ["h"]),
             const("nd_idx", i64([[0, 1], [2, 3], [3, 7], [0, 1]])),
             n("GatherND", ["h", "nd_idx"], ["g1"]),
             const("ax1", i64([1])), n("Unsqueeze", ["g1", "ax1"], ["g1u"]),
             const("s3", i64([B, 2, 4])), n("Reshape", ["h", "s3"], ["h3"]),
             const("nd_b", i64([[1], [0], [1], [1]])),
             n("GatherND", ["h3", "nd_b"], ["g2"], batch_dims=1),
             const("el_idx", i64([[0, 7, 7], [1, 2, 3], [-1, 0, 4], [5, 5, 6]])),
             n("GatherElements", ["h", "el_idx"], ["g3"], axis=1),
             const("cols", i64([[5, 1, -7]])), n("Gather", ["h", "cols"], ["g4"], axis=1),
             const("s43", i64([B, 3])), n("Reshape", ["g4", "s43"], ["g4r"]),
             const("z", i64([0])), const("two", i64([2])), n("Slice", ["h", "z", "two", "z"], ["top"]),
             const("k2", np.array(2.0, np.float32)), n("Mul", ["top", "k2"], ["upd"]),
             const("rows", i64([[1], [3]])), n("ScatterND", ["h", "rows", "upd"], ["s1"]),
             n("Slice", ["h", "z", "two", "ax1"], ["left"]), n("Tanh", ["left"], ["updl"]),
             const("el_s", i64([[3, 4], [0, 1], [7, 6], [2, 5]])),
             n("ScatterElements", ["h", "el_s", "updl"], ["s2"], axis=1),
             # slices with a step (Swin's patch merging): every other column, and three backwards
             const("st", i64([1])), const("en", i64([8])), n("Slice", ["h", "st", "en", "ax1", "two"], ["sl1"]),
             const("st2", i64([6])), const("en2", i64([0])), const("back", i64([-2])),
             n("Slice", ["h", "st2", "en2", "ax1", "back"], ["sl2"]),
             n("Concat", ["g1u", "g2", "g3", "g4r", "s1", "s2", "sl1", "sl2"], ["y"], axis=1)]
    x = R.standard_normal((B, D))
    y = R.standard_normal((B, 34))
    save(out, "gathers", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, D])],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, 34])], [w("w", D, H)], x, y)


def elementwise(out):
    """the elementwise ops rotary embeddings, gated MLPs and masks export to (Sin, Cos, Neg, Reciprocal,
    Sigmoid, Softplus, Exp, Log, Abs, Min, Max, Clip, Where, Mod both ways), Pad with a value and a crop,
    Einsum (a matmul, a batched one, a transpose, a sum), and Range and ConstantOfShape folded from shapes"""
    B, D = 4, 6
    n = helper.make_node
    f32 = lambda v: np.array(v, np.float32)  # noqa: E731
    nodes = [n("MatMul", ["x", "w"], ["h"]),
             n("Sin", ["h"], ["e0"]), n("Cos", ["h"], ["e1"]), n("Neg", ["h"], ["e2"]),
             n("Mul", ["h", "h"], ["hh"]), const("one", f32(1)), n("Add", ["hh", "one"], ["hh1"]),
             n("Reciprocal", ["hh1"], ["e3"]), n("Sigmoid", ["h"], ["e4"]),
             const("big", f32(30)), n("Mul", ["h", "big"], ["h30"]), n("Softplus", ["h30"], ["e5"]),
             const("half", f32(0.5)), n("Mul", ["h", "half"], ["hh2"]), n("Exp", ["hh2"], ["e6"]),
             n("Log", ["hh1"], ["e7"]), n("Abs", ["h"], ["e8"]),
             const("c3", f32(0.3)), n("Min", ["h", "c3"], ["e9"]),
             const("cm2", f32(-0.2)), n("Max", ["h", "cm2"], ["e10"]),
             const("lo", f32(-0.5)), n("Clip", ["h", "lo", "half"], ["e11"]),
             const("zero", f32(0)), n("Greater", ["h", "zero"], ["pos"]),
             const("tenth", f32(0.1)), n("Mul", ["h", "tenth"], ["leak"]), n("Where", ["pos", "h", "leak"], ["e12"]),
             const("c7", f32(0.7)), n("Mod", ["h", "c7"], ["e13"]),
             n("Mod", ["h", "c7"], ["e14"], fmod=1),
             n("Mod", ["c7", "hh1"], ["e15"]),
             # Range and ConstantOfShape of the shape: folded at import
             n("Shape", ["h"], ["sh"]), const("one_i", np.array(1, np.int64)),
             n("Gather", ["sh", "one_i"], ["d"]), const("zero_i", np.array(0, np.int64)),
             n("Range", ["zero_i", "d", "one_i"], ["pos_ids"]), n("Cast", ["pos_ids"], ["pos_f"], to=TensorProto.FLOAT),
             n("Add", ["h", "pos_f"], ["hp"]),
             n("ConstantOfShape", ["sh"], ["ones"], value=numpy_helper.from_array(f32([1.5]), "v")),
             n("Mul", ["hp", "ones"], ["e16"]),
             # Einsum: a matmul, a batched one, a transpose (an ellipsis), a sum
             n("Einsum", ["h", "w2"], ["e17"], equation="bi,ij->bj"),
             const("s3", np.array([B, 2, 3], np.int64)), n("Reshape", ["h", "s3"], ["h3"]),
             n("Einsum", ["h3", "h3"], ["bb"], equation="bij,bkj->bik"),
             n("Einsum", ["h3"], ["tt"], equation="...ij->...ji"),
             n("Einsum", ["h3"], ["ss"], equation="bij->b"),
             const("s4", np.array([B, 4], np.int64)), n("Reshape", ["bb", "s4"], ["e18"]),
             const("s6", np.array([B, 6], np.int64)), n("Reshape", ["tt", "s6"], ["e19"]),
             const("s1", np.array([B, 1], np.int64)), n("Reshape", ["ss", "s1"], ["e20"]),
             # Pad: 1 before and 2 after on axis 1 with 0.25; on axis 0 one row cropped before, one added after
             const("pads", np.array([-1, 1, 1, 2], np.int64)), const("pv", f32(0.25)),
             n("Pad", ["h", "pads", "pv"], ["e21"]),
             n("Concat", [f"e{i}" for i in range(22)], ["y"], axis=1)]
    x = R.standard_normal((B, D))
    width = 6 * 18 + 4 + 6 + 1 + 9
    y = R.standard_normal((B, width))
    save(out, "elementwise", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, D])],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, width])], [w("w", D, D), w("w2", D, D)], x, y)


def gelutanh(out):
    """GPT-2's MLP as HuggingFace's Conv1D and NewGELUActivation export it: a Gemm with its bias on the rows,
    a Reshape to [B, T, 4D], GELU's tanh form written out (Pow, Mul, Add, Tanh), the Reshape back, a Gemm;
    again wide enough for the GPU's GEMMs (gelutanh_big, compiled only)"""
    n = helper.make_node
    f32 = lambda v: np.array(v, np.float32)  # noqa: E731
    for name, B, T, D in (("gelutanh", 2, 3, 4), ("gelutanh_big", 4, 64, 256)):
        F = 4 * D
        nodes = [const("rows", np.array([B * T, D], np.int64)), n("Reshape", ["x", "rows"], ["x2"]),
                 n("Gemm", ["x2", "fc.weight", "fc.bias"], ["h2"]),
                 const("btf", np.array([B, T, F], np.int64)), n("Reshape", ["h2", "btf"], ["h"]),
                 const("half", f32(0.5)), n("Mul", ["h", "half"], ["hh"]),
                 const("three", f32(3)), n("Pow", ["h", "three"], ["h3"]),
                 const("c", f32(0.044715)), n("Mul", ["h3", "c"], ["h3c"]), n("Add", ["h", "h3c"], ["in"]),
                 const("k", f32(np.sqrt(2 / np.pi))), n("Mul", ["k", "in"], ["ink"]),
                 n("Tanh", ["ink"], ["t"]), const("one", f32(1)), n("Add", ["one", "t"], ["t1"]),
                 n("Mul", ["hh", "t1"], ["g"], name="/mlp/act/Mul_3"),
                 const("rowsf", np.array([B * T, F], np.int64)), n("Reshape", ["g", "rowsf"], ["g2"]),
                 n("Gemm", ["g2", "proj.weight", "proj.bias"], ["y2"]),
                 const("btd", np.array([B, T, D], np.int64)), n("Reshape", ["y2", "btd"], ["y"])]
        inits = [w("fc.weight", D, F), w("fc.bias", F, scale=0.1), w("proj.weight", F, D), w("proj.bias", D, scale=0.1)]
        x = R.standard_normal((B, T, D))
        y = R.standard_normal((B, T, D))
        save(out, name, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, T, D])],
             [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, T, D])], inits, x, y)


def pademb(out):
    """an embedding with padding_idx 0: pademb.onnx carries it as the dynamo exporter does (the node's PyTorch
    call in its metadata), padplain.onnx does not (the legacy exporter's); its ids hold 0 in three places"""
    B, T, V, D = 2, 5, 7, 3
    n = helper.make_node
    for name, marked in (("pademb", True), ("padplain", False)):
        emb = n("Gather", ["wte", "ids"], ["emb"], name="node_embedding")
        if marked:
            p = emb.metadata_props.add()
            p.key = "pkg.torch.onnx.fx_node"
            p.value = ("%embedding : [num_users=1] = call_function[target=torch.ops.aten.embedding.default]"
                       "(args = (%p_wte, %ids, 0), kwargs = {})")
        g = helper.make_graph([emb, n("MatMul", ["emb", "head"], ["logits"])], name,
                              [helper.make_tensor_value_info("ids", TensorProto.INT64, [B, T])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [B, T, V])],
                              [w("wte", V, D), w("head", D, V)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tests/import")
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(out, name + ".onnx"))
    np.save(os.path.join(out, "pademb.x.npy"), np.array([[0, 3, 1, 0, 6], [2, 0, 5, 4, 1]], np.int64))
    np.save(os.path.join(out, "pademb.y.npy"), R.integers(0, V, (B, T)))


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cnn(out)
    gpt(out)
    seq(out)
    mask(out)
    castmask(out)
    bufmod(out)
    gathers(out)
    elementwise(out)
    gelutanh(out)
    pademb(out)
