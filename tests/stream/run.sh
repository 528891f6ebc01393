#!/usr/bin/env bash
# Tensor streaming on the CPU device, each streamed layer's optimizer step on
# the host:
#  - trained parameters and first-step gradients bitwise identical, streamed
#    and all-resident, with SGD and Adam, store-everything and binomial;
#  - the bytes the run moved equal the compiler's prediction, and under
#    store-everything also the closed form computed here;
#  - a residual MLP whose parameters and Adam state are 8x --device-mem trains
#    within the budget;
#  - a deep stack under binomial checkpointing plus streaming: device memory
#    independent of L;
#  - f64 gradients of streamed programs against finite differences;
#  - a head tied to the embedding adds its gradient into the embedding's:
#    a GPT streams under 60% of its weights;
#  - budgets that cannot work are refused, naming the size that would.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/stream"
mkdir -p "$o"


# The closed form of one store-everything step, from the program's own
# declarations: a streamed stacked parameter of L units of u bytes, with k
# slots, is fetched L times forward and L - k times in reverse (the last k
# units are still in their slots), and each unit's gradient goes down once;
# the optimizer's step runs on the host, so Adam's moments never move.
closed_form() { # FILE.dp SCHEDULE.json -> "H2D D2H"
	"$DPC" --emit=ir "${@:3}" "$1" | python3 -c "
import json, re, sys
sched = json.load(open(sys.argv[1]))
k = sched['transfers']['device_slots']
streamed = set(sched['streamed'])
h2d = d2h = 0
for name, L, dims in re.findall(r'^param (\w+) : f32\[(\d+)\]\[([\d, ]+)\]', sys.stdin.read(), re.M):
    if name not in streamed:
        continue
    L, u = int(L), 4
    for d in dims.split(','):
        u *= int(d)
    h2d += (2 * L - min(k, L)) * u
    d2h += L * u
print(h2d, d2h)" "$2"
}

# 1. bitwise identity, and measured bytes equal the prediction
steps=5
for prog in samples/resmlp.dp tests/stream/stack.dp; do
	name=$(basename "$prog" .dp)
	defs=""
	[ "$name" = stack ] && defs="-D L=40"
	for opt in sgd adam; do
		for ck in none binomial "binomial --snapshots 3"; do
			tag="$name.$opt.${ck// --snapshots /s}"
			res="$o/$tag.res" str="$o/$tag.str"
			if ! "$DPC" $defs --optimizer $opt --checkpoint $ck "$prog" -o "$res" >"$res.log" 2>&1 ||
				! "$DPC" $defs --optimizer $opt --checkpoint $ck --stream params --schedule-json "$str.sched" \
					"$prog" -o "$str" >"$str.log" 2>&1; then
				notok "stream/$tag: compile" "$str.log"
				continue
			fi
			"$res" --steps $steps --quiet --save "$res.p" --dump-grads "$res.g" >>"$res.log" 2>&1
			if ! "$str" --steps $steps --quiet --save "$str.p" --dump-grads "$str.g" --summary-json "$str.json" >>"$str.log" 2>&1; then
				notok "stream/$tag: run" "$str.log"
				continue
			fi
			if [ "$(json "$str.json" host_pool_bytes)" = 0 ]; then
				notok "stream/$tag: nothing was streamed" "$str.log"
				continue
			fi
			if cmp -s "$res.p" "$str.p" && cmp -s "$res.g" "$str.g"; then
				ok "stream/$tag: parameters after $steps steps and first gradients bitwise identical to resident"
			else
				notok "stream/$tag: streamed and resident differ" "$str.log"
			fi
			mh=$(json "$str.json" stream_h2d_bytes) md=$(json "$str.json" stream_d2h_bytes)
			ph=$(json "$str.json" predicted_stream_h2d_bytes) pd=$(json "$str.json" predicted_stream_d2h_bytes)
			# --dump-grads copies the first step's gradients apart from the stream; the totals count them
			if [ "$mh" = "$ph" ] && [ "$md" = "$pd" ] && [ "$mh" -gt 0 ] &&
				[ "$(json "$str.json" h2d_bytes) $(json "$str.json" d2h_bytes)" = \
				  "$(json "$str.json" predicted_h2d_bytes) $(json "$str.json" predicted_d2h_bytes)" ]; then
				ok "stream/$tag: moved $mh bytes host->device, $md back, as predicted"
			else
				notok "stream/$tag: moved $mh / $md bytes, predicted $ph / $pd" "$str.log"
			fi
			if [ "$ck" = none ]; then
				want=$(closed_form "$prog" "$str.sched" $defs)
				got="$((ph / steps)) $((pd / steps))"
				if [ "$want" = "$got" ]; then
					ok "stream/$tag: per-step bytes $got equal the closed form"
				else
					notok "stream/$tag: per-step bytes $got, closed form $want"
				fi
			fi
		done
	done
