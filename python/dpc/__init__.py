"""dpc from Python: compile a model with dpc and train it in this process.

    import dpc
    trainer = dpc.compile(model, (x,), loss="cross_entropy", device_mem="2GB")
    for x, y in loader:
        loss = trainer.step(x, y)
    trainer.load_into(model)

dpc.compile exports a PyTorch module to ONNX (the recipe of docs/import.md), dpc.compile_file takes an
ONNX file or a .dp program, dpc.load a library dpc --emit=lib built. Each returns a Trainer, a session
of the C API (runtime/dpc.h) through ctypes. docs/python.md says the rest.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from . import _capi

__version__ = "0.1.0"
__all__ = ["Error", "Trainer", "compile", "compile_file", "load", "find_dpc"]


class Error(Exception):
    """A refusal or failure of dpc: the compiler's message, or the C API's code and message."""

    def __init__(self, message, code=_capi.ERR_RUN):
        super().__init__(message)
        self.code = code
        self.message = message


# ---- the compiler ----

def find_dpc():
    """The dpc compiler: $DPC, else the repository's bin/dpc this package was installed from (or lives in),
    else dpc on PATH."""
    if os.environ.get("DPC"):
        return os.environ["DPC"]
    repos = []
    try:
        from . import _where
        repos.append(_where.REPO)
    except ImportError:
        pass
    repos.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    for repo in repos:
        exe = os.path.join(repo, "bin", "dpc")
        if os.access(exe, os.X_OK):
            return exe
    exe = shutil.which("dpc")
    if exe:
        return exe
    raise Error("cannot find the dpc compiler: build it with make in the repository, or set DPC to bin/dpc",
                _capi.ERR_USAGE)


def _flags(options):
    """keyword options as command-line flags: device_mem="2GB" -> --device-mem 2GB; True -> the flag alone;
    None and False -> nothing; a list or tuple of strings is taken as it is"""
    if options is None:
        return []
    if isinstance(options, (list, tuple)):
        return [str(a) for a in options]
    out = []
    for k, v in options.items():
        if v is None or v is False:
            continue
        flag = k if k.startswith("-") else "--" + k.replace("_", "-")
        if v is True:
            out.append(flag)
        elif isinstance(v, (list, tuple)):
            for e in v:
                out += [flag, str(e)]
        else:
            out += [flag, str(v)]
    return out


def _default_target(flags):
    """the GPU where this machine has one, else the CPU; --target or $DPC_TARGET decide where given"""
    if "--target" in flags or os.environ.get("DPC_TARGET"):
        return []
    return ["--target", "cuda" if os.path.exists("/dev/nvidiactl") else "cpu"]


def compile_file(path, output=None, run=None, defines=None, **options):
    """Compiles an ONNX model or a .dp program as a library (dpc --emit=lib) and opens a session of it.

    options are dpc's (loss="mse", device_mem="2GB", checkpoint="auto", optimizer="adam",
    precision="bf16-mixed", target="cpu", ...: each --name value); defines are -D NAME=VALUE;
    run holds the session's options (the executable's: lr=0.01, seed=3, quiet=True, ...).
    output is the library's path (default: a temporary folder's, removed when the trainer closes)."""
    if not os.path.exists(path):
        raise Error("%s: no such file" % path, _capi.ERR_USAGE)
    flags = _flags(options)
    for k, v in (defines or {}).items():
        flags += ["-D", "%s=%s" % (k, v)]
    flags += _default_target(flags)
    tmp = None
    if output is None:
        tmp = tempfile.mkdtemp(prefix="dpc-")
        stem = os.path.splitext(os.path.basename(path))[0]
        output = os.path.join(tmp, "lib%s.so" % stem)
    plan = os.path.splitext(output)[0] + ".plan.json"
    cmd = [find_dpc(), os.path.abspath(path), "--emit=lib", "-o", output, "--schedule-json", plan] + flags
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        raise Error((p.stderr or p.stdout).strip() or "dpc exited with status %d" % p.returncode,
                    _capi.ERR_USAGE if p.returncode == 2 else _capi.ERR_RUN)
    try:
        t = Trainer(output, run, plan=plan, _temp=tmp)
    except BaseException:  # a session option refused: the temporary folder goes with it
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    t.compile_log = (p.stdout + p.stderr).strip()
    return t


def load(path, run=None):
    """A session of a library dpc --emit=lib built, with the session's options run (the executable's)."""
    plan = os.path.splitext(path)[0] + ".plan.json"
    return Trainer(path, run, plan=plan if os.path.exists(plan) else None)


def compile(module, example_inputs, loss="cross_entropy", *, exporter="auto", input_names=None, output=None,
            run=None, **options):
    """Exports a PyTorch module to ONNX (a copy, in training mode, batch and shapes those of
    example_inputs), compiles it with dpc (the loss added on its output: loss="cross_entropy", "mse",
    "causal_lm" or "none"), and opens a session that starts from the module's weights.

    exporter: "legacy" (torch.onnx's TorchScript exporter in training mode, for convolutional networks),
    "dynamo" (for HuggingFace's transformers), or "auto" (dynamo for a transformers model, else legacy).
    Other options are dpc's and run the session's, as for compile_file."""
    from . import _export
    tmp = tempfile.mkdtemp(prefix="dpc-")
    try:
        name = "".join(c for c in type(module).__name__.lower() if c.isalnum()) or "model"
        onnx_path, prefix = _export.export(module, example_inputs, os.path.join(tmp, name + ".onnx"), exporter,
                                           input_names)
    except Error:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except Exception as e:  # the exporter's own error, with what it names
        shutil.rmtree(tmp, ignore_errors=True)
        raise Error("the module does not export to ONNX: %s: %s" % (type(e).__name__, e), _capi.ERR_USAGE) from e
    lib = output or os.path.join(tmp, "lib%s.so" % name)
    try:
        t = compile_file(onnx_path, output=lib, run=run, loss=loss, **options)
    except Error:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    t._temp = tmp
    t._prefix = prefix
    return t


# ---- arrays in and out ----

_NP = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.int32): "i32"}
_NP_OF = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "bf16": np.uint16}


def _torch():
    return sys.modules.get("torch")


def _torch_dtype(name):
    torch = _torch()
    return {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32, "bf16": torch.bfloat16}[name]


class _Batch:
    """an array's memory as dpc_put takes it: pointer, dtype, shape, where; keep holds it alive"""

    def __init__(self, a, want):
        torch = _torch()
        self.where = _capi.HOST
        if torch is not None and not isinstance(a, torch.Tensor) and hasattr(a, "__dlpack__") and \
                not isinstance(a, np.ndarray):
            a = torch.from_dlpack(a)  # another framework's tensor, without a copy
        if torch is not None and isinstance(a, torch.Tensor):
            a = a.detach()
            names = {torch.float32: "f32", torch.float64: "f64", torch.int32: "i32", torch.bfloat16: "bf16"}
            if want == "i32" and not a.is_floating_point() and a.dtype != torch.int32:
                a = self._labels_t(a, torch)
            reals = {"f32": torch.float32, "f64": torch.float64, "bf16": torch.bfloat16}
            if want in reals and a.is_floating_point() and a.dtype != reals[want]:
                a = a.to(reals[want])  # the model's precision, as the executable reads a .npy file
            self.dtype = names.get(a.dtype, str(a.dtype).replace("torch.", ""))
            a = a.contiguous()
            if a.is_cuda:
                torch.cuda.synchronize(a.device)  # the tensor's producers done before dpc reads it
                self.where = _capi.DEVICE
            self.keep, self.ptr, self.shape = a, a.data_ptr(), tuple(a.shape)
            return
        a = np.ascontiguousarray(a)
        if want == "i32" and a.dtype.kind in "iu" and a.dtype != np.int32:
            if a.size and (a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max):
                raise Error("the labels do not fit in i32", _capi.ERR_USAGE)
            a = a.astype(np.int32)
        if want in ("f32", "f64", "bf16") and a.dtype.kind == "f" and _NP.get(a.dtype) != want:
            a = _to_bf16(a) if want == "bf16" else a.astype(_NP_OF[want])
            self.dtype = want
        else:
            self.dtype = _NP.get(a.dtype, str(a.dtype))
        self.keep, self.ptr, self.shape = a, a.ctypes.data, a.shape

    @staticmethod
    def _labels_t(a, torch):
        if a.numel() and (int(a.min()) < -2**31 or int(a.max()) >= 2**31):
            raise Error("the labels do not fit in i32", _capi.ERR_USAGE)
        return a.to(torch.int32)


def _to_bf16(a):
    """float values as bfloat16's bits (uint16), rounded to nearest even from float32, as the runtime
    rounds (a value rounded twice, f64 to f32 to bf16, as the executable reads an f64 .npy file)"""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(a, dtype=np.float32))
    r[nan] = 0x7FC0
    return np.ascontiguousarray(r.astype(np.uint16))


def _read_safetensors(path):
    """a safetensors file's tensors as NumPy arrays (bf16 as uint16), by name"""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    head = json.loads(raw[8:8 + n])
    out = {}
    kinds = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "BF16": np.uint16, "I64": np.int64}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=kinds[t["dtype"]]).reshape(t["shape"]).copy()
    return out


