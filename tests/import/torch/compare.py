#!/usr/bin/env python3
"""tests/import: dpc's first step on a PyTorch export against PyTorch's own results (export.py).

  python3 tests/import/torch/compare.py NAME SUMMARY.json GRADS.safetensors

Prints "ok - " or "not ok - " lines: the loss within 1e-10 relative, and every parameter's
gradient within 1e-10 of its largest entry (or of 1e-4 of the model's largest, where a gradient
is zero in exact arithmetic and holds rounding alone), each under its state-dict name (a tied
weight under any of its names).
"""
import json
import os
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, ".."))
import reference  # noqa: E402

name, summary, grads = sys.argv[1:4]
ref = dict(np.load(os.path.join(here, name + ".ref.npz")))
want_loss = float(ref.pop("__loss__"))
aliases = json.loads(str(ref.pop("__aliases__")))
got_loss = json.load(open(summary))["loss_first"]
rel = abs(got_loss - want_loss) / abs(want_loss)
print(("ok - " if rel <= 1e-10 else "not ok - ") + f"import/torch {name}: the loss is PyTorch's within 1e-10 "
      f"({got_loss!r} vs {want_loss!r})")
got = reference.read_safetensors(grads)
for k, names in aliases.items():  # a tied weight's gradient, under whichever name dpc keeps it
    got.setdefault(k, next((got[a] for a in names if a in got), None))
got = {k: v for k, v in got.items() if v is not None}
floor = 1e-4 * max(np.abs(v).max() for v in ref.values())
missing = sorted(k for k in ref if k not in got)
worst, where = 0.0, ""
for k, v in ref.items():
    if k in got:
        e = float(np.abs(v - got[k]).max() / max(np.abs(v).max(), floor))
        worst, where = (e, k) if e > worst else (worst, where)
good = not missing and worst <= 1e-10
print(("ok - " if good else "not ok - ") + f"import/torch {name}: all {len(ref)} gradients are PyTorch's within 1e-10 "
      f"(worst {worst:.1e}{', ' + where if where else ''}{'; missing ' + ', '.join(missing[:5]) if missing else ''})")
