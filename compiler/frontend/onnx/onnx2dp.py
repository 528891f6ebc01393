#!/usr/bin/env python3
"""onnx2dp: an ONNX inference graph as a dpc training program.

  python3 onnx2dp.py model.onnx -o model.dp [--weights model.safetensors]
          [--loss cross_entropy|mse|none|causal_lm] [--ignore-index N] [--output NAME] [--shape NAME=D0,D1,...]
          [--freeze NAME ...] [--params-from FILE] [--train-buffer NAME ...] [--padding-idx NAME=IDX ...]
          [--batchnorm train|frozen]

writes a readable .dp program and a safetensors file of the model's
initializers under their names in the ONNX file (PyTorch's state-dict names
where the exporter kept them). The program starts from that file (`weights`)
and each parameter loads its tensor by that name (`load("conv1.weight")`),
so the executable's --save writes the same names, for load_state_dict.

Weights stay parameters: only constants (Constant nodes, integer
initializers, shape arithmetic) are folded, with onnx's reference evaluator.
Errors name the file and, for an op dpc cannot express, every such node.
Exit status: 0, 1 (a model dpc cannot train), 2 (a file that cannot be read).
"""
import argparse
import json
import mmap
import os
import re
import struct
import sys

try:
    import numpy as np
    import onnx
    import loops
    from google.protobuf.message import DecodeError
    from onnx import numpy_helper, shape_inference
except ImportError as e:  # the message dpc shows
    sys.stderr.write(f"onnx2dp: error: the Python package '{e.name}' is not installed; run `make deps` "
                     f"(it installs compiler/frontend/onnx/requirements.txt)\n")
    sys.exit(3)

KNOWN_OPSET = 23  # the newest default-domain opset whose ops this converter was written against
BIG_LITERAL = 4096  # constants with more elements go into the weights file as buffers
F32_MAX = float(np.finfo(np.float32).max)
# a model's initializers as arrays, by id of the model, for its second conversion (read_initializers)
READ = {}


class ImportError_(Exception):
    pass


class Downstream(Exception):
    """a node whose input an unsupported node should have made: not listed again"""


def fail(msg, status=1):
    sys.stderr.write(f"onnx2dp: error: {msg}\n")
    sys.exit(status)


class V:
    """A value of the graph: a constant (folded) or a dp expression."""

    def __init__(self, expr=None, shape=None, dtype="f32", const=None, decl=None):
        self.expr = expr  # a dp name or expression
        self.shape = tuple(shape) if shape is not None else None
        self.dtype = dtype  # 'f32' or 'i32'
        self.const = const  # a numpy array when folded
        self.decl = decl or expr  # a parameter's or buffer's declared name (expr is W[l] for a layer of it)

    @property
    def is_const(self):
        return self.const is not None


def num(x):
    """a number as dp reads it: float32 values (attributes, f32 constants) in their shortest form"""
    if isinstance(x, (np.floating, np.ndarray)) and np.asarray(x).dtype == np.float32:
        # the float32 value itself, in its shortest form when that is exact (0.5, 2), so that an
        # f64 build computes what the file says
        v = float(np.float32(x))
        x = f32(x) if f32(x) == v else v
    x = float(x)
    if np.isinf(x):  # dp numbers are finite; softmax after a huge negative gives 0 exactly
        return "-1e30" if x < 0 else "1e30"
    if abs(x) > F32_MAX:  # float64's extremes (an f64 export's masks) as float32's, finite in every build
        x = F32_MAX if x > 0 else -F32_MAX
    if np.isnan(x):
        raise ImportError_("a NaN constant")
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def f32(x):
    """the value an exporter most likely had for float32 x: the shortest decimal that rounds to it (1e-5),
    or, where that takes 8 digits or more, a fraction of a small denominator that does (1/6, HardSigmoid's
    alpha), as a double"""
    v = np.float32(x)
    short = np.format_float_scientific(v, unique=True)
    if len(short.split("e")[0].replace("-", "").replace(".", "")) >= 8:
        for q in range(2, 13):
            p = round(float(v) * q)
            if p and np.float32(p / q) == v:
                return p / q
    return float(short)


def dims(shape):
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def sanitize(name):
    s = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_")
    s = re.sub(r"_+", "_", s)
    if not s or s[0].isdigit():
        s = "v_" + s
    return s


DP_WORDS = {"const", "param", "input", "fn", "loss", "let", "for", "in", "return", "report", "buffer", "update",
            "f32", "bf16", "f64", "i32", "zeros", "ones", "normal", "uniform", "nodecay"}
DP_BUILTINS = {"relu", "tanh", "sigmoid", "exp", "log", "sqrt", "abs", "sign", "erf", "gelu", "pow", "maximum",
               "minimum", "where", "sum", "mean", "max", "min", "reshape", "transpose", "softmax", "log_softmax",
               "embed", "attention", "layernorm", "arange", "cast", "argmax", "dropout", "training", "mse",
               "cross_entropy", "pad", "concat", "conv2d", "max_pool2d", "avg_pool2d", "groupnorm", "upsample",
               "neg", "sin", "cos"}


