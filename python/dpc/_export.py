"""A PyTorch module to ONNX as docs/import.md's recipe exports it, for dpc.compile."""
import contextlib
import copy
import inspect
import io
import os
import warnings


def _is_transformers(module):
    return type(module).__module__.startswith("transformers.")


def _wrap(torch, module):
    class Logits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m
            params = inspect.signature(m.forward).parameters
            self.kw = {"use_cache": False} if "use_cache" in params else {}

        def forward(self, *a):
            out = self.m(*a, **self.kw)
            if hasattr(out, "logits"):
                return out.logits
            if isinstance(out, (tuple, list)):
                return out[0]
            if isinstance(out, dict):
                return next(iter(out.values()))
            return out

    return Logits(module)


def _names(module, n, given):
    if given:
        if len(given) != n:
            raise ValueError("%d input names for %d example inputs" % (len(given), n))
        return list(given)
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [p.name for p in params[:n]]
        if len(names) == n and len(set(names)) == n and all(x.isidentifier() for x in names):
            return names
    except (TypeError, ValueError):
        pass
    return ["x"] if n == 1 else ["x%d" % i for i in range(n)]


def export(module, example_inputs, path, exporter="auto", input_names=None):
    """module (a copy of it, in training mode) exported to path at example_inputs' shapes; the prefix the
    export puts before its parameters' names ("m." where the module had to be wrapped, else "")"""
    import torch
    if not isinstance(module, torch.nn.Module):
        raise TypeError("dpc.compile takes a torch.nn.Module, not %s (give a file to dpc.compile_file)"
                        % type(module).__name__)
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    # a copy: the legacy exporter runs the module once, which moves batch norm's running statistics
    m = copy.deepcopy(module).train()
    with torch.no_grad():
        out = m(*example_inputs)
    prefix = ""
    if not isinstance(out, torch.Tensor):
        m, prefix = _wrap(torch, m), "m."
    names = _names(module, len(example_inputs), input_names)
    if exporter not in ("auto", "legacy", "dynamo"):
        raise ValueError("exporter is 'auto', 'legacy' or 'dynamo', not %r" % exporter)
    if exporter == "auto":
        exporter = "dynamo" if _is_transformers(module) else "legacy"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporters' notes on what they leave out, which dpc knows
        _run(torch, m, example_inputs, path, exporter, names)
    _restore_buffers(module, path, prefix)
    return path, prefix


def _restore_buffers(module, path, prefix):
    """The export traces the module by running it, which moves batch norm's running statistics in the copy
    it exports (and by how much depends on the example and on PyTorch's threads): the trainer must start
    from the user's module as it is, so each initializer that differs from the module's own tensor of
    that name goes back to the module's value."""
    import onnx
    import torch
    from onnx import numpy_helper
    own = {prefix + k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
    model = onnx.load(path)
    changed = 0
    for init in model.graph.initializer:
        t = own.get(init.name)
        if t is None:
            continue
        cur = numpy_helper.to_array(init)
        want = t.numpy() if t.dtype != torch.bfloat16 else None
        if want is None or cur.shape != want.shape or cur.dtype != want.dtype or cur.tobytes() == want.tobytes():
            continue
        init.CopyFrom(numpy_helper.from_array(want, init.name))
        changed += 1
    if not changed:
        return
    big = model.ByteSize() > (1 << 31) - (1 << 26)
    onnx.save(model, path, save_as_external_data=big, all_tensors_to_one_file=True,
              location=os.path.basename(path) + ".data" if big else None)


def _run(torch, m, example_inputs, path, exporter, names):
    if exporter == "legacy":
        torch.onnx.export(m, example_inputs, path, dynamo=False, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=names, output_names=["logits"])
    elif exporter == "dynamo":
        # its progress lines are print()s: quiet, as the legacy exporter is
        with contextlib.redirect_stdout(io.StringIO()):
            torch.onnx.export(m, example_inputs, path, dynamo=True, optimize=False, input_names=names,
                              output_names=["logits"])
    else:
        raise ValueError("exporter is 'auto', 'legacy' or 'dynamo', not %r" % exporter)
