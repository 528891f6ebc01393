#!/usr/bin/env python3
"""Every relative link in README.md and docs/*.md names a file of the
repository, and an anchor a heading of it (GitHub's anchors); links that
leave the repository (../ above its root) are errors too. tests/cli runs it.
  python3 tools/check-links.py"""
import glob
import os
import re
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def anchors(path):
    out = set()
    with open(path) as f:
        fence = False
        for line in f:
            if line.startswith("```"):
                fence = not fence
            m = None if fence else re.match(r"#+ (.*)", line)
            if m:
                a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
                out.add(a)
    return out


bad = []
files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
for doc in files:
    text = re.sub(r"```.*?```", "", open(doc).read(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
        name = os.path.relpath(doc, root)
        if os.path.relpath(full, root).startswith(".."):
            bad.append(f"{name}: {target}: outside the repository")
        elif not os.path.exists(full):
            bad.append(f"{name}: {target}: no such file")
        elif anchor and full.endswith(".md") and anchor not in anchors(full):
            bad.append(f"{name}: {target}: no heading with that anchor")
for b in bad:
    print(b)
print(f"{len(files)} files, {len(bad)} bad links")
sys.exit(1 if bad else 0)