class Converter:
    def __init__(self, model, path, args):
        self.model = model
        self.path = path
        self.args = args
        self.vals = {}
        self.names = set(DP_WORDS | DP_BUILTINS)
        self.decls = []  # lines before the loss block
        self.body = []  # statements of the loss block
        self.updates = []
        self.weights = {}  # dp name -> numpy array, for the safetensors file
        self.notes = []
        self.unsupported = []
        self.bn_folded = False
        self.params = []
        self.buffers = []
        self.stat = {"nodes": 0}
        self.reshaped = {}  # a reshape's name -> the value it reshapes
        self.indent = "  "
        self.layer = None  # the loop variable while a loop's body is converted

    # ---- names and declarations ----
    def fresh(self, hint):
        base = sanitize(hint)[:48].rstrip("_") or "v"
        name, k = base, 1
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def let(self, hint, expr, shape, dtype="f32"):
        name = self.fresh(hint)
        self.body.append(f"{self.indent}let {name} = {expr}")
        return V(name, shape, dtype)

    def declare_weight(self, init_name, arr, kind):
        name = self.fresh(init_name)
        shape = arr.shape
        if len(shape) == 0:
            raise ImportError_(f"initializer {init_name} is a scalar; dp parameters have rank 1 or more")
        self.weights[init_name] = arr
        self.decls.append(f"{kind} {name} : f32{dims(shape)} = load(\"{init_name}\")")
        (self.params if kind == "param" else self.buffers).append(name)
        return V(name, shape, "f32")

    def literal(self, arr, hint="const"):
        """a constant as a dp expression: a number, a list, or a buffer from the weights file"""
        arr = np.asarray(arr)
        if arr.dtype == bool:
            arr = arr.astype(np.float32)
        if arr.ndim == 0 or arr.size == 1 and arr.ndim == 0:
            return V(num(arr.reshape(())), (), "f32")
        if arr.size <= BIG_LITERAL and 0 not in arr.shape:
            def rec(a):
                if a.ndim == 1:
                    return "[" + ", ".join(num(v) for v in a) + "]"
                return "[" + ", ".join(rec(s) for s in a) + "]"
            name = self.fresh(hint)
            self.body.append(f"{self.indent}let {name} = {rec(arr.astype(np.float64))}")
            v = V(name, arr.shape, "f32")
        elif (tri := self.triangular(arr)) is not None:
            name = self.fresh(hint)
            self.body.append(f"{self.indent}let {name} = {tri}")
            v = V(name, arr.shape, "f32")
        else:
            name = self.fresh(hint)
            # finite in float32, as the executable checks what it loads (an f64 export's masks hold float64's -max);
            # an f64 export's in float64, which an f64 build then reads unrounded
            wide = np.float64 if arr.dtype == np.float64 else np.float32
            if np.issubdtype(arr.dtype, np.integer) and arr.size and np.abs(arr).max() > 2 ** 24:
                raise ImportError_(f"a constant of {arr.size} integers up to {int(np.abs(arr).max())}: dpc carries "
                                   f"a large one as float32, exact only to 2^24")
            self.weights[name] = np.nan_to_num(np.clip(arr.astype(np.float64), -F32_MAX, F32_MAX)).astype(wide)
            self.decls.append(f"buffer {name} : f32{dims(arr.shape)} = load(\"{name}\")   # a constant of the model")
            self.buffers.append(name)
            v = V(name, arr.shape, "f32")
        if np.issubdtype(arr.dtype, np.integer):
            v = V(f"cast({v.expr}, i32)", arr.shape, "i32")
        return v

    def triangular(self, arr):
        """a large constant that is one value where column - row <= k in its last two axes and another
        elsewhere, its other axes 1 (a causal mask, additive or of 0 and 1), as a dp expression on arange:
        not a buffer, which the weights file and --save would carry beside the model's own tensors"""
        if arr.ndim < 2 or any(d != 1 for d in arr.shape[:-2]) or np.issubdtype(arr.dtype, np.integer):
            return None
        T, S = arr.shape[-2:]
        m = np.nan_to_num(np.clip(arr.astype(np.float64).reshape(T, S), -F32_MAX, F32_MAX))
        a = m[0, 0]
        run = int(np.argmax(m[0] != a)) if (m[0] != a).any() else S
        b = m[0, run] if run < S else None
        if b is None:
            return None
        k = run - 1
        want = np.where(np.arange(S)[None, :] - np.arange(T)[:, None] > k, b, a)
        if not np.array_equal(want, m):
            return None
        r, c = f"reshape(cast(arange({T}), f32), [{T}, 1])", f"reshape(cast(arange({S}), f32), [1, {S}])"
        return f"reshape(where({c} - {r} > {k}, {num(np.float32(b))}, {num(np.float32(a))}), {dims(arr.shape)})"

    def tensor(self, v, hint="c"):
        """v as a dp tensor expression (constants written out)"""
        if v.is_const:
            return self.literal(v.const, hint)
        return v

    def x(self, v):
        """v's expression, a constant written in place"""
        if v.is_const and np.asarray(v.const).ndim == 0:
            return num(np.asarray(v.const))
        return self.tensor(v).expr

    # ---- the graph ----
    def run(self):
        g = self.model.graph
        inits = {t.name: t for t in g.initializer}
        self.shapes, self.elem = {}, {}
        for vi in list(g.value_info) + list(g.input) + list(g.output):
            t = vi.type.tensor_type
            self.elem[vi.name] = t.elem_type
            if t.HasField("shape"):
                self.shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        self.consumers = {}
        for node in g.node:
            for i, n in enumerate(node.input):
                self.consumers.setdefault(n, []).append((node, i))
        self.inference_patterns(g)
        self.paddings()
        self.inputs(g, inits)
        self.read_initializers(inits)
        self.torch_buffers = self.buffers_of_module(g, inits)
        # the initializers that train: real, of rank 1 or more, read by a node, not a PyTorch buffer; the
        # others are constants (a buffer's subgraph, a rotary table from inv_freq, folds with the rest)
        self.trainable = {n for n, a in self.arrays.items()
                          if np.issubdtype(a.dtype, np.floating) and a.ndim > 0 and n in self.consumers and
                          n not in self.torch_buffers}
        self.real_constants(inits)
        known = {n: a for n, a in self.arrays.items() if n not in self.trainable}
        for n, a in known.items():
            self.vals[n] = V(const=a)
        # the constants first: every node of constant inputs (shape arithmetic, masks) folds now, so that
        # what is left repeats layer by layer where the model does
        nodes = []
        for node in g.node:
            if self.constant(node, known):
                if node.op_type in ("Shape", "Size"):  # of a value not computed yet: from shape inference
                    shape = np.array(self.shapes[node.input[0]], np.int64)
                    at = {x.name: x.i for x in node.attribute}
                    shape = shape[at.get("start", 0):at.get("end", len(shape))]
                    self.vals[node.output[0]] = V(const=shape if node.op_type == "Shape" else
                                                  np.array(int(np.prod(shape)), np.int64))
                    self.stat["nodes"] += 1
                else:
                    self.convert(node)
                for o in node.output:
                    if o and self.vals.get(o) is not None and self.vals[o].is_const:
                        known[o] = np.asarray(self.vals[o].const)
            else:
                nodes.append(node)
        nodes = self.gelu_tanh(nodes, known)
        values = dict(known, **{n: self.arrays[n] for n in self.trainable})
        self.loops = [] if self.args.no_loops else loops.find(nodes, values, self.trainable,
                                                               {o.name for o in g.output})
        self.initializers(g, inits, {n for L in self.loops for names in L.stacked.values() for n in names})
        starts = {L.start: L for L in self.loops}
        i = 0
        while i < len(nodes):
            if i in starts:
                self.loop(nodes, starts[i])
                i = starts[i].end
                continue
            self.convert(nodes[i])
            i += 1
        unused = set(self.padding) - self.padding_used
        if unused:
            fail(f"--padding-idx names no embedding table of {self.path}: {', '.join(sorted(unused))}")
        if self.unsupported:
            lines = "\n  ".join(self.unsupported)
            fail(f"{self.path}: {len(self.unsupported)} node(s) dpc cannot express:\n  {lines}")
        return self.finish(g)

    RANDOM = ("Dropout", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
              "Bernoulli")

    def constant(self, node, known):
        """the node's results are constants: its inputs all are, or it asks for a shape, which is fixed"""
        if node.op_type in self.RANDOM or node.domain not in ("", "ai.onnx"):
            return False
        if node.op_type in ("Shape", "Size"):
            s = self.shapes.get(node.input[0])
            return s is not None and None not in s
        return all(not n or n in known for n in node.input)

    def gelu_tanh(self, nodes, known):
        """GPT-2's GELU written out, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (HuggingFace's
        NewGELUActivation: Pow, three Mul, two Add and a Tanh), as one Gelu node of the tanh form: dpc's
        gelu(), which a GPU's GEMM before it applies in its epilogue. Only where every constant is GPT-2's,
        nothing else reads a step between x and the result, and the graph computes in float32 (or 16 bits):
        the exporter writes the constants in float32, gelu()'s there; a float64 export keeps its GELU as
        written (its float32 constants are 5e-8 from gelu()'s float64 ones)."""
        made = {o: n for n in nodes for o in n.output}
        readers = {}
        for n in nodes:
            for x in n.input:
                readers.setdefault(x, []).append(n)

        def scalar(name, want):
            v = known.get(name)
            if v is None or np.asarray(v).size != 1:
                return False
            return abs(float(np.asarray(v).reshape(-1)[0]) - want) <= 1e-5 * abs(want)

        def other(node, op, want):
            """node is op of the constant want and one more input: that input's name, else None"""
            if node is None or node.op_type != op or len(node.input) != 2:
                return None
            a, b = node.input
            return a if scalar(b, want) else b if scalar(a, want) else None

        def only(name, reader):
            return [id(r) for r in readers.get(name, [])] == [id(reader)]

        gone, swap = set(), {}
        low = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)
        for t in nodes:
            if t.op_type != "Tanh" or self.elem.get(t.input[0]) not in low:
                continue
            s = made.get(t.input[0])
            inner = made.get(other(s, "Mul", float(np.sqrt(2 / np.pi))))
            if inner is None or inner.op_type != "Add" or len(inner.input) != 2:
                continue
            for x, q in (inner.input, inner.input[::-1]):
                cube = made.get(other(made.get(q), "Mul", 0.044715))
                if cube is not None and cube.op_type == "Pow" and cube.input[0] == x and scalar(cube.input[1], 3.0):
                    break
            else:
                continue
            plus = (readers.get(t.output[0]) or [None])[0]
            if other(plus, "Add", 1.0) != t.output[0]:
                continue
            out = (readers.get(plus.output[0]) or [None])[0]
            if out is None or out.op_type != "Mul" or len(out.input) != 2:
                continue
            half = made.get(out.input[1] if out.input[0] == plus.output[0] else out.input[0])
            steps = [(cube, made[q]), (made[q], inner), (inner, s), (s, t), (t, plus), (plus, out), (half, out)]
            if other(half, "Mul", 0.5) != x or not all(only(a.output[0], b) for a, b in steps):
                continue
            gone.update(id(a) for a, _ in steps)
            # x a reshape that keeps rows (a Conv1D's view of its GEMM's result): the GELU on the rows, then the
            # reshape, so that the GELU follows the GEMM's bias as the GPU's epilogue takes it
            view = made.get(x)
            if view is not None and view.op_type == "Reshape" and self.keeps_rows(view) and \
                    all(id(r) in (id(cube), id(inner), id(half)) for r in readers.get(x, [])):
                rows = x + "_gelu_rows"
                swap[id(out)] = [onnx.helper.make_node("Gelu", [view.input[0]], [rows], name=out.name, approximate="tanh"),
                                 onnx.helper.make_node("Reshape", [rows, view.input[1]], [out.output[0]], name=view.name)]
                gone.add(id(view))
            else:
                swap[id(out)] = [onnx.helper.make_node("Gelu", [x], [out.output[0]], name=out.name, approximate="tanh")]
        if swap:
            self.notes.append(f"{len(swap)} GELU(s) written out in GPT-2's tanh form (from "
                              f"'{next(iter(swap.values()))[0].name}') read as gelu()")
        return [m for n in nodes if id(n) not in gone for m in swap.get(id(n), [n])]

    def keeps_rows(self, node):
        """a Reshape whose input and output have one last dimension, both known (from shape inference)"""
        a, b = self.shapes.get(node.input[0]), self.shapes.get(node.output[0])
        return bool(a) and bool(b) and None not in a and None not in b and a[-1] == b[-1]

    def inference_patterns(self, g):
        """what an inference export did that training cannot undo, said in the program's header (and by -v)"""
        folded = [n.name or n.output[0] for n in g.node if n.op_type in ("Conv", "Gemm") and
                  any("batch_norm" in p.value.lower() or "batchnorm" in p.value.lower() for p in n.metadata_props)]
        if folded:
            self.notes.append(f"{len(folded)} convolution(s) hold a batch normalization folded in (from "
                              f"'{folded[0]}'): they train as plain convolutions, not as PyTorch's train mode; "
                              f"export with optimize=False (dynamo) or training=TrainingMode.TRAINING (legacy)")
        infer = [n for n in g.node if n.op_type == "BatchNormalization" and
                 any(a.name == "training_mode" and a.i == 0 for a in n.attribute)]
        if infer and self.args.batchnorm == "train":
            self.notes.append(f"{len(infer)} BatchNormalization node(s) were exported in inference mode; they train "
                              f"with batch statistics as PyTorch's train mode does (--batchnorm frozen keeps the "
                              f"running ones)")

    def convert(self, node, inputs=None):
        """one node, its inputs renamed where inputs says (a loop's carried values)"""
        self.stat["nodes"] += 1
        try:
            if inputs:
                node = onnx.NodeProto.FromString(node.SerializeToString())
                for j, name in inputs.items():
                    node.input[j] = name
            self.node(node)
        except (ImportError_, Downstream) as e:
            if isinstance(e, ImportError_):
                self.unsupported.append(f"{self.describe(node)}: {e}")
            elif node.domain not in ("", "ai.onnx") or not hasattr(self, "op_" + node.op_type):
                # after a node that failed, an op dpc lacks is listed too: every one of them at once
                self.unsupported.append(f"{self.describe(node)}: dpc has no such op")
            for o in node.output:
                self.vals[o] = None

    def loop(self, nodes, L):
        """the blocks L covers as one loop over their stacked initializers: block 0's nodes converted
        once, each initializer of it read as W[l], the carried values rebound at the body's end"""
        l = self.fresh("l")
        for x0, names in L.stacked.items():
            arrs = [self.arrays[n] for n in names]
            kind = self.weight_kind(x0)
            pat = loops.layer_pattern(names)  # loops.check made sure there is one
            dp = self.fresh(pat.split("{")[0] + pat.split("}")[1])
            shape = arrs[0].shape
            for n, a in zip(names, arrs):
                self.weights[n] = a
            self.decls.append(f"{kind} {dp} : f32[{L.count}]{dims(shape)} = load(\"{pat}\")")
            (self.params if kind == "param" else self.buffers).append(dp)
            self.vals[x0] = V(f"{dp}[{l}]", shape, decl=dp)
        carry, inputs = {}, {}
        for at, x0 in L.initial.items():
            v = self.vals.get(x0)
            if v is None:
                for i in range(L.period):
                    self.convert(nodes[L.start + i])  # listed as not computed, like the rest
                return
            c = self.let(x0 + "_carried", self.x(v), self.shape_of(v), v.dtype)
            carry[at] = c
        for (i, j), at in L.carried.items():
            syn = f"__carried_{i}_{j}"
            self.vals[syn] = carry[at]
            inputs.setdefault(i, {})[j] = syn
        self.body.append(f"  for {l} in 0..{L.count} {{   # {L.count} blocks of {L.period} nodes, from "
                         f"'{nodes[L.start].name or nodes[L.start].output[0]}'")
        self.indent, self.layer = "    ", l
        for i in range(L.period):
            self.convert(nodes[L.start + i], inputs.get(i))
        for at, c in carry.items():
            v = self.vals.get(nodes[L.start + at[0]].output[at[1]])
            if v is not None:
                self.body.append(f"    {c.expr} = {self.x(v)}")
        self.indent, self.layer = "  ", None
        self.body.append("  }")
        self.stat["nodes"] += L.period * (L.count - 1)
        for at, name in L.outputs.items():
            self.vals[name] = carry[at]

    def describe(self, node):
        shapes = []
        for n in node.input:
            v = self.vals.get(n)
            if not n:
                shapes.append("-")
            elif v is None:
                s = self.shapes.get(n)  # after a node that failed: what shape inference says
                shapes.append(dims(s) if s is not None and None not in s else "?")
            else:
                shape = np.asarray(v.const).shape if v.is_const else v.shape
                shapes.append(("const " if v.is_const else "") + (dims(shape) if shape is not None else "?"))
        return f"node '{node.name or node.output[0]}' ({node.op_type}) with inputs {', '.join(shapes) or 'none'}"

    def inputs(self, g, inits):
        """the graph's inputs, their dimensions fixed (by the file, or by --shape in load_model)"""
        for inp in g.input:
            if inp.name in inits:
                continue
            t = inp.type.tensor_type
            shape = []
            for d in t.shape.dim:
                if d.HasField("dim_value") and d.dim_value > 0:
                    shape.append(d.dim_value)
                else:
                    fail(f"{self.path}: input '{inp.name}' has a dynamic dimension "
                         f"'{d.dim_param or '?'}'; fix it with --shape {inp.name}=D0,D1,...")
            et = t.elem_type
            if et in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                      onnx.TensorProto.BFLOAT16):
                dt = "f32"
            elif et in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
                dt = "i32"
            else:
                fail(f"{self.path}: input '{inp.name}' has element type "
                     f"{onnx.TensorProto.DataType.Name(et)}; dpc takes real and integer inputs")
            name = self.fresh(inp.name)
            self.decls.append(f"input {name} : {dt}{dims(shape)}")
            self.vals[inp.name] = V(name, shape, dt)

    KIND = "pkg.torch.export.graph_signature.InputSpec.kind"

    def buffers_of_module(self, g, inits):
        """the initializers PyTorch registered as buffers, kept fixed: those the dynamo exporter marks so, or
        with --params-from those it does not name; never BatchNormalization's running statistics (buffers
        it updates), nor what --train-buffer names"""
        marked = {vi.name for vi in g.value_info if vi.name in inits and
                  any(p.key == self.KIND and p.value == "BUFFER" for p in vi.metadata_props)}
        knows = any(p.key == self.KIND for vi in g.value_info for p in vi.metadata_props)
        if self.args.params_from:
            params = read_names(self.args.params_from)
            if not params & set(inits):
                fail(f"--params-from {self.args.params_from} names none of the initializers of {self.path}")
            marked |= {n for n in inits if n not in params}
            knows = True
        stats = {n for node in g.node if node.op_type == "BatchNormalization" for n in node.input[3:5]}
        train = set(self.args.train_buffer or [])
        wrong = train - (marked - stats)
        if wrong:
            fail(f"--train-buffer names no PyTorch buffer of {self.path}: {', '.join(sorted(wrong))}")
        buffers = marked - stats - train
        real = {n for n in buffers if n in self.arrays and np.issubdtype(self.arrays[n].dtype, np.floating)}
        if real:
            self.notes.append(f"kept fixed, as PyTorch's buffers (--train-buffer NAME trains one): "
                              f"{', '.join(sorted(real))}")
        elif not knows:
            self.notes.append("this export does not say which initializers are PyTorch buffers (the legacy exporter "
                              "does not): every real one is trained; --params-from FILE names the parameters")
        return buffers

    def read_initializers(self, inits):
        # read once per model: --flat converts it a second time (ResNet-152: 0.14 s of reading); nothing writes
        # into these arrays (stacking and folding make new ones)
        self.left_out = LEFT_OUT.get(id(self.model), (None, {}))[1]
        if id(self.model) in READ:
            self.arrays, self.stood = dict(READ[id(self.model)][0]), set(READ[id(self.model)][1])
            return
        self.arrays, self.stood = {}, set()
        for name, t in inits.items():
            stand = self.stand_in(t) if self.args.no_weights and name in self.consumers else None
            if stand is not None:
                self.stood.add(name)
            self.arrays[name] = stand if stand is not None else self.array(name, t)
        READ[id(self.model)] = dict(self.arrays), set(self.stood)

    def array(self, name, t):
        try:
            if name in self.left_out:  # its raw data where the slim read left it (read_model)
                whole = onnx.TensorProto()
                whole.CopyFrom(t)
                start, end = self.left_out[name]
                with open(LEFT_OUT[id(self.model)][0], "rb") as f:
                    f.seek(start)
                    whole.raw_data = f.read(end - start)
                t = whole
            return numpy_helper.to_array(t, base_dir=os.path.dirname(os.path.abspath(self.path)))
        except Exception as e:
            fail(f"{self.path}: initializer '{name}' cannot be read: {e}", 2)

    STAND_INS = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
                 onnx.TensorProto.FLOAT16: np.float16}

    def stand_in(self, t):
        """--no-weights: a large real initializer as zeros of its type and shape that take no memory, where
        it may train (its values are then never read: only written to the weights file, which is not written);
        a constant's real values replace it (real_constants). ResNet-152: 0.13 s of reading 240 MB."""
        dt = self.STAND_INS.get(t.data_type)
        if dt is None or not t.dims or int(np.prod(t.dims, dtype=np.int64)) <= BIG_LITERAL:
            return None
        if t.data_location == onnx.TensorProto.EXTERNAL:
            return None  # read, so that a missing or short file still fails here
        a = np.broadcast_to(np.zeros((), dt), tuple(t.dims))
        start, end = self.left_out.get(t.name, (0, len(t.raw_data)))
        return a if a.nbytes == end - start else None

    def real_constants(self, inits):
        """the stand-ins of initializers that do not train replaced by their values"""
        for n in sorted(self.stood - self.trainable):
            self.arrays[n] = self.array(n, inits[n])
        self.stood &= self.trainable

    def weight_kind(self, name):
        if name in self.bn_stats:
            return "buffer"
        if name in self.freeze:
            self.frozen.append(name)
            return "buffer"
        return "param"

    def initializers(self, g, inits, stacked):
        self.bn_stats = set()
        for node in g.node:
            if node.op_type == "BatchNormalization":
                self.bn_stats.update(node.input[3:5])
        self.freeze = set(self.args.freeze or [])
        missing = self.freeze - set(inits)
        if missing:
            fail(f"--freeze names no initializer of {self.path}: {', '.join(sorted(missing))}")
        self.frozen = []
        for name in inits:
            if name not in self.trainable or name in stacked:
                continue  # a constant (set by run), or declared by its loop, one tensor for all its layers
            self.vals[name] = self.declare_weight(name, self.arrays[name], self.weight_kind(name))

    def arg(self, node, i):
        if i >= len(node.input) or not node.input[i]:
            return None
        v = self.vals.get(node.input[i])
        if v is None:
            raise Downstream()
        return v

    def const_arg(self, node, i, what):
        v = self.arg(node, i)
        if v is None:
            return None
        if not v.is_const:
            raise ImportError_(f"its {what} must be a constant once shapes are fixed")
        return np.asarray(v.const)

    def node(self, node):
        ins = [self.arg(node, i) for i in range(len(node.input))]
        if node.domain not in ("", "ai.onnx"):
            raise ImportError_(f"domain '{node.domain}' is not ONNX's")
        # shape arithmetic: every input constant, fold it (Dropout and friends pass through below)
        if all(v is None or v.is_const for v in ins) and node.op_type not in self.RANDOM:
            outs = self.fold(node, ins)
            for o, a in zip(node.output, outs):
                self.vals[o] = V(const=np.asarray(a))
            return
        f = getattr(self, "op_" + node.op_type, None)
        if f is None:
            raise ImportError_("dpc has no such op")
        # a comparison draws the mask; the dynamo exporter's CastLike reads the uniform tensor for its type alone
        if any(hasattr(v, "uniform") for v in ins if v is not None) and \
                node.op_type not in ("Less", "Greater", "LessOrEqual", "GreaterOrEqual") and \
                not (node.op_type == "CastLike" and not hasattr(ins[0], "uniform")):
            raise ImportError_("reads a random uniform tensor: dpc draws one only as a mask, compared with a "
                               "constant (stochastic depth)")
        a = {at.name: onnx.helper.get_attribute_value(at) for at in node.attribute}
        # a float attribute is float32 by the format; the exporter's value was the shortest decimal that
        # rounds to it (eps=1e-5): what PyTorch computes with, in float64 too
        a = {k: f32(v) if isinstance(v, float) else v for k, v in a.items()}
        out = f(node, ins, a)
        if isinstance(out, V):
            out = [out]
        for o, v in zip(node.output, out):
            if o:
                self.check_shape(node, o, v)
                self.vals[o] = v

    def check_shape(self, node, name, v):
        if hasattr(v, "seq"):
            return
        s = self.shapes.get(name)
        if s is not None and v.shape is not None and None not in s and tuple(s) != tuple(v.shape):
            raise ImportError_(f"the converter made {dims(v.shape)} where shape inference says {dims(s)} "
                               f"(a converter bug)")

    def fold(self, node, ins):
        if node.op_type == "GatherElements":  # onnx's reference evaluator fails on a [1, N] gather of [1, M]
            shape = np.asarray(ins[0].const).shape
            ax = self.axis(node.attribute[0].i if node.attribute else 0, len(shape))
            idx = np.asarray(ins[1].const, np.int64)
            return [np.take_along_axis(np.asarray(ins[0].const), np.where(idx < 0, idx + shape[ax], idx), ax)]
        inputs = []
        feeds = {}
        for i, (n, v) in enumerate(zip(node.input, ins)):
            if v is None:
                continue
            inputs.append(onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(v.const.dtype),
                                                             v.const.shape))
            feeds[n] = v.const
        outputs = [onnx.helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in node.output if o]
        g = onnx.helper.make_graph([node], "fold", inputs, outputs)
        m = onnx.helper.make_model(g, opset_imports=self.model.opset_import)
        try:
            from onnx.reference import ReferenceEvaluator  # 17 ms to import, where a node folds on it
            res = ReferenceEvaluator(m).run(None, feeds)
        except Exception as e:
            raise ImportError_(f"its constant inputs could not be folded: {e}")
        return res

    # ---- ops ----
    def shape_of(self, v):
        return tuple(np.asarray(v.const).shape) if v.is_const else v.shape

    def unary(fmt):
        def f(self, node, ins, a):
            x = ins[0]
            return self.let(node.output[0], fmt.format(x=self.x(x)), self.shape_of(x))
        return f

    op_Relu = unary("relu({x})")
    op_Tanh = unary("tanh({x})")
    op_Sigmoid = unary("sigmoid({x})")
    op_Exp = unary("exp({x})")
    op_Log = unary("log({x})")
    op_Sqrt = unary("sqrt({x})")
    op_Abs = unary("abs({x})")
    op_Neg = unary("-{x}")
    op_Erf = unary("erf({x})")
    op_Sign = unary("sign({x})")
    op_Reciprocal = unary("1 / {x}")
    # relu(x) + log(1 + exp(-|x|)): finite where exp(x) is not (f32 from x = 89)
    op_Softplus = unary("relu({x}) + log(1 + exp(-abs({x})))")
    op_Sin = unary("sin({x})")
    op_Cos = unary("cos({x})")
    op_HardSwish = unary("{x} * minimum(maximum({x} / 6 + 0.5, 0), 1)")

    def op_HardSigmoid(self, node, ins, a):
        al, be = a.get("alpha", 0.2), a.get("beta", 0.5)
        x = self.x(ins[0])
        return self.let(node.output[0], f"minimum(maximum({num(al)} * {x} + {num(be)}, 0), 1)", ins[0].shape)

    def op_LeakyRelu(self, node, ins, a):
        x = self.x(ins[0])
        return self.let(node.output[0], f"where({x} > 0, {x}, {num(a.get('alpha', 0.01))} * {x})", ins[0].shape)

    def op_Gelu(self, node, ins, a):
        x = self.x(ins[0])
        if a.get("approximate", b"none") in (b"tanh", "tanh"):
            return self.let(node.output[0], f"gelu({x})", ins[0].shape)
        return self.let(node.output[0], f"0.5 * {x} * (1 + erf({x} * {num(1 / np.sqrt(2))}))", ins[0].shape)

    def op_Identity(self, node, ins, a):
        return ins[0]

    def binary(sym):
        def f(self, node, ins, a):
            x, y = ins
            if sym in ("<", "<=", ">", ">=") and (hasattr(x, "uniform") or hasattr(y, "uniform")):
                u, c, below = (x, y, sym[0] == "<") if hasattr(x, "uniform") else (y, x, sym[0] == ">")
                return self.bernoulli(node, u, c, below)
            shape = np.broadcast_shapes(self.shape_of(x), self.shape_of(y))
            return self.let(node.output[0], f"{self.paren(x)} {sym} {self.paren(y)}", shape)
        return f

    def paren(self, v):
        e = self.x(v)
        return f"({e})" if e.startswith("-") or " " in e else e

    op_Add = binary("+")
    op_Sub = binary("-")
    op_Mul = binary("*")
    op_Div = binary("/")
    op_Equal = binary("==")
    op_Less = binary("<")
    op_Greater = binary(">")
    op_LessOrEqual = binary("<=")
    op_GreaterOrEqual = binary(">=")

    def op_IsNaN(self, node, ins, a):
        return self.let(node.output[0], f"{self.paren(ins[0])} != {self.paren(ins[0])}", self.shape_of(ins[0]))

    def op_And(self, node, ins, a):  # of 0/1 tensors
        shape = np.broadcast_shapes(self.shape_of(ins[0]), self.shape_of(ins[1]))
        return self.let(node.output[0], f"{self.paren(ins[0])} * {self.paren(ins[1])}", shape)

    def op_Or(self, node, ins, a):
        shape = np.broadcast_shapes(self.shape_of(ins[0]), self.shape_of(ins[1]))
        return self.let(node.output[0], f"maximum({self.x(ins[0])}, {self.x(ins[1])})", shape)

    def op_Not(self, node, ins, a):
        return self.let(node.output[0], f"1 - {self.paren(ins[0])}", self.shape_of(ins[0]))

    def op_Pow(self, node, ins, a):
        x, y = ins
        shape = np.broadcast_shapes(self.shape_of(x), self.shape_of(y))
        if y.is_const and np.asarray(y.const).size == 1 and float(np.asarray(y.const).reshape(-1)[0]) == 2.0:
            return self.let(node.output[0], f"{self.paren(x)} * {self.paren(x)}", shape)
        return self.let(node.output[0], f"pow({self.x(x)}, {self.x(y)})", shape)

    def variadic(fn):
        def f(self, node, ins, a):
            acc = ins[0]
            shape = self.shape_of(acc)
            e = self.x(acc)
            for v in ins[1:]:
                shape = np.broadcast_shapes(shape, self.shape_of(v))
                e = fn(e, self.x(v))
            return self.let(node.output[0], e, shape)
        return f

    op_Max = variadic(lambda a, b: f"maximum({a}, {b})")
    op_Min = variadic(lambda a, b: f"minimum({a}, {b})")
    op_Sum = variadic(lambda a, b: f"{a} + {b}")

    def op_Where(self, node, ins, a):
        c, x, y = ins
        shape = np.broadcast_shapes(self.shape_of(c), self.shape_of(x), self.shape_of(y))
        return self.let(node.output[0], f"where({self.x(c)}, {self.x(x)}, {self.x(y)})", shape)

    def op_Clip(self, node, ins, a):
        x = ins[0]
        lo = ins[1] if len(ins) > 1 else None
        hi = ins[2] if len(ins) > 2 else None
        if "min" in a:
            lo = V(const=np.float32(a["min"]))
        if "max" in a:
            hi = V(const=np.float32(a["max"]))
        e = self.x(x)
        if lo is not None:
            e = f"maximum({e}, {self.x(lo)})"
        if hi is not None:
            e = f"minimum({e}, {self.x(hi)})"
        return self.let(node.output[0], e, x.shape)

    def op_Cast(self, node, ins, a):
        x = ins[0]
        to = a["to"]
        if to in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16):
            if x.dtype == "f32":
                return x
            return self.let(node.output[0], f"cast({x.expr}, f32)", x.shape)
        if to in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
            if x.dtype == "i32":
                return x
            return self.let(node.output[0], f"cast({x.expr}, i32)", x.shape, "i32")
        if to == onnx.TensorProto.BOOL:
            # dp compares reals: an integer's (an attention mask's 0 and 1) as f32 first
            e = f"cast({x.expr}, f32)" if x.dtype == "i32" else self.paren(x)
            return self.let(node.output[0], f"{e} != 0", x.shape)
        raise ImportError_(f"a cast to {onnx.TensorProto.DataType.Name(to)}")

    def op_RandomUniformLike(self, node, ins, a):
        """read only by a comparison with a constant (bernoulli): stochastic depth's per-sample mask"""
        v = V(shape=self.shape_of(ins[0]))
        v.uniform = (float(a.get("low", 0.0)), float(a.get("high", 1.0)))
        return v

    def bernoulli(self, node, u, c, below):
        """u < c (below) or u > c, for u uniform on [low, high): 1 with the probability q that it holds,
        drawn by dp's dropout (so a recomputed block draws it again, and --seed decides it); in --eval
        q itself, the mask's mean (stochastic depth then divides by q: the branch passes whole)"""
        if not c.is_const or np.asarray(c.const).size != 1:
            raise ImportError_("a random uniform tensor compared with something other than a constant")
        lo, hi = u.uniform
        q = min(max((float(np.asarray(c.const).reshape(())) - lo) / (hi - lo), 0.0), 1.0)
        q = q if below else 1 - q
        ones = self.literal(np.ones(u.shape, np.float32), node.output[0] + "_ones")
        t = "training()"
        e = f"(dropout({ones.expr}, {num(1 - q)}) > 0) * ({t} + (1 - {t}) * {num(q)})"
        return self.let(node.output[0], e, u.shape)

    def op_Dropout(self, node, ins, a):
        x = ins[0]
        if x.is_const:
            return [x]
        ratio = a.get("ratio", 0.5)
        if len(ins) > 1 and ins[1] is not None:
            ratio = float(self.const_arg(node, 1, "ratio"))
        if len(node.output) > 1 and node.output[1] and self.consumers.get(node.output[1]):
            raise ImportError_("its mask output is used")
        if ratio == 0:
            return [x]
        return [self.let(node.output[0], f"dropout({x.expr}, {num(ratio)})", x.shape)]

    def op_MatMul(self, node, ins, a):
        x, w = (self.tensor(v) for v in ins)
        if len(x.shape) < 2 or len(w.shape) < 2:
            raise ImportError_("a matrix product of a vector")
        if len(w.shape) > 2 and tuple(x.shape[:-2]) != tuple(w.shape[:-2]):
            raise ImportError_("a batched matrix product whose batch axes differ (dp needs them equal)")
        shape = tuple(x.shape[:-1]) + (w.shape[-1],)
        return self.let(node.output[0], f"{x.expr} @ {w.expr}", shape)

    def op_Gemm(self, node, ins, a):
        x, w = (self.tensor(v) for v in ins[:2])
        xe = f"transpose({x.expr})" if a.get("transA", 0) else x.expr
        we = f"transpose({w.expr})" if a.get("transB", 0) else w.expr
        m = x.shape[1] if a.get("transA", 0) else x.shape[0]
        n = w.shape[0] if a.get("transB", 0) else w.shape[1]
        e = f"{xe} @ {we}"
        if a.get("alpha", 1.0) != 1.0:
            e = f"({e}) * {num(a['alpha'])}"
        if len(ins) > 2 and ins[2] is not None:
            c = self.x(ins[2])
            e = f"{e} + {c}" if a.get("beta", 1.0) == 1.0 else f"{e} + {num(a['beta'])} * {c}"
        return self.let(node.output[0], e, (m, n))

    def pads2d(self, node, a, x):
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise ImportError_("auto_pad (export with explicit pads)")
        p = list(a.get("pads", [0, 0, 0, 0]))
        if len(p) != 4:
            raise ImportError_("a window that is not 2-D")
        return p  # top, left, bottom, right

    def explicit_pad(self, xe, shape, p, hint):
        """zeros around x on H and W where a window's padding is not one number"""
        shape = list(shape)
        if p[0] or p[2]:
            xe = f"pad({xe}, 2, {p[0]}, {p[2]})"
            shape[2] += p[0] + p[2]
        if p[1] or p[3]:
            xe = f"pad({xe}, 3, {p[1]}, {p[3]})"
            shape[3] += p[1] + p[3]
        v = self.let(hint + "_pad", xe, shape)
        return v

    def op_Conv(self, node, ins, a):
        x, w = (self.tensor(v) for v in ins[:2])
        if len(x.shape) != 4:
            raise ImportError_("a convolution that is not 2-D")
        p = self.pads2d(node, a, x)
        st = list(a.get("strides", [1, 1]))
        dl = list(a.get("dilations", [1, 1]))
        g = a.get("group", 1)
        if st[0] != st[1] or dl[0] != dl[1]:
            raise ImportError_(f"strides {st} and dilations {dl} must be equal on both axes")
        if p[0] == p[1] == p[2] == p[3]:
            pad = p[0]
        else:
            x = self.explicit_pad(x.expr, x.shape, p, node.output[0])
            pad = 0
        opts = "".join(f", {k}={v}" for k, v, d in (("stride", st[0], 1), ("pad", pad, 0), ("dilation", dl[0], 1),
                                                     ("groups", g, 1)) if v != d)
        kh, kw = w.shape[2], w.shape[3]
        H, W = x.shape[2], x.shape[3]
        ho = (H + 2 * pad - dl[0] * (kh - 1) - 1) // st[0] + 1
        wo = (W + 2 * pad - dl[1] * (kw - 1) - 1) // st[1] + 1
        e = f"conv2d({x.expr}, {w.expr}{opts})"
        if len(ins) > 2 and ins[2] is not None:
            b = self.tensor(ins[2])
            e = f"{e} + reshape({b.expr}, [{b.shape[0]}, 1, 1])"
        return self.let(node.output[0], e, (x.shape[0], w.shape[0], ho, wo))

    def pool(self, node, ins, a, fn):
        x = self.tensor(ins[0])
        k = list(a["kernel_shape"])
        st = list(a.get("strides", k))
        p = self.pads2d(node, a, x)
        if len(k) != 2 or k[0] != k[1] or st[0] != st[1]:
            raise ImportError_(f"a window {k} with strides {st}: dp's pools take a square window")
        if a.get("ceil_mode", 0):
            if fn != "max_pool2d":
                raise ImportError_("ceil_mode=1 in an average (dp's pools round down, as PyTorch's default)")
            x = self.ceil_rows(node, x, k[0], st[0], p)
        if a.get("dilations", [1, 1]) != [1, 1]:
            raise ImportError_("a dilated pool")
        if fn == "avg_pool2d" and any(p) and not a.get("count_include_pad", 0):
            raise ImportError_("count_include_pad=0 with padding (dp's average counts the padding as zeros, "
                               "PyTorch's default)")
        if not (p[0] == p[1] == p[2] == p[3]) or p[0] > k[0] // 2:
            raise ImportError_(f"pads {p} (dp's pools take one padding, at most half the window)")
        opts = (f", stride={st[0]}" if st[0] != k[0] else "") + (f", pad={p[0]}" if p[0] else "")
        H, W = x.shape[2], x.shape[3]
        ho = (H + 2 * p[0] - k[0]) // st[0] + 1
        wo = (W + 2 * p[0] - k[0]) // st[0] + 1
        return self.let(node.output[0], f"{fn}({x.expr}, {k[0]}{opts})", (x.shape[0], x.shape[1], ho, wo))

    def ceil_rows(self, node, x, k, st, p):
        """a max pool's ceil_mode: as PyTorch counts its windows (the last starts inside the input or its
        leading padding), the last row and column repeated at the end so that dp's pool, which rounds
        down, makes them; a copy of a value already in the last window never changes its max, and the
        gradient a tie shares with the copy flows back to the value it copies"""
        for ax, pad in ((2, p[0]), (3, p[1])):
            n = x.shape[ax]
            out = -(-(n + 2 * pad - k) // st) + 1
            if (out - 1) * st >= n + pad:
                out -= 1
            extra = (out - 1) * st + k - (n + 2 * pad)
            if extra > 0:
                last = self.take(x, ax, n - 1, n, self.fresh(node.output[0] + "_last"))
                s = list(x.shape)
                s[ax] += extra
                x = self.let(self.fresh(node.output[0] + "_ceil"), f"concat([{x.expr}{(', ' + last.expr) * extra}], {ax})", s)
        return x

    def op_MaxPool(self, node, ins, a):
        if len(node.output) > 1 and node.output[1]:
            raise ImportError_("its indices output")
        return self.pool(node, ins, a, "max_pool2d")

    def op_AveragePool(self, node, ins, a):
        return self.pool(node, ins, a, "avg_pool2d")

    def global_pool(self, node, ins, fn):
        """fn (mean, max) over every axis after N and C, kept as ones"""
        x = self.tensor(ins[0])
        axes = list(range(2, len(x.shape)))
        out = tuple(x.shape[:2]) + (1,) * len(axes)
        return self.let(node.output[0], f"reshape({fn}({x.expr}, {axes}), {dims(out)})", out)

    def op_GlobalAveragePool(self, node, ins, a):
        return self.global_pool(node, ins, "mean")

    def op_GlobalMaxPool(self, node, ins, a):
        return self.global_pool(node, ins, "max")

    def op_BatchNormalization(self, node, ins, a):
        """y = (x - m) * s + b with s = g / sqrt(v + eps) per channel: the adjoint reads the centred values
        alone, which the variance's adjoint reads too (one activation where (x - m) / sqrt(v + eps) * g + b
        keeps three, and x * s + (b - m * s) kept x beside them: DenseNet-121's peak 221 -> 181 MB at
        batch 8). Its scale's gradient sums dy times centred values, not dy * x less m times the sum of
        dy, which cancels where a channel's mean is large beside its deviation."""
        x, g, b, rm, rv = ins[:5]
        x = self.tensor(x)
        eps = a.get("epsilon", 1e-5)
        # ONNX: running = running * momentum + batch * (1 - momentum); PyTorch's momentum is the second
        pt = f32(1 - f32(a.get("momentum", np.float32(0.9))))
        C = x.shape[1]
        axes = [0] + list(range(2, len(x.shape)))
        per = [C] + [1] * (len(x.shape) - 2)
        frozen = self.args.batchnorm == "frozen" or rm.is_const or rv.is_const or rm.decl not in self.buffers
        r = lambda v: f"reshape({self.x(v)}, {dims(per)})" if len(per) > 1 else self.x(v)
        base = self.fresh(node.output[0] + "_bn")
        self.names.discard(base)
        if frozen:
            d = self.let(base + "_centred", f"{x.expr} - {r(rm)}", x.shape)
            v = rv
        else:
            n = int(np.prod([x.shape[i] for i in axes]))
            mu = self.let(base + "_mean", f"mean({x.expr}, {axes})", (C,))
            t = "training()"  # the batch's statistics while training, the running ones in --eval
            m = self.let(base + "_m", f"{t} * {mu.expr} + (1 - {t}) * {rm.expr}", (C,))
            d = self.let(base + "_centred", f"{x.expr} - {r(m)}", x.shape)
            var = self.let(base + "_var", f"mean({d.expr} * {d.expr}, {axes})", (C,))
            v = self.let(base + "_v", f"{t} * {var.expr} + (1 - {t}) * {rv.expr}", (C,))
            keep = f32(1 - pt)
            # a layer's statistics in the loop's body (update B[l] = ...), the others after the loss is computed
            ups = self.body if self.layer else self.updates
            ind = self.indent
            ups.append(f"{ind}update {rm.expr} = {num(keep)} * {rm.expr} + {num(pt)} * {mu.expr}")
            ups.append(f"{ind}update {rv.expr} = {num(keep)} * {rv.expr} + {num(pt)} * {var.expr} * "
                       f"{num(n / max(n - 1, 1))}")
        sc = self.let(base + "_scale", f"{self.paren(g)} / sqrt({self.x(v)} + {num(eps)})", (C,))
        return [self.let(node.output[0], f"{d.expr} * {r(sc)} + {r(b)}", x.shape)]

    def op_LayerNormalization(self, node, ins, a):
        x = self.tensor(ins[0])
        ax = a.get("axis", -1)
        if ax not in (-1, len(x.shape) - 1):
            raise ImportError_(f"axis={ax} (dp's layernorm normalises the last axis)")
        D = x.shape[-1]
        g = self.tensor(ins[1]) if len(ins) > 1 and ins[1] is not None else self.literal(np.ones(D, np.float32))
        b = self.tensor(ins[2]) if len(ins) > 2 and ins[2] is not None else self.literal(np.zeros(D, np.float32))
        if len(node.output) > 1 and any(self.consumers.get(o) for o in node.output[1:] if o):
            raise ImportError_("its mean or inverse deviation output is used")
        eps = a.get("epsilon", 1e-5)
        return [self.let(node.output[0], f"layernorm({x.expr}, {g.expr}, {b.expr}, eps={num(eps)})", x.shape)]

    def axis(self, ax, rank):
        return ax + rank if ax < 0 else ax

    def op_Softmax(self, node, ins, a, fn="softmax"):
        x = self.tensor(ins[0])
        rank = len(x.shape)
        opset = self.opset
        ax = self.axis(a.get("axis", -1 if opset >= 13 else 1), rank)
        if opset < 13 and ax != rank - 1:
            raise ImportError_(f"opset {opset}'s softmax over axes {ax}.. (export with opset 13 or newer)")
        if ax == rank - 1:
            return self.let(node.output[0], f"{fn}({x.expr})", x.shape)
        perm = list(range(rank))
        perm[ax], perm[-1] = perm[-1], perm[ax]
        return self.let(node.output[0], f"transpose({fn}(transpose({x.expr}, {perm})), {perm})", x.shape)

    def op_LogSoftmax(self, node, ins, a):
        return self.op_Softmax(node, ins, a, "log_softmax")

    def reshape_to(self, node, x, shape):
        x = self.tensor(x)
        shape = tuple(int(d) for d in shape)
        # a reshape back to what a reshape started from is that value (a Conv1D's view of its rows and the next
        # one's view back: the GEMMs, and in the adjoint their gradients, meet the elementwise ops beside them)
        src = self.reshaped.get(x.expr)
        if src is not None and tuple(src.shape) == shape:
            return src
        if tuple(x.shape) == shape:
            return x
        if len(shape) == 0:
            return self.let(node.output[0], f"sum({x.expr})", shape)  # one element
        v = self.let(node.output[0], f"reshape({x.expr}, {dims(shape)})", shape)
        self.reshaped[v.expr] = x
        return v

    def op_Reshape(self, node, ins, a):
        x = ins[0]
        s = [int(d) for d in self.const_arg(node, 1, "shape")]
        if not a.get("allowzero", 0):
            s = [x.shape[i] if d == 0 else d for i, d in enumerate(s)]
        if -1 in s:
            known = int(np.prod([d for d in s if d != -1]))
            s[s.index(-1)] = int(np.prod(x.shape)) // known
        return self.reshape_to(node, x, s)

    def op_Flatten(self, node, ins, a):
        x = ins[0]
        ax = self.axis(a.get("axis", 1), len(x.shape))
        return self.reshape_to(node, x, (int(np.prod(x.shape[:ax])), int(np.prod(x.shape[ax:]))))

    def axes_arg(self, node, ins, a, i):
        if "axes" in a:
            return list(a["axes"])
        if len(ins) > i and ins[i] is not None:
            return [int(v) for v in self.const_arg(node, i, "axes")]
        return None

    def op_Unsqueeze(self, node, ins, a):
        x = ins[0]
        axes = self.axes_arg(node, ins, a, 1)
        rank = len(x.shape) + len(axes)
        axes = sorted(self.axis(v, rank) for v in axes)
        s = list(x.shape)
        for v in axes:
            s.insert(v, 1)
        return self.reshape_to(node, x, s)

    def op_Squeeze(self, node, ins, a):
        x = ins[0]
        axes = self.axes_arg(node, ins, a, 1)
        if axes is None:
            axes = [i for i, d in enumerate(x.shape) if d == 1]
        axes = {self.axis(v, len(x.shape)) for v in axes}
        return self.reshape_to(node, x, [d for i, d in enumerate(x.shape) if i not in axes])

    def op_Transpose(self, node, ins, a):
        x = self.tensor(ins[0])
        perm = list(a.get("perm", list(range(len(x.shape)))[::-1]))
        if perm == list(range(len(perm))):
            return x
        return self.let(node.output[0], f"transpose({x.expr}, {perm})", tuple(x.shape[p] for p in perm))

    def op_Shape(self, node, ins, a):
        """shapes are fixed: a constant"""
        shape = np.array(self.shape_of(ins[0]), np.int64)
        lo, hi = a.get("start", 0), a.get("end", len(shape))
        return V(const=shape[lo:hi])

    def op_Size(self, node, ins, a):
        return V(const=np.array(int(np.prod(self.shape_of(ins[0]))), np.int64))

    def op_SplitToSequence(self, node, ins, a):
        """a sequence of slices, which SequenceAt takes apart (the dynamo exporter's split)"""
        x = self.tensor(ins[0])
        ax = self.axis(a.get("axis", 0), len(x.shape))
        d = x.shape[ax]
        split = self.const_arg(node, 1, "split") if len(ins) > 1 and ins[1] is not None else None
        if split is None:
            sizes = [1] * d
        elif split.ndim == 0:
            sizes = [int(split)] * (d // int(split)) + ([d % int(split)] if d % int(split) else [])
        else:
            sizes = [int(v) for v in split]
        keep = a.get("keepdims", 1) or split is not None
        parts, lo = [], 0
        for k, sz in enumerate(sizes):
            v = self.take(x, ax, lo, lo + sz, f"{node.output[0]}_{k}")
            if not keep:
                v = self.reshape_to(node, v, [s for j, s in enumerate(v.shape) if j != ax])
            parts.append(v)
            lo += sz
        seq = V(shape=None)
        seq.seq = parts
        return seq

    def op_SequenceAt(self, node, ins, a):
        seq = ins[0]
        if not hasattr(seq, "seq"):
            raise ImportError_("a sequence that is not a SplitToSequence's")
        i = int(self.const_arg(node, 1, "position"))
        return seq.seq[i]

    def op_CastLike(self, node, ins, a):
        x, like = ins
        if like.dtype == "i32" or (like.is_const and np.issubdtype(np.asarray(like.const).dtype, np.integer)):
            return x if x.dtype == "i32" else self.let(node.output[0], f"cast({x.expr}, i32)", x.shape, "i32")
        return x if x.dtype == "f32" else self.let(node.output[0], f"cast({x.expr}, f32)", x.shape)

    def op_Concat(self, node, ins, a):
        vs = [self.tensor(v) for v in ins if v is not None and 0 not in self.shape_of(v)]
        ax = self.axis(a["axis"], len(vs[0].shape))
        if len(vs) == 1:
            return vs[0]
        s = list(vs[0].shape)
        s[ax] = sum(v.shape[ax] for v in vs)
        return self.let(node.output[0], f"concat([{', '.join(v.expr for v in vs)}], {ax})", s)

    def take(self, x, ax, lo, hi, hint):
        subs = [":"] * ax + [f"{lo}:{hi}"]
        s = list(x.shape)
        s[ax] = hi - lo
        return self.let(hint, f"{x.expr}[{', '.join(subs)}]", s)

    def op_Split(self, node, ins, a):
        x = self.tensor(ins[0])
        ax = self.axis(a.get("axis", 0), len(x.shape))
        n = len(node.output)
        if "split" in a:
            sizes = list(a["split"])
        elif len(ins) > 1 and ins[1] is not None:
            sizes = [int(v) for v in self.const_arg(node, 1, "split")]
        else:
            d = x.shape[ax]
            per = -(-d // n)
            sizes = [min(per, d - i * per) for i in range(n)]
        outs, lo = [], 0
        for o, sz in zip(node.output, sizes):
            outs.append(self.take(x, ax, lo, lo + sz, o))
            lo += sz
        return outs

    def op_Slice(self, node, ins, a):
        x = self.tensor(ins[0])
        rank = len(x.shape)
        if len(ins) > 1:
            starts = self.const_arg(node, 1, "starts")
            ends = self.const_arg(node, 2, "ends")
            axes = self.const_arg(node, 3, "axes") if len(ins) > 3 and ins[3] is not None else range(len(starts))
            steps = self.const_arg(node, 4, "steps") if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
        else:
            starts, ends = a["starts"], a["ends"]
            axes = a.get("axes", range(len(starts)))
            steps = [1] * len(starts)
        subs = [":"] * rank
        s = list(x.shape)
        if any(int(sp) != 1 for sp in steps):  # every other row (Swin's patch merging): a gather
            picks = [slice(None)] * rank
            for st, en, ax, sp in zip(starts, ends, axes, steps):
                if int(sp) == 0:
                    raise ImportError_("a slice with step 0")
                picks[self.axis(int(ax), rank)] = slice(*slice(int(st), int(en), int(sp)).indices(x.shape[self.axis(int(ax), rank)]))
            flat = np.arange(int(np.prod(x.shape)), dtype=np.int64).reshape(x.shape)[tuple(picks)]
            if flat.size == 0:
                raise ImportError_("an empty slice")
            return self.gather_flat(node, x, flat)
        for st, en, ax, sp in zip(starts, ends, axes, steps):
            ax = self.axis(int(ax), rank)
            d = x.shape[ax]
            lo, hi, _ = slice(int(st), int(en)).indices(d)
            hi = max(hi, lo)
            if hi == lo:
                raise ImportError_("an empty slice")
            subs[ax] = f"{lo}:{hi}"
            s[ax] = hi - lo
        while subs and subs[-1] == ":":
            subs.pop()
        if not subs:
            return x
        return self.let(node.output[0], f"{x.expr}[{', '.join(subs)}]", s)

    def op_Gather(self, node, ins, a):
        data, idx = ins
        ax = self.axis(a.get("axis", 0), len(self.shape_of(data)))
        d = self.tensor(data)
        if idx.is_const and ax == 0 and self.padding_idx(node, d.shape[0]) is not None:
            idx = self.literal(np.asarray(idx.const, np.int64) % d.shape[0], node.output[0] + "_ids")
        if idx.is_const:
            i = np.asarray(idx.const)
            n = d.shape[ax]
            rest = tuple(s for j, s in enumerate(d.shape) if j != ax)
            if i.ndim == 0:
                subs = [":"] * ax + [str(int(i) % n)]
                return self.let(node.output[0], f"{d.expr}[{', '.join(subs)}]", rest)
            flat = [int(v) % n for v in i.reshape(-1)]
            out = d.shape[:ax] + i.shape + d.shape[ax + 1:]
            if flat == list(range(flat[0], flat[0] + len(flat))):  # a range: a slice, shaped as the indices
                v = self.take(d, ax, flat[0], flat[0] + len(flat), node.output[0] + "_rows")
                return self.reshape_to(node, v, out)
            outer = np.arange(int(np.prod(d.shape[:ax])), dtype=np.int64)
            w = int(np.prod(d.shape[ax + 1:]))
            rows = outer[:, None] * n + np.asarray(flat, np.int64)[None, :]
            return self.gather_flat(node, d, (rows[..., None] * w + np.arange(w)).reshape(out))
        if ax != 0:
            raise ImportError_(f"a gather of computed indices on axis {ax} (dpc gathers computed indices on axis 0, "
                               f"an embedding)")
        ids = idx if idx.dtype == "i32" else self.let(node.output[0] + "_ids", f"cast({idx.expr}, i32)",
                                                       idx.shape, "i32")
        rest = tuple(d.shape[1:])
        w = int(np.prod(rest))
        table = d if len(d.shape) == 2 else self.let(node.output[0] + "_table", f"reshape({d.expr}, [{d.shape[0]}, {w}])",
                                                      (d.shape[0], w))
        pad = self.padding_idx(node, d.shape[0])
        pad = "" if pad is None else f", padding_idx={pad}"
        v = self.let(node.output[0], f"embed({table.expr}, {ids.expr}{pad})", tuple(idx.shape) + (w,))
        return self.reshape_to(node, v, tuple(idx.shape) + rest)

    EMBEDDING = re.compile(r"aten\.embedding\.default\]\(args = \(%[\w.]+, %[\w.]+, (-?\d+)")

    def padding_idx(self, node, rows):
        """the row of the embedding node reads that gets no gradient: --padding-idx's, or PyTorch's
        padding_idx as the dynamo exporter records the node it came from (aten.embedding's third argument)"""
        table = node.input[0]
        if table in self.padding:
            p = self.padding[table]
            self.padding_used.add(table)
        else:
            fx = next((m.value for m in node.metadata_props if m.key == "pkg.torch.onnx.fx_node"), "")
            found = self.EMBEDDING.search(fx)
            p = int(found.group(1)) if found else None
            note = f"the embedding {table}'s row {p} gets no gradient, as its padding_idx in PyTorch " \
                   f"(--padding-idx {table}=none trains it)"
            if p is not None and p != -1 and note not in self.notes:  # PyTorch's -1 at this point: none
                self.notes.append(note)
            elif p == -1:
                p = None
            else:
                p = None
        if p is None:
            return None
        if not -rows <= p < rows:
            fail(f"{self.path}: the padding index {p} of {table} lies outside its {rows} rows")
        return p % rows

    def paddings(self):
        """--padding-idx NAME=IDX, by table"""
        self.padding, self.padding_used = {}, set()
        for opt in self.args.padding_idx or []:
            name, eq, idx = opt.rpartition("=")
            if not eq or not name:
                fail(f"--padding-idx needs NAME=IDX, not '{opt}'")
            if idx == "none":
                self.padding[name] = None
                continue
            try:
                self.padding[name] = int(idx)
            except ValueError:
                fail(f"--padding-idx {opt}: '{idx}' is not an integer row (or none)")

    # ---- gathers and scatters of constant indices: embed of the data seen as a table of rows ----
    def gather_flat(self, node, data, flat):
        """the elements of data at the constant flat (row-major) indices flat, shaped as flat is: embed of
        data seen as rows of the widest block the indices copy whole, whose adjoint adds each read
        element's gradient back to its place"""
        d = self.tensor(data)
        flat = np.asarray(flat, np.int64)
        size = int(np.prod(d.shape))
        if flat.size == size and (flat.reshape(-1) == np.arange(size)).all():  # every element in order
            return self.reshape_to(node, d, flat.shape)
        width = 1
        for j in range(len(d.shape)):  # the widest trailing block of data read whole each time
            w = int(np.prod(d.shape[j:]))
            if w > 1 and flat.size % w == 0:
                rows = flat.reshape(-1, w)
                if (rows[:, 0] % w == 0).all() and (rows == rows[:, :1] + np.arange(w)).all():
                    width = w
                    break
        ids = flat.reshape(-1, width)[:, 0] // width
        hint = node.output[0]
        rows_v = d if tuple(d.shape) == (size // width, width) else \
            self.let(hint + "_table", f"reshape({d.expr}, [{size // width}, {width}])", (size // width, width))
        if ids.size and (ids == ids[0] + np.arange(ids.size)).all():  # a range of rows: a slice
            v = self.take(rows_v, 0, int(ids[0]), int(ids[0]) + ids.size, hint + "_rows")
        else:
            table = rows_v if d.dtype == "f32" else self.let(hint + "_f", f"cast({rows_v.expr}, f32)", rows_v.shape)
            i = self.literal(ids, hint + "_ids")
            v = self.let(hint + "_rows", f"embed({table.expr}, {i.expr})", (ids.size, width))
            if d.dtype == "i32":
                v = self.let(hint + "_i", f"cast({v.expr}, i32)", v.shape, "i32")
        out = self.reshape_to(node, v, flat.shape)
        return V(out.expr, out.shape, d.dtype) if out.dtype != d.dtype else out

    def indices(self, node, i, dim):
        """constant indices into an axis of size dim, negatives from its end; out of range refused"""
        idx = self.const_arg(node, i, "indices")
        if idx is None:
            raise ImportError_("its indices are missing")
        idx = np.asarray(idx, np.int64)
        dim = np.asarray(dim, np.int64)
        if ((idx < -dim) | (idx >= dim)).any():
            raise ImportError_("an index lies outside the data")
        return np.where(idx < 0, idx + dim, idx)

    def where_nd(self, node, ins, a):
        """GatherND's and ScatterND's element positions: the flat index into data of each element the
        indices name, shaped indices.shape[:-1] + data.shape[batch + k:]"""
        shape = tuple(self.shape_of(ins[0]))
        b = int(a.get("batch_dims", 0))
        raw = self.const_arg(node, 1, "indices")
        if raw is None or not self.arg(node, 1).is_const:
            raise ImportError_("its indices must be constants once shapes are fixed")
        k = raw.shape[-1]
        inner = np.array(shape[b:b + k], np.int64)
        idx = self.indices(node, 1, inner)
        lead = int(np.prod(shape[b:b + k]))
        pos = np.zeros(idx.shape[:-1], np.int64)
        for j in range(k):
            pos = pos * inner[j] + idx[..., j]
        nb = int(np.prod(shape[:b]))
        batch = np.arange(nb, dtype=np.int64).reshape(shape[:b] + (1,) * (idx.ndim - 1 - b))
        rows = batch * lead + pos  # the row of data [batches * lead, rest] each index names
        rest = shape[b + k:]
        w = int(np.prod(rest))
        return (rows[..., None] * w + np.arange(w)).reshape(rows.shape + rest)

    def op_GatherND(self, node, ins, a):
        return self.gather_flat(node, ins[0], self.where_nd(node, ins, a))

    def where_elements(self, node, ins, a):
        """GatherElements' and ScatterElements' positions: indices' own, but on the axis the index"""
        shape = tuple(self.shape_of(ins[0]))
        ax = self.axis(a.get("axis", 0), len(shape))
        if not self.arg(node, 1).is_const:
            raise ImportError_("its indices must be constants once shapes are fixed")
        idx = self.indices(node, 1, shape[ax])
        coords = list(np.indices(idx.shape, np.int64))
        coords[ax] = idx
        return np.ravel_multi_index(tuple(coords), shape)

    def op_GatherElements(self, node, ins, a):
        return self.gather_flat(node, ins[0], self.where_elements(node, ins, a))

    def scatter(self, node, ins, a, where):
        """data with the updates at constant places: where(placed, the updates gathered to their places,
        data); the last of updates that share a place counts, as in numpy"""
        if a.get("reduction", b"none") not in (b"none", "none"):
            raise ImportError_(f"a scatter with reduction '{a['reduction'].decode()}' (dpc scatters only with "
                               f"reduction none)")
        data, upd = ins[0], ins[2]
        shape = tuple(self.shape_of(data))
        tgt = np.asarray(where(node, ins, a))
        if tuple(tgt.shape) != tuple(self.shape_of(upd)):
            raise ImportError_(f"updates of shape {dims(self.shape_of(upd))} for indices naming {dims(tgt.shape)}")
        src = np.zeros(int(np.prod(shape)), np.int64)
        placed = np.zeros(int(np.prod(shape)), bool)
        src[tgt.reshape(-1)] = np.arange(tgt.size)
        placed[tgt.reshape(-1)] = True
        if placed.all():
            return self.gather_flat(node, upd, src.reshape(shape))
        # the places not written are masked off by where: each reads the start of the updates' rows, so that
        # whole rows written (ScatterND of rows) stay a gather of rows
        for w in (int(np.prod(shape[j:])) for j in range(len(shape))):
            rows = src.reshape(-1, w) if src.size % w == 0 and int(np.prod(self.shape_of(upd))) % w == 0 else None
            if w > 1 and rows is not None:
                pr = placed.reshape(-1, w)
                whole = pr.all(axis=1) | ~pr.any(axis=1)
                if whole.all() and ((rows[pr[:, 0]] - rows[pr[:, 0], :1]) == np.arange(w)).all() and \
                        (rows[pr[:, 0], 0] % w == 0).all():
                    rows[~pr[:, 0]] = np.arange(w)
                    break
        moved = self.gather_flat(onnx.helper.make_node("Identity", [], [node.output[0] + "_moved"]), upd,
                                 src.reshape(shape))
        m = self.literal(placed.reshape(shape), node.output[0] + "_placed")
        return self.let(node.output[0], f"where({m.expr}, {moved.expr}, {self.x(data)})", shape,
                        data.dtype if not data.is_const else moved.dtype)

    def op_ScatterND(self, node, ins, a):
        return self.scatter(node, ins, a, self.where_nd)

    def op_ScatterElements(self, node, ins, a):
        return self.scatter(node, ins, a, self.where_elements)


    # ---- Einsum, as transposes, sums and one matmul ----
    def einsum_terms(self, eq, shapes):
        """the equation's operand and result letters, an ellipsis written out as letters of its own"""
        eq = eq.replace(" ", "")
        lhs, out = eq.split("->") if "->" in eq else (eq, None)
        terms = lhs.split(",")
        spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq]
        ell = None
        for i, (t, s) in enumerate(zip(terms, shapes)):
            if "..." in t:
                k = len(s) - (len(t) - 3)
                ell = ell if ell is not None and len(ell) >= k else "".join(spare[:k])
                terms[i] = t.replace("...", ell[len(ell) - k:])
        if out is None:  # implicit: the ellipsis, then the letters seen once, in order
            once = sorted(c for c in set("".join(terms)) if "".join(terms).count(c) == 1 and c.islower())
            out = (ell or "") + "".join(once)
        elif "..." in out:
            out = out.replace("...", ell or "")
        for t, s in zip(terms, shapes):
            if len(t) != len(s):
                raise ImportError_(f"equation '{eq}' names {len(t)} axes of an operand of shape {dims(s)}")
            if len(set(t)) != len(t):
                raise ImportError_(f"equation '{eq}' repeats a letter in an operand (a diagonal)")
        return terms, out

    def einsum_sum(self, node, v, t, keep):
        """v (letters t) summed over the letters it alone has and the result lacks"""
        axes = [i for i, c in enumerate(t) if c not in keep]
        if not axes:
            return v, t
        s = tuple(d for i, d in enumerate(v.shape) if i not in axes)
        e = f"sum({v.expr}, {axes})" if len(axes) < len(v.shape) else f"sum({v.expr})"
        return self.let(node.output[0] + "_sum", e, s), "".join(c for c in t if c in keep)

    def arrange(self, node, v, t, order, hint):
        """v (letters t) transposed to the letters' order"""
        perm = [t.index(c) for c in order]
        if perm == list(range(len(perm))):
            return v
        return self.let(node.output[0] + hint, f"transpose({v.expr}, {perm})", tuple(v.shape[p] for p in perm))

    def op_Einsum(self, node, ins, a):
        eq = a["equation"].decode() if isinstance(a["equation"], bytes) else a["equation"]
        vs = [self.tensor(v) for v in ins]
        if len(vs) > 2:
            raise ImportError_(f"an einsum of {len(vs)} operands ('{eq}'; dpc takes one or two)")
        terms, out = self.einsum_terms(eq, [v.shape for v in vs])
        size = {}
        for t, v in zip(terms, vs):
            for c, d in zip(t, v.shape):
                if size.setdefault(c, d) != d:
                    raise ImportError_(f"equation '{eq}' gives axis '{c}' sizes {size[c]} and {d}")
        if len(vs) == 1:
            x, t = self.einsum_sum(node, vs[0], terms[0], out)
            return self.arrange(node, x, t, out, "")
        (x, tx), (y, ty) = (self.einsum_sum(node, v, t, out + other)
                            for v, t, other in ((vs[0], terms[0], terms[1]), (vs[1], terms[1], terms[0])))
        batch = [c for c in out if c in tx and c in ty]
        left = [c for c in out if c in tx and c not in ty]
        right = [c for c in out if c in ty and c not in tx]
        inner = [c for c in tx if c in ty and c not in out]
        B, M, N, K = (int(np.prod([size[c] for c in g])) for g in (batch, left, right, inner))
        lead = [B] if batch else []
        x = self.reshape_to(node, self.arrange(node, x, tx, batch + left + inner, "_a"), lead + [M, K])
        y = self.reshape_to(node, self.arrange(node, y, ty, batch + inner + right, "_b"), lead + [K, N])
        z = self.let(node.output[0] + "_mm", f"{x.expr} @ {y.expr}", tuple(lead + [M, N]))
        got = batch + left + right
        z = self.reshape_to(node, z, [size[c] for c in got])
        return self.arrange(node, z, "".join(got), out, "")

    # ---- shape ops, known at import ----
    def op_Range(self, node, ins, a):
        raise ImportError_("its start, limit and delta must be constants once shapes are fixed: here they "
                           "depend on the data")

    def op_ConstantOfShape(self, node, ins, a):
        raise ImportError_("its shape must be a constant once shapes are fixed: here it depends on the data")

    def op_Mod(self, node, ins, a):
        """x - floor(x / y) * y (fmod: truncated), the rounding by a cast to i32: its gradient 1 in x and
        -floor(x / y) in y, as PyTorch's remainder's; integers computed as reals, below 2^24 exact"""
        x, y = ins
        shape = np.broadcast_shapes(self.shape_of(x), self.shape_of(y))
        ints = all(v.dtype == "i32" if not v.is_const else np.issubdtype(np.asarray(v.const).dtype, np.integer)
                   for v in ins)
        xe, ye = (f"cast({v.expr}, f32)" if not v.is_const and v.dtype == "i32" else self.paren(v) for v in ins)
        q = self.let(node.output[0] + "_q", f"{xe} / {ye}", shape)
        t = self.let(node.output[0] + "_t", f"cast(cast({q.expr}, i32), f32)", shape)
        if not a.get("fmod", 0):  # toward minus infinity: one less where the cast rounded up
            t = self.let(node.output[0] + "_f", f"{t.expr} - ({t.expr} > {q.expr})", shape)
        r = self.let(node.output[0], f"{xe} - {t.expr} * {ye}", shape)
        return self.let(node.output[0] + "_i", f"cast({r.expr}, i32)", shape, "i32") if ints else r

    def op_Pad(self, node, ins, a):
        """mode constant: zeros around x axis by axis (x - c padded, plus c, for another constant c); a
        negative pad a slice"""
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode != "constant":
            raise ImportError_(f"a pad in mode '{mode}' (dpc pads with a constant)")
        x = self.tensor(ins[0])
        rank = len(x.shape)
        pads = list(a["pads"]) if "pads" in a else [int(v) for v in self.const_arg(node, 1, "pads")]
        c = 0.0
        if "value" in a:
            c = float(a["value"])
        elif len(ins) > 2 and ins[2] is not None:
            c = float(np.asarray(self.const_arg(node, 2, "constant value")).reshape(-1)[0])
        axes = list(range(rank))
        if len(ins) > 3 and ins[3] is not None:
            axes = [self.axis(int(v), rank) for v in self.const_arg(node, 3, "axes")]
        n = len(axes)
        e, s = x.expr, list(x.shape)
        if c and any(p > 0 for p in pads):
            e = f"({e} - {num(c)})"
        for ax, lo, hi in zip(axes, pads[:n], pads[n:]):
            if lo < 0 or hi < 0:  # cropped first
                a0, a1 = max(-lo, 0), s[ax] - max(-hi, 0)
                e = f"{self.let(node.output[0] + '_crop', e, tuple(s)).expr}[{', '.join([':'] * ax + [f'{a0}:{a1}'])}]"
                s[ax] = a1 - a0
            if lo > 0 or hi > 0:
                e = f"pad({e}, {ax}, {max(lo, 0)}, {max(hi, 0)})"
                s[ax] += max(lo, 0) + max(hi, 0)
        if c and any(p > 0 for p in pads):
            e = f"{e} + {num(c)}"
        return self.let(node.output[0], e, tuple(s))

    def reduce(self, node, ins, a, fn):
        x = self.tensor(ins[0])
        rank = len(x.shape)
        axes = self.axes_arg(node, ins, a, 1)
        if axes is None or len(axes) == 0:
            if a.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(rank))
        axes = sorted(self.axis(v, rank) for v in axes)
        keep = a.get("keepdims", 1)
        out = [1 if i in axes else d for i, d in enumerate(x.shape)] if keep else \
            [d for i, d in enumerate(x.shape) if i not in axes]
        e = f"{fn}({x.expr}, {axes})"
        if len(axes) == rank:
            e = f"{fn}({x.expr})"
        red = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        v = self.let(node.output[0] + "_r" if keep else node.output[0], e, red)
        return self.reshape_to(node, v, out) if keep and out else v

    def op_ReduceMean(self, node, ins, a):
        return self.reduce(node, ins, a, "mean")

    def op_ReduceSum(self, node, ins, a):
        return self.reduce(node, ins, a, "sum")

    def op_ReduceMax(self, node, ins, a):
        return self.reduce(node, ins, a, "max")

    def op_ReduceMin(self, node, ins, a):
        return self.reduce(node, ins, a, "min")

    def op_Expand(self, node, ins, a):
        x = ins[0]
        s = self.const_arg(node, 1, "shape")
        out = np.broadcast_shapes(self.shape_of(x), tuple(int(d) for d in s))
        if tuple(out) == tuple(self.shape_of(x)):
            return x
        # zeros only along the axes x lacks: ViT's class token [1, 1, D] expanded to the batch adds [B, 1, 1]
        xs = (1,) * (len(out) - len(self.shape_of(x))) + tuple(self.shape_of(x))
        z = self.literal(np.zeros([o if d != o else 1 for d, o in zip(xs, out)], np.float32), "zeros")
        return self.let(node.output[0], f"{self.x(x)} + {z.expr}", out)

    # ---- the loss and the files ----
    def finish(self, g):
        outs = [o.name for o in g.output]
        want = self.args.output or outs[0]
        if want not in outs:
            fail(f"--output {want}: the model's outputs are {', '.join(outs)}")
        y = self.vals.get(want)
        if y is None or y.is_const:
            fail(f"{self.path}: output '{want}' does not depend on the inputs")
        loss = self.args.loss
        if loss == "none":
            if len(y.shape) != 0:
                fail(f"--loss none needs a scalar output; '{want}' is {dims(y.shape)} (name a loss with --loss)")
            ret = y.expr
        elif loss in ("cross_entropy", "causal_lm"):
            if len(y.shape) < (3 if loss == "causal_lm" else 2):
                fail(f"--loss {loss} needs logits [{'B, T, ' if loss == 'causal_lm' else '..., '}C]; '{want}' is "
                     f"{dims(y.shape)}")
            ignore = self.args.ignore_index
            if ignore is None and loss == "causal_lm":
                ignore = -100  # HuggingFace's labels=: -100 counts for nothing
            if ignore is not None and not 0 <= ignore < y.shape[-1] and ignore != -100:
                fail(f"--ignore-index {ignore}: a label outside the {y.shape[-1]} classes of '{want}' other than "
                     f"-100 (HuggingFace's)")
            lab = self.fresh("labels")
            self.decls.append(f"input {lab} : i32{dims(y.shape[:-1])}")
            ign = f", ignore_index={ignore}" if ignore is not None else ""
            if loss == "cross_entropy":
                ret = f"cross_entropy({y.expr}, {lab}{ign})"
            else:
                # position t's logits predict token t + 1: HuggingFace shifts the labels it is given by one
                T = y.shape[-2]
                if T < 2:
                    fail(f"--loss causal_lm needs 2 positions or more; '{want}' is {dims(y.shape)}")
                lead = ":, " * (len(y.shape) - 3)
                ret = f"cross_entropy({y.expr}[{lead}:, 0:{T - 1}], {lab}[{lead}:, 1:{T}]{ign})"
        elif loss == "mse":
            lab = self.fresh("target")
            self.decls.append(f"input {lab} : f32{dims(y.shape)}")
            ret = f"mse({y.expr}, {lab})"
        else:
            fail(f"--loss {loss}: expected cross_entropy, mse, none or causal_lm")
        return ret

    def program(self, ret, weights):
        head = [f"# dpc program converted from {os.path.basename(self.path)} by onnx2dp "
                f"(onnx {onnx.__version__}, opset {self.opset})",
                f"# {self.stat['nodes']} nodes, {len(self.params)} parameters, {len(self.buffers)} buffers; "
                f"each starts from its tensor in the weights file"]
        if self.frozen:
            head.append(f"# frozen (buffers, not trained): {', '.join(self.frozen)}")
        for n in self.notes:
            head.append(f"# note: {n}")
        if " " in weights or '"' in weights:
            fail(f"the weights file's path {weights!r} holds a space or a quote, which dp's strings cannot")
        lines = head + ["", f'weights "{weights}"'] + self.decls + ["", "loss {"] + self.body + self.updates + [f"  return {ret}", "}"]
        return "\n".join(lines) + "\n"


def read_names(path):
    """the tensor names of a .safetensors file, or the names of a text file, one a line"""
    try:
        b = open(path, "rb").read()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}", 2)
    if path.endswith(".safetensors"):
        try:
            n = struct.unpack("<Q", b[:8])[0]
            head = json.loads(b[8:8 + n])
        except Exception:
            fail(f"{path}: not a safetensors file", 2)
        return {k for k in head if k != "__metadata__"}
    return {ln.strip() for ln in b.decode("utf-8", "replace").splitlines() if ln.strip() and not ln.startswith("#")}


def write_atomic(path, data, mode="w"):
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, mode) as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        fail(f"cannot write {path}: {e.strerror}", 2)


ST_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.int64): "I64",
             np.dtype(np.int32): "I32"}


