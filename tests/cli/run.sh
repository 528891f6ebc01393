#!/usr/bin/env bash
# The dpc command line: help, bad options and files give clear errors and
# the documented exit status.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
out="$TEST_OUT/cli"


expect cli/help 0 "--emit=STAGE" "$DPC" --help
# README is a front page (issue 41): under 8 KB, its two set-up commands there, and every link in it and in
# docs/ names a file of the repository and a heading of it
check "cli/readme-front-page: README.md under 8 KB, with make deps && make run and make deps && make test" \
	python3 -c "
import sys
s = open('README.md').read()
assert len(s.encode()) < 8192, len(s.encode())
assert 'make deps && make run' in s and 'make deps && make test' in s
print(len(s.encode()), 'bytes')"
check "cli/doc-links: the links of README.md and docs/ lead inside the repository" python3 tools/check-links.py
# no two folders of compiler/, runtime/ and common/ include each other, directly or in a loop (issue 41)
check "cli/include-arrows: the folders' includes run one way" python3 tools/check-includes.py
# docs/cli.md is both programs' --help, each printed from its options table (issue 41)
if DPC="$DPC" bash tools/cli-doc.sh "$out.cli.md" >"$out.cli.log" 2>&1 && diff docs/cli.md "$out.cli.md" >>"$out.cli.log" 2>&1; then
	ok "cli/docs-match-help: docs/cli.md is dpc --help and the executable's --help"
else
	notok "cli/docs-match-help: docs/cli.md differs from --help (bash tools/cli-doc.sh writes it)" "$out.cli.log"
fi
expect cli/no-input 2 "no input file" "$DPC"
expect cli/unknown-option 2 "unknown option '--frobnicate'" "$DPC" --frobnicate samples/resmlp.dp
expect cli/bad-stage 2 "unknown stage 'bogus'" "$DPC" --emit=bogus samples/resmlp.dp
expect cli/bad-precision 2 "f32, f64, bf16 or bf16-mixed" "$DPC" --precision f16 samples/resmlp.dp
expect cli/bad-define 2 "NAME=VALUE" "$DPC" -D B samples/resmlp.dp
expect cli/bad-define-value 2 "must be an integer" "$DPC" -D B=x samples/resmlp.dp
expect cli/unknown-define 1 "no const named" "$DPC" -D NOPE=3 --emit=ir samples/resmlp.dp
expect cli/missing-file 1 "nope.dp" "$DPC" nope.dp
expect cli/bad-budget 2 "bad byte count" "$DPC" --device-mem lots samples/resmlp.dp
expect cli/infeasible-budget 1 "more than --device-mem" "$DPC" --device-mem 1K -o "$out.exe" samples/resmlp.dp
expect cli/budget-overflow 2 "byte count '99999999999999999999' is out of range" "$DPC" --device-mem 99999999999999999999 samples/resmlp.dp
expect cli/budget-huge-unit 2 "out of range" "$DPC" --device-mem 9999999999T samples/resmlp.dp
# both sizes exactly, beside the rounded figures that could look equal
expect cli/infeasible-budget-bytes 1 "needs 1.7 MiB ([0-9]* bytes) .* more than --device-mem 1.7 MiB (1740000 bytes)" \
	"$DPC" --checkpoint none --stream none --device-mem 1740000 -o "$out.exe" samples/resmlp.dp
# --device-mem makes --checkpoint auto the default: the same budget fits by the sweep, and
# without a budget the default stays store-everything
expect cli/device-mem-checkpoints 0 "sweep with s [0-9]* snapshots" \
	"$DPC" --stream none --device-mem 1740000 --emit=schedule samples/resmlp.dp