done

# 2. a model 8x the budget: W is 64 x 256 x 256; parameters + Adam state = 3 x 16.9 MB
big="-D L=64 -D H=256 -D B=8"
pbytes=$(( (64 * 256 * 256 + 64 * 256 + 32 * 256 + 256) * 4 ))
budget=$(( pbytes * 3 / 8 ))
exe="$o/big"
if "$DPC" $big --optimizer adam --device-mem $budget --schedule-json "$exe.sched" samples/resmlp.dp -o "$exe" >"$exe.log" 2>&1 &&
	"$exe" --steps 30 --lr 0.0003 --quiet --summary-json "$exe.json" >>"$exe.log" 2>&1; then
	peak=$(json "$exe.json" peak_device_bytes) first=$(json "$exe.json" loss_first) last=$(json "$exe.json" loss_last)
	if [ "$peak" -le "$budget" ] && [ "$peak" = "$(json "$exe.json" predicted_device_bytes)" ] &&
		python3 -c "import sys; sys.exit(not float(sys.argv[2]) < 0.9 * float(sys.argv[1]))" "$first" "$last"; then
		ok "stream/8x-budget: params + adam state $((pbytes * 3)) bytes train in $peak <= $budget bytes; loss $first -> $last"
	else
		notok "stream/8x-budget: peak $peak (budget $budget), loss $first -> $last" "$exe.log"
	fi
	want=$(closed_form samples/resmlp.dp "$exe.sched" $big)
	ph=$(json "$exe.json" predicted_stream_h2d_bytes) pd=$(json "$exe.json" predicted_stream_d2h_bytes)
	mh=$(json "$exe.json" stream_h2d_bytes) md=$(json "$exe.json" stream_d2h_bytes)
	if [ "$(json "$exe.json" h2d_bytes)" = "$(json "$exe.json" predicted_h2d_bytes)" ] &&
		[ "$(json "$exe.json" d2h_bytes)" = "$(json "$exe.json" predicted_d2h_bytes)" ]; then
		ok "stream/8x-budget: all transfers as predicted: $(json "$exe.json" h2d_bytes) bytes up, $(json "$exe.json" d2h_bytes) down"
	else
		notok "stream/8x-budget: transfers differ from the prediction" "$exe.json"
	fi
	if [ "$want" = "$((mh / 30)) $((md / 30))" ] && [ "$mh" = "$ph" ] && [ "$md" = "$pd" ]; then
		ok "stream/8x-budget: moved $mh / $md bytes in 30 steps: prediction and closed form"
	else
		notok "stream/8x-budget: moved $mh / $md, predicted $ph / $pd, closed form per step $want" "$exe.log"
	fi
else
	notok "stream/8x-budget: compile and train" "$exe.log"
	notok "stream/8x-budget: bytes"
fi

# 3. a deep stack: binomial checkpointing plus streaming, device memory flat in L
peaks=""
for L in 200 400; do
	exe="$o/stack$L"
	if "$DPC" -D L=$L --checkpoint binomial --snapshots 8 --stream params tests/stream/stack.dp -o "$exe" >"$exe.log" 2>&1 &&
		"$exe" --steps 1 --quiet --summary-json "$exe.json" >>"$exe.log" 2>&1 &&
		[ "$(json "$exe.json" stream_h2d_bytes)" = "$(json "$exe.json" predicted_stream_h2d_bytes)" ]; then
		peaks="$peaks $(json "$exe.json" peak_device_bytes)"
	else
		notok "stream/stack L=$L: run, bytes as predicted" "$exe.log"
		peaks="$peaks none$L"
	fi
done
set -- $peaks
if [ "$1" = "${2:-}" ]; then
	ok "stream/stack: peak device bytes $1 at L = 200 and L = 400"
else
	notok "stream/stack: peak device bytes$peaks at L = 200, 400"
fi