# ---- the session ----

class Trainer:
    """A training session of a model dpc compiled as a library: steps on the batches given, the
    parameters by name, the state saved and resumed, the plan dpc made."""

    def __init__(self, path, run=None, plan=None, _temp=None):
        self._temp = _temp
        self._prefix = ""
        self._s = None
        self.path = os.path.abspath(path)
        try:
            self._lib = _capi.load(self.path)
        except OSError as e:
            raise Error("%s does not load: %s" % (path, e), _capi.ERR_USAGE) from e
        args = _flags(run)
        argv = (_capi.ctypes.c_char_p * len(args))(*[a.encode() for a in args])
        s = _capi.ctypes.c_void_p()
        rc = self._lib.dpc_open(_capi.ctypes.byref(s), len(args), argv)
        if rc != _capi.OK:
            msg = self._lib.dpc_error(s).decode()
            if s.value:
                self._lib.dpc_close(s)
            raise Error(msg, rc)
        self._s = s
        self.plan = {}
        if plan and os.path.exists(plan):
            with open(plan) as f:
                self.plan = json.load(f)
        L, t = self._lib, _capi.Tensor()
        self.model = L.dpc_model(s).decode()
        self.optimizer = L.dpc_optimizer(s).decode()
        self.inputs, self.params = [], []
        for i in range(L.dpc_inputs(s)):
            L.dpc_input(s, i, _capi.ctypes.byref(t))
            self.inputs.append(self._info(t))
        for i in range(L.dpc_params(s)):
            L.dpc_param(s, i, _capi.ctypes.byref(t))
            self.params.append(self._info(t))
        self.reports = {}
        self.loss = None

    @staticmethod
    def _info(t):
        return {"name": t.name.decode(), "file": t.file.decode(), "dtype": t.dtype.decode(),
                "shape": tuple(t.dims[i] for i in range(t.rank)), "bytes": t.bytes,
                "kind": ("input", "param", "buffer")[t.kind], "classes": t.classes}

    def _check(self, rc):
        if rc != _capi.OK:
            raise Error(self._lib.dpc_error(self._s).decode(), rc)

    def _open(self):
        if self._s is None:
            raise Error("the trainer is closed", _capi.ERR_STATE)
        return self._s

    # batches
    def put(self, name, array):
        """the next batch of input `name` (NumPy, PyTorch, or a tensor with __dlpack__); integer labels
        are taken as i32"""
        s = self._open()
        want = next((i["dtype"] for i in self.inputs if i["name"] == name), None)
        b = _Batch(array, want)
        dims = (_capi.ctypes.c_int64 * max(1, len(b.shape)))(*b.shape)
        self._check(self._lib.dpc_put(s, name.encode(), b.ptr, b.dtype.encode(), len(b.shape), dims, b.where))

    def _put_all(self, args, named):
        if len(args) > len(self.inputs):
            raise Error("%d arrays given, and the model has %d inputs (%s)" % (
                len(args), len(self.inputs), ", ".join(i["name"] for i in self.inputs)), _capi.ERR_USAGE)
        for i, a in enumerate(args):
            self.put(self.inputs[i]["name"], a)
        for k, a in named.items():
            self.put(k, a)

    def _reports(self):
        out, name, v = {}, _capi.ctypes.c_char_p(), _capi.ctypes.c_double()
        for i in range(self._lib.dpc_reports(self._s)):
            self._lib.dpc_report(self._s, i, _capi.ctypes.byref(name), _capi.ctypes.byref(v))
            out[name.value.decode()] = v.value
        return out

    def step(self, *inputs, **named):
        """one training step on the batch (the model's inputs in order, or by name; none: the last batch
        put, or the session's data): the loss; trainer.reports holds the reports after it"""
        s = self._open()
        self._put_all(inputs, named)
        loss = _capi.ctypes.c_double()
        self._check(self._lib.dpc_step(s, _capi.ctypes.byref(loss)))
        self.loss, self.reports = loss.value, self._reports()
        return loss.value

    def eval(self, *inputs, **named):
        """the loss of the forward alone on the batch, dropout off, nothing updated"""
        s = self._open()
        self._put_all(inputs, named)
        loss = _capi.ctypes.c_double()
        self._check(self._lib.dpc_eval(s, _capi.ctypes.byref(loss)))
        self.reports = self._reports()
        return loss.value

    @property
    def steps_done(self):
        return self._lib.dpc_steps_done(self._open())

    # parameters
    def _param(self, name):
        for p in self.params:
            if name in (p["name"], p["file"]):
                return p
        raise Error("the model has no parameter or buffer named '%s' (it has: %s)"
                    % (name, ", ".join(p["file"] for p in self.params)), _capi.ERR_USAGE)

    def get(self, name, what="value"):
        """a parameter's value, gradient ("grad") or Adam moment ("adam_m", "adam_v") as a NumPy array
        (bf16 as uint16)"""
        s = self._open()
        p = self._param(name)
        out = np.empty(p["shape"], dtype=_NP_OF[p["dtype"]])
        self._check(self._lib.dpc_get(s, name.encode(), self._what(what), out.ctypes.data, out.nbytes))
        return out

    def set(self, name, array, what="value"):
        s = self._open()
        p = self._param(name)
        a = np.ascontiguousarray(array, dtype=_NP_OF[p["dtype"]])
        self._check(self._lib.dpc_set(s, name.encode(), self._what(what), a.ctypes.data, a.nbytes))

    @staticmethod
    def _what(what):
        kinds = {"value": _capi.VALUE, "grad": _capi.GRAD, "adam_m": _capi.ADAM_M, "adam_v": _capi.ADAM_V}
        if what not in kinds:
            raise Error("what is one of %s, not %r" % (", ".join(kinds), what), _capi.ERR_USAGE)
        return kinds[what]

    def state_dict(self, format="auto"):
        """the parameters and buffers under their files' names (an import's: the module's), as
        --save writes them: PyTorch tensors where PyTorch is imported (format "torch"), else NumPy"""
        tmp = tempfile.mkdtemp(prefix="dpc-sd-")
        try:
            path = os.path.join(tmp, "p.safetensors")
            self.save(path)
            arrays = _read_safetensors(path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        if self._prefix:
            arrays = {k[len(self._prefix):] if k.startswith(self._prefix) else k: v for k, v in arrays.items()}
        torch = _torch()
        if format == "numpy" or (format == "auto" and torch is None):
            return arrays
        if torch is None:
            raise Error("format='torch' needs PyTorch", _capi.ERR_USAGE)
        out = {}
        for k, v in arrays.items():
            t = torch.from_numpy(v)
            out[k] = t.view(torch.bfloat16) if v.dtype == np.uint16 else t
        return out

    def load_into(self, module):
        """the trained parameters and buffers into a PyTorch module, by name (strict=False: the counters
        dpc does not keep, such as num_batches_tracked, stay); load_state_dict's missing and unexpected keys"""
        import torch
        sd = self.state_dict("torch")
        with torch.no_grad():
            res = module.load_state_dict(sd, strict=False)
        # a tied weight (GPT-2's embedding and head) is one tensor under two names: loaded under either
        loaded = {t.data_ptr() for k, t in module.state_dict().items() if k in sd}
        own = module.state_dict()
        missing = [k for k in res.missing_keys if own[k].data_ptr() not in loaded]
        return type(res)(missing, res.unexpected_keys)

    # files
    def save(self, path):
        """the parameters and buffers to a safetensors file (the executable's --save)"""
        self._check(self._lib.dpc_save(self._open(), os.fspath(path).encode()))

    def save_state(self, path):
        """everything a resumed session needs: parameters, buffers, Adam's moments, the step"""
        self._check(self._lib.dpc_save_state(self._open(), os.fspath(path).encode()))

    def resume(self, path):
        self._check(self._lib.dpc_resume(self._open(), os.fspath(path).encode()))

    def close(self):
        """ends the session (the executable's closing work where its options ask for it: --save,
        --summary, the last line); the library's temporary folder goes"""
        s, self._s = self._s, None
        try:
            if s is not None:
                rc = self._lib.dpc_close(s)
                if rc != _capi.OK:
                    raise Error(self._lib.dpc_error(s).decode(), rc)
        finally:
            if self._temp:
                shutil.rmtree(self._temp, ignore_errors=True)
                self._temp = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_s", None) is not None:
                self.close()
        except Exception:
            pass

    def __repr__(self):
        return "<dpc.Trainer %s: %d inputs, %d parameters, %s, %d steps>" % (
            getattr(self, "model", "?"), len(getattr(self, "inputs", [])), len(getattr(self, "params", [])),
            getattr(self, "optimizer", "?"), self.steps_done if self._s is not None else 0)

