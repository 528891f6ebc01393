#!/usr/bin/env python3
"""Every read of a block reduction's shared partials (dp_partials_*) in a
PTX file has a barrier between it and the shared stores before it, in the
text's order. LLVM once moved the reads of a second reduction above its
barrier (the shared array was internal, so the barrier was taken not to
touch it): a race on the GPU. Usage: barriers.py FILE...; exit 1 naming
each kernel and line that breaks it."""
import re
import sys

bad = 0
for path in sys.argv[1:]:
    kernel, last = "?", None
    for no, line in enumerate(open(path), 1):
        s = line.strip()
        m = re.match(r"\.visible \.entry (\w+)", s)
        if m:
            kernel, last = m.group(1), None
        if s.startswith("bar.sync"):
            last = "bar.sync"
        elif s.startswith("st.shared"):
            last = s
        elif s.startswith("ld.shared") and "dp_partials_" in s and last != "bar.sync":
            print(f"{path}:{no}: {kernel}: reads the block's partials with no barrier since {last or 'the start'}: {s}")
            bad += 1
sys.exit(1 if bad else 0)