# 4. gradients of streamed programs against finite differences (f64)
gc=0
for args in "samples/resmlp.dp" "--checkpoint binomial --snapshots 2 tests/stream/stack.dp -D L=12" \
	"--optimizer adam --checkpoint binomial samples/resmlp.dp"; do
	exe="$o/gc$((++gc))"
	if "$DPC" --precision f64 --stream params $args -o "$exe" >"$exe.log" 2>&1 &&
		"$exe" --gradcheck --gradcheck-samples 4 >>"$exe.log" 2>&1; then
		ok "stream/gradcheck: $args"
	else
		notok "stream/gradcheck: $args" "$exe.log"
	fi
done

# 5. binomial snapshots beyond the device budget live in host memory. The
# budget holds the plan with one snapshot and 3 more (the streamed plan one
# unit ahead), so 5 of 8 go to the host. Trained parameters and gradients
# bitwise identical to the resident store-everything run, bytes as
# predicted, peak within budget.
host_snaps() { python3 -c "import json,sys; print(sum(l['host_snapshots'] for l in json.load(open(sys.argv[1]))['loops']))" "$1"; }
# the budget for one snapshot plus N: ARGS... N; with --stream params, at the least prefetch distance
snap_budget() {
	local n=${!#} args=("${@:1:$#-1}") j="$o/budget.json"
	"$DPC" "${args[@]}" --snapshots 1 --emit=schedule --schedule-json "$j" >/dev/null 2>&1 || { echo 0; return; }
	if [ "$(json "$j" transfers prefetch_distance)" -gt 1 ]; then
		"$DPC" "${args[@]}" --snapshots 1 --device-mem $(($(json "$j" peak_device_bytes total) - 1)) \
			--emit=schedule --schedule-json "$j" >/dev/null 2>&1 || { echo 0; return; }
	fi
	echo $(($(json "$j" peak_device_bytes total) + n * $(json "$j" peak_device_bytes snapshots)))
}
for opt in sgd adam; do
	ref="$o/hs.$opt.ref"
	if ! "$DPC" --optimizer $opt samples/resmlp.dp -o "$ref" >"$ref.log" 2>&1 ||
		! "$ref" --steps $steps --quiet --save "$ref.p" --dump-grads "$ref.g" >>"$ref.log" 2>&1; then
		notok "stream/host-snapshots $opt: reference" "$ref.log"
		continue
	fi
	for mode in none params; do
		tag="hs.$opt.$mode" exe="$o/hs.$opt.$mode"
		flags="--optimizer $opt --checkpoint binomial"
		budget=$(snap_budget $flags --stream $mode samples/resmlp.dp 3)
		[ $mode = none ] && mode=auto
		if ! "$DPC" $flags --snapshots 8 --stream $mode --device-mem $budget --schedule-json "$exe.sched" \
			samples/resmlp.dp -o "$exe" >"$exe.log" 2>&1 || ! "$exe" --steps $steps --quiet --save "$exe.p" \
			--dump-grads "$exe.g" --summary-json "$exe.json" >>"$exe.log" 2>&1; then
			notok "stream/$tag: compile and run" "$exe.log"
			continue
		fi
		nh=$(host_snaps "$exe.sched") peak=$(json "$exe.json" peak_device_bytes)
		if [ "$nh" = 5 ] && [ "$peak" -le "$budget" ] && cmp -s "$ref.p" "$exe.p" && cmp -s "$ref.g" "$exe.g"; then
			ok "stream/$tag: $nh of 8 snapshots in host memory, peak $peak <= $budget; bitwise identical to store-everything"
		else
			notok "stream/$tag: $nh of 8 snapshots in host memory (want 5), peak $peak (budget $budget), or results differ" "$exe.log"
		fi
		mh=$(json "$exe.json" stream_h2d_bytes) md=$(json "$exe.json" stream_d2h_bytes)
		if [ "$mh" = "$(json "$exe.json" predicted_stream_h2d_bytes)" ] &&
			[ "$md" = "$(json "$exe.json" predicted_stream_d2h_bytes)" ] && [ "$md" -gt 0 ] &&
			[ "$(json "$exe.json" h2d_bytes)" = "$(json "$exe.json" predicted_h2d_bytes)" ]; then
			ok "stream/$tag: moved $mh bytes host->device, $md back, as predicted"
		else
			notok "stream/$tag: bytes differ from the prediction" "$exe.json"
		fi
	done
done
# the same with the streamed units' updates deferred (--accum 2 --clip-grad): snapshots in host
# memory move in each micro-batch; parameters bitwise as the resident run's, bytes as predicted
exe="$o/hs.adam.params" ref="$o/hs.adam.ref"
if [ -x "$exe" ] && "$ref" --steps $steps --accum 2 --clip-grad 0.05 --quiet --save "$ref.acc.p" >"$exe.acc.log" 2>&1 &&
	"$exe" --steps $steps --accum 2 --clip-grad 0.05 --quiet --save "$exe.acc.p" --summary-json "$exe.acc.json" >>"$exe.acc.log" 2>&1 &&
	cmp "$ref.acc.p" "$exe.acc.p" >>"$exe.acc.log" 2>&1 && [ "$(host_snaps "$exe.sched")" = 5 ] &&
	[ "$(json "$exe.acc.json" h2d_bytes)" = "$(json "$exe.acc.json" predicted_h2d_bytes)" ] &&
	[ "$(json "$exe.acc.json" d2h_bytes)" = "$(json "$exe.acc.json" predicted_d2h_bytes)" ]; then
	ok "stream/host-snapshots accum 2, clipped: bitwise as resident, $(json "$exe.acc.json" h2d_bytes) bytes up as predicted"
else
	notok "stream/host-snapshots accum 2, clipped" "$exe.acc.log"
fi
# without --snapshots, streamed parameters top the count up in host memory
# to ceil(sqrt(n)) + 1: the budget holds 3 rows, 2 slots and the staging row
exe="$o/hs.topup"
budget=$(snap_budget --checkpoint binomial --stream params -D L=100 tests/stream/stack.dp 2)
if "$DPC" -D L=100 --checkpoint binomial --stream params --device-mem $budget --schedule-json "$exe.sched" \
	tests/stream/stack.dp -o "$exe" >"$exe.log" 2>&1 &&
	"$DPC" -D L=100 tests/stream/stack.dp -o "$exe.ref" >>"$exe.log" 2>&1 &&
	"$exe.ref" --steps 3 --quiet --save "$exe.ref.p" >>"$exe.log" 2>&1 &&
	"$exe" --steps 3 --quiet --save "$exe.p" --summary-json "$exe.json" >>"$exe.log" 2>&1; then
	s=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['loops'][0]['s'])" "$exe.sched")
	nh=$(host_snaps "$exe.sched")
	if [ "$s" = 11 ] && [ "$nh" = 9 ] && cmp -s "$exe.p" "$exe.ref.p" &&
		[ "$(json "$exe.json" stream_h2d_bytes)" = "$(json "$exe.json" predicted_stream_h2d_bytes)" ] &&
		[ "$(json "$exe.json" stream_d2h_bytes)" = "$(json "$exe.json" predicted_stream_d2h_bytes)" ]; then
		ok "stream/host-snapshots top-up: L=100 reversed with 11 snapshots, $nh in host memory; bytes as predicted; identical"
	else
		notok "stream/host-snapshots top-up: s $s (want 11), $nh in host memory (want 9), or bytes or parameters differ" "$exe.log"
	fi
