#!/usr/bin/env bash
# docs/cli.md from the two programs' --help, each printed from its options
# table (compiler/main.c, runtime/opts.c); tests/cli writes it again and
# fails where the committed page differs:
#   bash tools/cli-doc.sh [FILE]     (default docs/cli.md; needs bin/dpc, or $DPC)
set -eu
cd "$(dirname "$0")/.."
out=${1:-docs/cli.md}
dpc=${DPC:-bin/dpc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the executable's options are the same for every model; a small one shows them
printf 'loss { return 1.0 }\n' >"$tmp/MODEL.dp"
"$dpc" --target cpu "$tmp/MODEL.dp" -o "$tmp/MODEL" >/dev/null
{
	cat <<'MD'
# The command lines

Both programs print these with `--help`; each comes from one table of
options (`compiler/main.c` for `dpc`, `runtime/opts.c` for the executable)
that also parses and checks them. This page is written by
`bash tools/cli-doc.sh`, and `make test` fails where it differs from the
programs' `--help`.

## dpc

The default target is the one this dpc was built for: `cuda` when the CUDA
toolkit was found at build time (shown here), else `cpu`.

```
MD
	# the page shows a build with the CUDA toolkit, whichever built it
	"$dpc" --help | sed -e 's/default cpu,$/default cuda,/' -e 's/built without the CUDA toolkit/built with the CUDA toolkit/'
	cat <<'MD'
```

## The training executable

`dpc MODEL.dp -o MODEL` writes `./MODEL`, whose options are the same for
every model:

```
MD
	(cd "$tmp" && ./MODEL --help)
	echo '```'
} >"$out.tmp"
mv "$out.tmp" "$out"