expect cli/no-budget-stores-everything 0 "store everything" "$DPC" --emit=schedule samples/resmlp.dp
expect cli/define-overflow 2 "out of range" "$DPC" -D B=99999999999999999999 samples/resmlp.dp
expect cli/define-too-large 2 "out of range" "$DPC" -D B=2000000000000 samples/resmlp.dp
expect cli/snapshots-overflow 2 "out of range" "$DPC" --checkpoint binomial --snapshots 99999999999999999999 samples/resmlp.dp
expect cli/bad-optimizer 2 "--optimizer takes sgd or adam, not 'rmsprop'" "$DPC" --optimizer rmsprop samples/resmlp.dp
# adam's moments count against the budget: the arena that fits sgd does not fit adam storing everything (auto
# fits it by recomputing)
"$DPC" --emit=schedule --schedule-json "$out.sgd.json" samples/resmlp.dp >/dev/null
sgd_total=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_device_bytes']['total'])" "$out.sgd.json")
expect cli/budget-fits-sgd 0 "optimizer state 0 (sgd)" "$DPC" --emit=schedule --device-mem "$sgd_total" samples/resmlp.dp
expect cli/budget-refuses-adam 1 "optimizer state 1.0 MiB, .* more than --device-mem .* ($sgd_total bytes)" \
	"$DPC" --emit=schedule --checkpoint none --stream none --optimizer adam --device-mem "$sgd_total" samples/resmlp.dp
# a graph of more candidates than the exact search's work limit allows: -v says it fell back, and the bound
expect cli/greedy-search-noted 0 "straight-line search: greedy over [0-9]* candidates (the exact search passed its work limit" \
	"$DPC" --target cpu -v -D B=8 -D S=32 --device-mem 8M --stream none --emit=schedule samples/densenet.dp
# a budget below every plan the selection finds: the error names the least it found, and min-memory
# (2,840,000 bytes: above the bound, 2,817,792, below the least found, 2,859,008)
expect cli/budget-below-least 1 "more than --device-mem 2.7 MiB (2840000 bytes); that is the least plan the checkpoint selection found.*min-memory would; no plan can go below 2817792 bytes" \
	"$DPC" --target cpu -D B=8 -D S=32 --device-mem 2840000 --stream none -o /dev/null samples/densenet.dp
expect cli/bad-checkpoint 2 "none, binomial, auto or min-memory" "$DPC" --checkpoint revolve samples/resmlp.dp
expect cli/bad-offload-cost 2 "--offload-cost needs a count of FLOPs of at least 0, not '-1'" \
	"$DPC" --offload-cost -1 samples/resmlp.dp
expect cli/offload-cost-overflow 2 "out of range" "$DPC" --offload-cost 99999999999999999999 samples/resmlp.dp
expect cli/bad-threads 2 "--threads needs a count of at least 1, not '0'" "$DPC" --threads 0 samples/resmlp.dp
expect cli/threads-overflow 2 "--threads 2000 is out of range (at most 1024)" "$DPC" --threads 2000 samples/resmlp.dp
expect cli/bad-snapshots 2 "at least 1" "$DPC" --checkpoint binomial --snapshots 0 samples/resmlp.dp
expect cli/snapshots-without-checkpoint 2 "--snapshots needs --checkpoint binomial or auto" "$DPC" --snapshots 4 samples/resmlp.dp
expect cli/snapshots-with-none 2 "--snapshots has no meaning with --checkpoint none" \
	"$DPC" --checkpoint none --snapshots 4 samples/resmlp.dp
expect cli/schedule 0 "binomial with s 3 snapshots, r 2" "$DPC" --emit=schedule --checkpoint binomial --snapshots 3 samples/resmlp.dp
expect cli/define-changes-shape 0 "f32\[16, 32\]" "$DPC" -D B=16 --emit=ir samples/resmlp.dp

# the default target: cuda when dpc was built with the CUDA toolkit
expect cli/bad-target 2 "takes cpu or cuda, not 'gpu'" "$DPC" --target gpu samples/resmlp.dp
expect cli/bad-env-target 2 "DPC_TARGET takes cpu or cuda" env DPC_TARGET=gpu "$DPC" samples/resmlp.dp
if [ -f "$DPC_BUILD/runtime/libdprt_cuda.a" ]; then
	expect cli/help-default-target 0 "default cuda" "$DPC" --help
	if env -u DPC_TARGET "$DPC" samples/classifier.dp -o "$out.default" >"$out.default.log" 2>&1; then
		if ls /dev/nvidia0 >/dev/null 2>&1; then
			expect cli/default-is-cuda 0 "device cuda" "$out.default" --steps 1
		else
			expect cli/default-is-cuda 1 "compiled for NVIDIA GPUs" "$out.default" --steps 1
		fi
	else
		notok "cli/default-is-cuda: compile" "$out.default.log"
	fi