else
	notok "stream/host-snapshots top-up: compile and run" "$exe.log"
fi
exe="$o/gc-hs"
budget=$(snap_budget --precision f64 --checkpoint binomial tests/stream/stack.dp -D L=12 2)
if "$DPC" --precision f64 --checkpoint binomial --snapshots 6 --device-mem $budget --schedule-json "$exe.sched" \
	tests/stream/stack.dp -D L=12 -o "$exe" >"$exe.log" 2>&1 && [ "$(host_snaps "$exe.sched")" -gt 0 ] &&
	"$exe" --gradcheck --gradcheck-samples 4 >>"$exe.log" 2>&1; then
	ok "stream/gradcheck: snapshots in host memory (stack L=12, $(host_snaps "$exe.sched") of 6)"
else
	notok "stream/gradcheck: snapshots in host memory" "$exe.log"
fi

# 7. a head tied to the token embedding (GPT-2's): its two [V, D] gradient
# products, the head's GEMM and the embedding's, are added into wte's
# gradient as they are made, so the work region holds neither; the GPT then
# streams its layers under 60% of its weights, gradients bitwise as all-resident
tied="-D L=12 -D D=128 -D H=4 -D T=8 -D V=4096 -D B=1"
vd=$((4096 * 128 * 4))
work=$("$DPC" $tied --emit=stream samples/gpt.dp 2>"$o/tied.log" | sed -n 's/.* work \([0-9]*\) .*/\1/p')
into=$("$DPC" $tied --emit=stream samples/gpt.dp 2>>"$o/tied.log" | grep -c "added into %grad_wte")
if [ "$into" = 2 ] && [ -n "$work" ] && [ "$work" -lt "$vd" ]; then
	ok "stream/tied head: both [V, D] products added into wte's gradient (work $work bytes < one product's $vd)"
