"""What an ONNX model computes, from onnx's own reference evaluator in
float64 (no PyTorch): the tests' reference for imported programs.

  loss(model, x, y, loss, train)  -> (the loss, {running statistic name: value after the step})

train=True runs BatchNormalization as PyTorch's train mode does (the
batch's statistics, and the running ones updated); False, with the running
ones. Dropout is never active here, so the tests' models that train hold
none.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

REALS = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16)


class Erf(OpRun):
    """erf in the input's precision (the evaluator's own rounds to float32)"""
    op_domain = ""

    def _run(self, x):
        import math
        return (np.vectorize(math.erf, otypes=[x.dtype])(x),)


class Pad(OpRun):
    """Pad whose pads may be negative (a crop, as the ONNX spec allows; the evaluator's own refuses them)"""
    op_domain = ""

    def _run(self, x, pads, constant_value=None, axes=None, mode=None):
        r = x.ndim
        axes = list(range(r)) if axes is None else [int(a) % r for a in axes]
        n = len(axes)
        before, after = [0] * r, [0] * r
        for i, a in enumerate(axes):
            before[a], after[a] = int(pads[i]), int(pads[i + n])
        x = x[tuple(slice(max(-b, 0), x.shape[k] - max(-e, 0)) for k, (b, e) in enumerate(zip(before, after)))]
        widths = [(max(b, 0), max(e, 0)) for b, e in zip(before, after)]
        mode = (mode or "constant").decode() if isinstance(mode, bytes) else (mode or "constant")
        if mode == "constant":
            c = 0 if constant_value is None else constant_value.reshape(-1)[0] if constant_value.size else 0
            return (np.pad(x, widths, mode="constant", constant_values=c).astype(x.dtype),)
        return (np.pad(x, widths, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode]),)


NEW_OPS = [Erf, Pad]



def to_f64(model):
    """the same model computing in float64: initializers, constants (ConstantOfShape's too), inputs and casts"""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for i, t in enumerate(g.initializer):
        if t.data_type in REALS:
            a = numpy_helper.to_array(t).astype(np.float64)
            g.initializer[i].CopyFrom(numpy_helper.from_array(a, t.name))
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type in REALS:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for n in g.node:
        for at in n.attribute:
            if n.op_type in ("Constant", "ConstantOfShape") and at.name == "value" and at.t.data_type in REALS:
                a = numpy_helper.to_array(at.t).astype(np.float64)
                at.t.CopyFrom(numpy_helper.from_array(a, at.t.name))
            if n.op_type == "Cast" and at.name == "to" and at.i in REALS:
                at.i = TensorProto.DOUBLE

    return m


def training_mode(model):
    """BatchNormalization in training mode, its running statistics as outputs"""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    stats = []
    for n in m.graph.node:
        if n.op_type == "BatchNormalization":
            for at in list(n.attribute):
                if at.name == "training_mode":
                    n.attribute.remove(at)
            n.attribute.append(helper.make_attribute("training_mode", 1))
            while len(n.output) < 3:
                n.output.append("")
            for k in (1, 2):
                if not n.output[k]:
                    n.output[k] = f"{n.input[2 + k]}__after"
                stats.append((n.input[2 + k], n.output[k]))
                m.graph.output.append(helper.make_empty_tensor_value_info(n.output[k]))
    return m, stats


def cross_entropy(logits, labels):
    z = logits - logits.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return -np.take_along_axis(logp, labels[..., None].astype(np.int64), axis=-1).mean()


def loss(model, x, y, kind="cross_entropy", train=False):
    m = to_f64(model)
    stats = []
    if train:
        m, stats = training_mode(m)
    inp = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}][0]
    if x.dtype.kind == "f":
        x = x.astype(np.float64)
    outs = ReferenceEvaluator(m, new_ops=NEW_OPS).run(None, {inp: x})
    names = [o.name for o in m.graph.output]
    out = outs[0]
    if kind == "cross_entropy":
        v = cross_entropy(out, y)
    elif kind == "mse":
        v = ((out - y) ** 2).mean()
    else:
        v = float(out)
    return float(v), {s: outs[names.index(o)] for s, o in stats}


def read_safetensors(path):
    """a safetensors file's tensors (F32, F64, BF16), read here apart from dpc's own readers"""
    import json
    import struct
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        raw = data[8 + n + a:8 + n + b]
        if t["dtype"] == "BF16":
            arr = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(raw, {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64}[t["dtype"]])
        out[name] = arr.reshape(t["shape"])
    return out
