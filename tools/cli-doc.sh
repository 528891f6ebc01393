#!/usr/bin/env bash
# docs/cli.md's two blocks of options from the programs' --help, each
# printed from its options table (compiler/main.c, runtime/opts.c); the
# page's other text is kept. tests/cli writes it again and fails where the
# committed page differs:
#   bash tools/cli-doc.sh [FILE]     (default docs/cli.md; needs bin/dpc, or $DPC)
set -eu
cd "$(dirname "$0")/.."
out=${1:-docs/cli.md}
dpc=${DPC:-bin/dpc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the page shows a build with the CUDA toolkit, whichever built it
"$dpc" --help | sed -e 's/default cpu,$/default cuda,/' -e 's/built without the CUDA toolkit/built with the CUDA toolkit/' \
	>"$tmp/dpc.txt"
# the executable's options are the same for every model; a small one shows them
printf 'loss { return 1.0 }\n' >"$tmp/MODEL.dp"
"$dpc" --target cpu "$tmp/MODEL.dp" -o "$tmp/MODEL" >/dev/null
(cd "$tmp" && ./MODEL --help) >"$tmp/exe.txt"
# each block between its markers replaced, everything else as it was
awk -v dpc="$tmp/dpc.txt" -v exe="$tmp/exe.txt" '
	function block(f) { print "```"; while ((getline l < f) > 0) print l; close(f); print "```"; skip = 1 }
	/^<!-- end of / { skip = 0 }
	skip { next }
	{ print }
	/^<!-- dpc --help:/ { block(dpc) }
	/^<!-- \.\/MODEL --help:/ { block(exe) }
' docs/cli.md >"$out.tmp"
mv "$out.tmp" "$out"