def safetensors_bytes(tensors):
    header, blobs, off = {}, [], 0
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        if arr.dtype not in ST_DTYPES:
            arr = arr.astype(np.float32)
        b = arr.tobytes()
        header[name] = {"dtype": ST_DTYPES[arr.dtype], "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def read_model(path, slim=False):
    """the model as onnx.load reads it (external data left), parsed from the file mapped: read into a buffer
    first, ResNet-152's 240 MB took 0.29 s against 0.17. slim (--no-weights): the raw data of the graph's
    large initializers is left in the file, each one's place in LEFT_OUT under the model's id (0.15 s less
    on ResNet-152: what protobuf parses is 0.2 MB); Converter.array reads one there where its values are
    needed (a constant), and stand_in reads only its length"""
    if not path.endswith(".onnx"):
        return onnx.load(path, load_external_data=False)  # onnx picks a text format by the name
    with open(path, "rb") as f:
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (ValueError, OSError):
            return onnx.load(path, load_external_data=False)  # an empty file: onnx's own error
    left = {}
    with mm, memoryview(mm) as data:
        m = onnx.ModelProto()
        try:
            text = slim_model(data, left) if slim else None
        except ValueError:
            text = None  # not what the walk reads: protobuf's own parse, and its error
        if text is None:
            left = {}
            text = data
        used = m.ParseFromString(text)  # copies what it keeps: the map may close
        if used is not None and used != len(text):
            raise DecodeError(f"Protobuf decoding consumed too few bytes: {used} out of {len(text)}")
    if left:
        LEFT_OUT[id(m)] = (path, left)
    return m


# the raw data left out of a slim model's initializers: by id of the model, (its file, {name: (start, end)})
LEFT_OUT = {}
# a raw_data longer than this is left out by a slim read: an initializer of more than BIG_LITERAL elements of
# any type, which only a constant's folding reads
SLIM_RAW = 16 * BIG_LITERAL


def wire_fields(data, start, end):
    """the protobuf fields of data[start:end] in order: (number, wire type, start of field, start of payload,
    end); ValueError where the bytes are not a message this walk reads (groups, a field past the end)"""
    i = start
    while i < end:
        at = i
        key, i = wire_varint(data, i, end)
        number, kind = key >> 3, key & 7
        if kind == 0:
            _, i = wire_varint(data, i, end)
            body = i
        elif kind == 1:
            body, i = i, i + 8
        elif kind == 5:
            body, i = i, i + 4
        elif kind == 2:
            n, body = wire_varint(data, i, end)
            i = body + n
        else:
            raise ValueError("a group")
        if i > end or number == 0:
            raise ValueError("a field past its message")
        yield number, kind, at, body, i


def wire_varint(data, i, end):
    v = shift = 0
    while True:
        if i >= end or shift > 63:
            raise ValueError("a varint past its message")
        b = data[i]
        i += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, i
        shift += 7


def wire_length(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def slim_model(data, left):
    """the bytes of a ModelProto (field 7: its GraphProto, whose field 5 is each initializer, a TensorProto of
    name 8 and raw_data 9) without the raw data of SLIM_RAW bytes or more; None where nothing is left out"""
    out, was = [], 0
    for number, kind, at, body, end in wire_fields(data, 0, len(data)):
        if number == 7 and kind == 2:
            graph = slim_graph(data, body, end, left)
            if graph is not None:
                out += [data[was:at], b"\x3a", wire_length(len(graph)), graph]
                was = end
    if not left:
        return None
    out.append(data[was:])
    return b"".join(out)


def slim_graph(data, start, end, left):
    out, was, seen = [], start, set()
    for number, kind, at, body, stop in wire_fields(data, start, end):
        if number != 5 or kind != 2:
            continue
        name, raw = None, None
        for n, k, a, b, e in wire_fields(data, body, stop):
            if n == 8 and k == 2:
                name = bytes(data[b:e]).decode("utf-8", "replace")
            elif n == 9 and k == 2 and e - b >= SLIM_RAW:
                raw = (a, b, e)
        if name in seen:
            raise ValueError("two initializers of one name")  # which one a name reads is protobuf's to say
        seen.add(name)
        if raw is None or name is None:
            continue
        tensor = b"".join([data[body:raw[0]], data[raw[2]:stop]])
        out += [data[was:at], b"\x2a", wire_length(len(tensor)), tensor]
        was = stop
        left[name] = (raw[1], raw[2])
    if was == start:
        return None
    out.append(data[was:end])
    return b"".join(out)


def load_model(path, opts):
    if not os.path.exists(path):
        fail(f"{path}: no such file", 2)
    try:
        m = read_model(path, slim=opts.no_weights)
    except Exception as e:
        fail(f"{path}: not an ONNX model, or a truncated one ({type(e).__name__}: {str(e).splitlines()[0][:200]})", 2)
    if not m.graph.node:
        fail(f"{path}: the graph has no nodes (not an ONNX model, or an empty one)", 2)
    try:
        onnx.load_external_data_for_model(m, os.path.dirname(os.path.abspath(path)))
    except (OSError, ValueError) as e:
        fail(f"{path}: its external data cannot be read: {e}", 2)
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        fail(f"{path}: imports no default-domain opset", 2)
    if opset > KNOWN_OPSET:
        fail(f"{path}: opset {opset} is newer than this converter knows ({KNOWN_OPSET}); export with "
             f"opset_version={KNOWN_OPSET} or older", 2)
    # --shape NAME=D0,D1,...: the named inputs' dimensions fixed before inference
    shapes = {}
    for s in opts.shape or []:
        if "=" not in s:
            fail(f"--shape {s}: expected NAME=D0,D1,...")
        k, d = s.split("=", 1)
        try:
            shapes[k] = [int(v) for v in d.split(",")]
        except ValueError:
            fail(f"--shape {s}: the dimensions must be integers")
    unknown = set(shapes) - {i.name for i in m.graph.input}
    if unknown:
        fail(f"--shape names no input of {path}: {', '.join(sorted(unknown))}")
    for inp in m.graph.input:
        if inp.name in shapes:
            t = inp.type.tensor_type
            del t.shape.dim[:]
            for v in shapes[inp.name]:
                t.shape.dim.add().dim_value = v
    try:
        infer_light(m)
    except Exception as e:
        fail(f"{path}: shape inference failed: {str(e).splitlines()[0][:300]}")
    return m, opset


SHAPE_CONST = 1024  # initializers with more elements are not values inference propagates (shapes, axes, pads)


def infer_light(m):
    """onnx's shape inference into m, run on a copy whose large initializers
    are inputs of their type: inference serializes the model it is given,
    and a network's weights (ResNet-152's 240 MB) took most of its time."""
    g = m.graph
    light = onnx.ModelProto()
    light.ir_version = m.ir_version
    light.opset_import.extend(m.opset_import)
    light.functions.extend(m.functions)
    lg = light.graph
    lg.name = g.name
    lg.node.extend(g.node)
    lg.input.extend(g.input)
    lg.output.extend(g.output)
    lg.value_info.extend(g.value_info)
    lg.sparse_initializer.extend(g.sparse_initializer)
    inputs = {i.name for i in g.input}
    for t in g.initializer:
        if int(np.prod(t.dims, dtype=np.int64)) <= SHAPE_CONST:
            lg.initializer.append(t)
        elif t.name not in inputs:
            lg.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    inferred = shape_inference.infer_shapes(light, data_prop=True).graph
    del g.value_info[:]
    g.value_info.extend(inferred.value_info)
    del g.output[:]
    g.output.extend(inferred.output)


def main(argv):
    ap = argparse.ArgumentParser(prog="onnx2dp", description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("-o", dest="out", metavar="FILE", help="the .dp program (default: stdout)")
    ap.add_argument("--weights", metavar="FILE", help="the initial weights (safetensors) the program starts from "
                    "(default: the program's name with .safetensors, or model.safetensors beside the model)")
    ap.add_argument("--loss", default="cross_entropy", help="cross_entropy (default), mse, none or causal_lm")
    ap.add_argument("--ignore-index", type=int, default=None,
                    help="the label that counts for nothing (causal_lm: -100 by default)")
    ap.add_argument("--output", metavar="NAME", help="the model output the loss reads (default: the first)")
    ap.add_argument("--shape", action="append", metavar="NAME=D0,D1,...", help="fix an input's dimensions")
    ap.add_argument("--freeze", action="append", metavar="NAME", help="keep an initializer fixed (a buffer)")
    ap.add_argument("--params-from", metavar="FILE", help="the module's parameters by name (.safetensors, or a "
                    "text file of names): every other initializer is a PyTorch buffer, kept fixed")
    ap.add_argument("--train-buffer", action="append", metavar="NAME", help="train a PyTorch buffer")
    ap.add_argument("--padding-idx", action="append", metavar="NAME=IDX", help="the embedding table NAME's row "
                    "IDX gets no gradient, as nn.Embedding(padding_idx=IDX); IDX none: every row trains")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the program header's notes on stderr")
    ap.add_argument("--no-loops", action="store_true", help="convert every layer as the file writes it, "
                    "without recovering loops")
    ap.add_argument("--flat", metavar="FILE", help="where loops were recovered, also the program without them "
                    "(as --no-loops writes it) to FILE, its weights beside it (FILE's name with .safetensors); "
                    "nothing there where none was: one reading of the model for both (dpc plans the two)")
    ap.add_argument("--no-weights", action="store_true", help="write no weights file (the program still names "
                    "it): for a compile that only plans, which never reads the weights")
    ap.add_argument("--batchnorm", default="train", choices=["train", "frozen"],
                    help="BatchNormalization with batch statistics, updating the running ones (train, the "
                         "default), or with the running ones, fixed (frozen)")
    args = ap.parse_args(argv)
    if not args.model:
        ap.error("no model given")
    if args.flat and args.no_loops:
        ap.error("--flat with --no-loops: the program is flat already")
    m, opset = load_model(args.model, args)
    c = convert(m, opset, args)
    if args.verbose:
        for n in c.notes:
            sys.stderr.write(f"onnx2dp: note: {n}\n")
    write_converted(c, args.out, args.weights or (os.path.splitext(args.out)[0] if args.out and args.out != "-" else
                                                  os.path.splitext(args.model)[0]) + ".safetensors", args)
    if args.flat and c.loops:
        flat = convert(m, opset, argparse.Namespace(**dict(vars(args), no_loops=True)))
        write_converted(flat, args.flat, os.path.splitext(args.flat)[0] + ".safetensors", args)
    return 0


def convert(m, opset, args):
    c = Converter(m, args.model, args)
    c.opset = opset
    try:
        c.ret = c.run()
    except ImportError_ as e:
        fail(f"{args.model}: {e}")
    return c


def write_converted(c, out, weights, args):
    # the program names its weights file beside itself; printed, by its full path
    where = os.path.relpath(weights, os.path.dirname(os.path.abspath(out))) if out and out != "-" else \
        os.path.abspath(weights)
    text = c.program(c.ret, where)
    if not args.no_weights:
        write_atomic(weights, safetensors_bytes(c.weights), "wb")
    if out and out != "-":
        write_atomic(out, text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