else
	expect cli/help-default-target 0 "default cpu" "$DPC" --help
fi
if env DPC_TARGET=cuda "$DPC" --target cpu samples/classifier.dp -o "$out.cpu" >"$out.cpu.log" 2>&1; then
	expect cli/option-overrides-env-target 0 "device cpu" "$out.cpu" --steps 1
else
	notok "cli/option-overrides-env-target: compile" "$out.cpu.log"
fi

# killed while it writes its object, dpc leaves no temporary file behind
tmp="$out.tmpdir"
rm -rf "$tmp" && mkdir -p "$tmp"
python3 -c "print('param W : f32[4, 1] = normal(0.1)\ninput x : f32[4, 1]\nloss { let h = x * W\nreturn mean(' + ' + '.join(['h'] * 100000) + ') }')" >"$out.long.dp"
TMPDIR="$tmp" "$DPC" "$out.long.dp" -o "$out.long" &
pid=$!
seen=0
for _ in $(seq 600); do
	if ls "$tmp"/dpc-*.o >/dev/null 2>&1; then seen=1; break; fi
	sleep 0.05
done
kill -TERM "$pid"
wait "$pid"
rc=$?
if [ "$seen" = 1 ] && [ "$rc" = 143 ] && [ -z "$(ls -A "$tmp")" ] && [ ! -e "$out.long" ]; then
	ok "cli/sigterm-removes-temporary-object"
else
	notok "cli/sigterm-removes-temporary-object: object seen $seen, exit status $rc, left: $(ls -A "$tmp")"
fi
expect cli/tmpdir-missing 1 "cannot create a temporary object file" env TMPDIR=/nonexistent/dir "$DPC" -o "$out.exe" samples/resmlp.dp

# the executable's own command line
if "$DPC" samples/resmlp.dp -o "$out.resmlp" >"$out.log" 2>&1; then
	expect cli/exe-help 0 "--summary-json" "$out.resmlp" --help
	expect cli/exe-unknown-option 2 "unknown option" "$out.resmlp" --frobnicate
	expect cli/exe-missing-data 1 "missing.npy" "$out.resmlp" --data missing.npy --steps 1
else
	notok "cli/compile resmlp" "$out.log"
fi
# DPC_HOST_OPT (the CPU code's optimizer level; make test-sanitize compiles at 0): the same bits at 0 as at the
# default 2, parameters after 3 steps and the last gradients (GPT in f32 and bf16, the DenseNet sample); a bad level
# named
host_opt() { # NAME DPC-ARGS...
	local name=$1 lv
	shift
	for lv in 0 2; do
		DPC_HOST_OPT=$lv "$DPC" --target cpu "$@" -o "$out.opt$lv" >"$out.opt.log" 2>&1 &&
			"$out.opt$lv" --steps 3 --quiet --save "$out.opt$lv.p" --dump-grads "$out.opt$lv.g" >>"$out.opt.log" 2>&1 || return 1
	done
	cmp "$out.opt0.p" "$out.opt2.p" && cmp "$out.opt0.g" "$out.opt2.g"
}
for c in "gpt samples/gpt.dp" "gpt-bf16 --precision bf16 samples/gpt.dp" "densenet samples/densenet.dp"; do
	set -- $c
	name=$1
	shift
	check "cli/host-opt $name: the same bits unoptimized (DPC_HOST_OPT=0) as at the default level" host_opt "$name" "$@"
done
expect cli/host-opt-bad 1 "DPC_HOST_OPT takes 0, 1, 2 or 3" env DPC_HOST_OPT=9 "$DPC" --target cpu samples/classifier.dp -o "$out.opt9"
# the fuzz harnesses are built only by make fuzz (clang's libFuzzer): check
# here that they still compile against the compiler's and runtime's headers
for f in tests/fuzz/fuzz_dpc.c tests/fuzz/fuzz_files.c; do
	if ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Werror -Iruntime -fsyntax-only "$f" >"$out.fuzzcc" 2>&1; then
		ok "cli/fuzz-harness-compiles: $f"
	else
		notok "cli/fuzz-harness-compiles: $f" "$out.fuzzcc"
	fi
done
finish