else
	notok "stream/tied head: both [V, D] products added into wte's gradient (work '$work', $into of 2 added into)" "$o/tied.log"
fi
weights=$(( $("$DPC" $tied --emit=stream samples/gpt.dp | sed -n 's/.* params \([0-9]*\) .*/\1/p') ))
budget=$((weights * 60 / 100))
if "$DPC" $tied samples/gpt.dp -o "$o/tied.res" >>"$o/tied.log" 2>&1 &&
	"$DPC" $tied --device-mem $budget samples/gpt.dp -o "$o/tied.str" >>"$o/tied.log" 2>&1 &&
	"$o/tied.res" --steps 1 --quiet --dump-grads "$o/tied.res.g" >>"$o/tied.log" 2>&1 &&
	"$o/tied.str" --steps 1 --quiet --dump-grads "$o/tied.str.g" --summary-json "$o/tied.json" >>"$o/tied.log" 2>&1 &&
	cmp -s "$o/tied.res.g" "$o/tied.str.g" && [ "$(json "$o/tied.json" peak_device_bytes)" -le $budget ] &&
	[ "$(json "$o/tied.json" stream_h2d_bytes)" -gt 0 ]; then
	ok "stream/tied head: GPT streams under --device-mem $budget (60% of its $weights bytes of weights), gradients bitwise"
else
	notok "stream/tied head: GPT streams under --device-mem $budget (60% of its weights), gradients bitwise" "$o/tied.log"
fi

# 6. what cannot work is refused at compile time, with the size that would
expect stream/device-too-small 1 "needs at least .* ([0-9]* bytes) of device memory with every stackable parameter streamed" \
	"$DPC" $big --device-mem 100000 samples/resmlp.dp -o "$o/x"
expect stream/host-too-small 1 "host pool needs .* ([0-9]* bytes) of pinned host memory (streamed values .*, their gradients as they come down .*), more than --host-mem .* (1000 bytes)" \
	"$DPC" --stream params --host-mem 1000 samples/resmlp.dp -o "$o/x"
expect stream/host-snapshots-too-small 1 "host pool needs .* ([0-9]* bytes) of pinned host memory (snapshots .*), more than --host-mem .* (1000 bytes)" \
	"$DPC" --checkpoint binomial --snapshots 8 --device-mem 1400000 --host-mem 1000 samples/resmlp.dp -o "$o/x"
expect stream/emit-host-snapshots 0 "revolve 0..8 snapshots 8 ([1-7] in host memory)" \
	"$DPC" --checkpoint binomial --snapshots 8 --device-mem 1400000 --emit=stream samples/resmlp.dp
expect stream/nothing-streams 1 "no parameter can stream" "$DPC" --stream params samples/classifier.dp -o "$o/x"
expect stream/bad-mode 2 "--stream takes none, auto or params, not 'all'" "$DPC" --stream all samples/resmlp.dp
expect stream/none-refuses 1 "more than --device-mem" "$DPC" $big --stream none --device-mem $budget samples/resmlp.dp -o "$o/x"
expect stream/too-long 1 "stack.dp:11:7: error: this loop of 3000000000 steps streams its layers" \
	"$DPC" -D L=3000000000 --stream params --emit=schedule tests/stream/stack.dp
# --emit=stream shows residency and every transfer
expect stream/emit 0 "h2d %slots_W" "$DPC" --stream params --emit=stream samples/resmlp.dp
expect stream/emit-host 0 "%W.* host @ 0" "$DPC" --stream params --emit=stream samples/resmlp.dp
expect stream/emit-update 0 "update %host_grad_W.*\[%l.*\], %grad_W_unit.*# sgd W on the host" "$DPC" --stream params --emit=stream samples/resmlp.dp
finish
