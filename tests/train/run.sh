#!/usr/bin/env bash
# Every sample trains on the CPU: its loss falls, the summary has the agreed
# keys, and the device arena the runtime measured equals the compiler's plan.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
summary() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }
for dp in samples/*.dp; do
	name=$(basename "$dp" .dp)
	exe="$TEST_OUT/train_$name"
	log="$exe.log"
	if ! "$DPC" "$dp" -o "$exe" >"$log" 2>&1; then
		notok "train/$name: compile" "$log"
		continue
	fi
	steps=60
	data=""
	case $name in
	classifier) lr=0.5 ;;
	oscillator) lr=0.1 ;;
	gpt) lr=0.03 data="--data docs/language.md" ;; # bytes of our own docs
	resnet) lr=0.1 ;;
	dranet) # a toy segmentation set: random labels per pixel cannot be learnt at a quarter of the resolution
		lr=0.1 data="--data $TEST_OUT/seg_x.npy --labels $TEST_OUT/seg_y.npy"
		python3 tools/seg_data.py "$TEST_OUT/seg_x.npy" "$TEST_OUT/seg_y.npy" ;;
	unet) # the same kind of set at its size: 8x8 images, 3 classes, in blocks of 2
		lr=0.1 data="--data $TEST_OUT/unet_x.npy --labels $TEST_OUT/unet_y.npy"
		python3 tools/seg_data.py "$TEST_OUT/unet_x.npy" "$TEST_OUT/unet_y.npy" 32 8 3 2 ;;
	*) lr=0.01 ;;
	esac
	args="--steps $steps --lr $lr $data"
	# loop iterations one step runs, read from the forward program (top-level loops)
	trips=$("$DPC" --emit=ir "$dp" | sed -n 's/^loop [^ ]* in \([0-9]*\)\.\.\([0-9]*\).*/\1 \2/p' | awk '{ n += $2 - $1 } END { print n + 0 }')
	if ! "$exe" $args --summary-json "$exe.json" >"$log" 2>&1; then
		notok "train/$name: run" "$log"
		continue
	fi
	if python3 - "$exe.json" "$steps" "$trips" >"$log.check" 2>&1 <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
need = ["steps", "loss_first", "loss_last", "wall_s", "peak_device_bytes", "h2d_bytes",
        "d2h_bytes", "forward_steps", "recomputed_steps"]
missing = [k for k in need if k not in s]
assert not missing, f"summary lacks {missing}"
assert s["steps"] == int(sys.argv[2]), s["steps"]
assert s["loss_last"] < 0.9 * s["loss_first"], f"loss did not fall: {s['loss_first']} -> {s['loss_last']}"
assert s["peak_device_bytes"] == s["predicted_device_bytes"], (s["peak_device_bytes"], s["predicted_device_bytes"])
assert s["recomputed_steps"] == 0
assert s["forward_steps"] == int(sys.argv[2]) * int(sys.argv[3]), (s["forward_steps"], sys.argv[2], sys.argv[3])
PY
	then
		ok "train/$name (loss $(summary "$exe.json" loss_first) -> $(summary "$exe.json" loss_last))"
	else
		notok "train/$name" "$log.check"
	fi
done
# AdamW, Adam and SGD under each learning-rate schedule (3 warmup steps), 10 steps in f64 against
# tests/train/optim_ref.py's float64 reference (torch.optim.AdamW's and SGD's rules): within 1e-10
o="$TEST_OUT/optim"
mkdir -p "$o"
if "$DPC" --target cpu --precision f64 --optimizer adam tests/train/optim.dp -o "$o/adam" >"$o/build.log" 2>&1 &&
	"$DPC" --target cpu --precision f64 tests/train/optim.dp -o "$o/sgd" >>"$o/build.log" 2>&1; then
	for c in "adam adamw cosine" "adam adamw linear" "adam adamw constant" "adam adam cosine" "sgd sgd linear" "sgd sgd cosine" \
		"adam adamw cosine 0.5" "sgd sgd linear 0.5" "adam adamw cosine 0 3" "sgd sgd constant 2 2"; do
		set -- $c
		if python3 tests/train/optim_ref.py "$o/$1" "$o" $2 $3 ${4:-} ${5:-} >"$o/$2.$3.${4:-}.${5:-}.log" 2>&1; then
			ok "train/optim $(cat "$o/$2.$3.${4:-}.${5:-}.log")"
		else
			notok "train/optim $2 $3 ${4:-} ${5:-} against the float64 reference" "$o/$2.$3.${4:-}.${5:-}.log"
		fi
	done
else
	notok "train/optim: compile" "$o/build.log"
fi
# AdamW on streamed parameters (updated unit by unit in the reverse sweep) as on resident ones, bitwise;
# and the decay changes the result
l="$o/stream.log"
if "$DPC" --target cpu --optimizer adam --stream params samples/resmlp.dp -o "$o/rs_str" >"$l" 2>&1 &&
	"$DPC" --target cpu --optimizer adam samples/resmlp.dp -o "$o/rs_res" >>"$l" 2>&1 &&
	"$o/rs_str" --steps 6 --optimizer adamw --weight-decay 0.1 --lr-schedule cosine --warmup 2 --save "$o/str.st" --quiet >>"$l" 2>&1 &&
	"$o/rs_res" --steps 6 --optimizer adamw --weight-decay 0.1 --lr-schedule cosine --warmup 2 --save "$o/res.st" --quiet >>"$l" 2>&1 &&
	"$o/rs_res" --steps 6 --optimizer adam --lr-schedule cosine --warmup 2 --save "$o/nodecay.st" --quiet >>"$l" 2>&1 &&
	cmp "$o/str.st" "$o/res.st" >>"$l" 2>&1 && ! cmp -s "$o/res.st" "$o/nodecay.st"; then
	ok "train/optim adamw streamed: parameters bitwise as resident"
else
	notok "train/optim adamw streamed" "$l"
fi
# --clip-grad brings the gradients down each step: the bytes counted as predicted
l="$o/clip.log"
if "$o/rs_res" --steps 5 --optimizer adamw --clip-grad 0.1 --summary-json "$o/clip.json" >"$l" 2>&1 &&
	python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['d2h_bytes'] == j['predicted_d2h_bytes'] > 5 * 66000, j" "$o/clip.json" >>"$l" 2>&1; then
	ok "train/optim clip: the gradients' transfers counted as predicted"
else
	notok "train/optim clip: transfers" "$l"
fi
# --accum under binomial checkpointing: parameters bitwise as store-everything's; transfers as predicted
l="$o/accum.log"
if "$DPC" --target cpu --optimizer adam --checkpoint binomial samples/resmlp.dp -o "$o/rs_bin" >"$l" 2>&1 &&
	"$o/rs_bin" --steps 5 --accum 3 --save "$o/accum_bin.st" --quiet >>"$l" 2>&1 &&
	"$o/rs_res" --steps 5 --accum 3 --save "$o/accum_res.st" --summary-json "$o/accum.json" --quiet >>"$l" 2>&1 &&
	cmp "$o/accum_bin.st" "$o/accum_res.st" >>"$l" 2>&1 &&
	python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['h2d_bytes'] == j['predicted_h2d_bytes'] and j['d2h_bytes'] == j['predicted_d2h_bytes'], j" "$o/accum.json" >>"$l" 2>&1; then
	ok "train/optim accum 3: binomial bitwise as store-everything, transfers as predicted"
else
	notok "train/optim accum 3 under binomial" "$l"
fi
expect train/optim-accum-zero 2 "--accum needs an integer in 1..1000000000, not '0'" "$o/sgd" --accum 0
expect train/optim-clip-zero 2 "--clip-grad needs a norm above 0" "$o/sgd" --clip-grad 0
# --clip-grad and --accum with streamed parameters, whose optimizer steps run on the host:
# parameters bitwise as resident ones, transfers as predicted, and K micro-batches of
# --emit=schedule's bytes a step, none added (tests/train/host_update.py); SGD and AdamW,
# store-everything, binomial, and the model 8x its budget (with snapshots in host memory)
big="-D L=64 -D H=256 -D B=8"
big_budget=$(( (64 * 256 * 256 + 64 * 256 + 32 * 256 + 256) * 4 * 3 / 8 ))
for v in "sgd|--stream params|" "adamw|--optimizer adam --stream params|--optimizer adamw --weight-decay 0.1" \
	"binomial|--optimizer adam --checkpoint binomial --snapshots 3 --stream params -D L=12|--optimizer adamw" \
	"8x-budget|--optimizer adam $big --device-mem $big_budget|--lr 0.0003"; do
	IFS='|' read -r name flags args <<<"$v"
	l="$o/def_$name.log"
	ref_flags=$(echo "$flags" | sed 's/--stream params//; s/--device-mem [0-9]*//; s/--checkpoint binomial --snapshots 3//')
	if "$DPC" --target cpu $flags --schedule-json "$o/def_$name.sched" samples/resmlp.dp -o "$o/def_$name" >"$l" 2>&1 &&
		"$DPC" --target cpu $ref_flags samples/resmlp.dp -o "$o/def_${name}_res" >>"$l" 2>&1 &&
		python3 tests/train/host_update.py "$o" "$o/def_$name" "$o/def_${name}_res" "$o/def_$name.sched" $args >>"$l" 2>&1; then
		ok "train/host-update $name: --clip-grad and --accum streamed, bitwise as resident; transfers as predicted ($(tail -1 "$l"))"
	else
		notok "train/host-update $name: --clip-grad and --accum streamed" "$l"
	fi
done
# the options' bad values: exit 2 with the reason
expect train/optim-warmup-beyond-steps 2 "warmup steps, more than --steps 5" "$o/sgd" --steps 5 --warmup 6
expect train/optim-negative-decay 2 "--weight-decay needs a non-negative number" "$o/adam" --optimizer adamw --weight-decay -1
expect train/optim-decay-needs-adamw 2 "--weight-decay is AdamW's decoupled decay" "$o/adam" --weight-decay 0.1
expect train/optim-adamw-on-sgd 2 "compiled for --optimizer sgd; to train with adamw" "$o/sgd" --optimizer adamw
expect train/optim-bad-schedule 2 "--lr-schedule takes constant, cosine or linear" "$o/sgd" --lr-schedule step
# exact resume: each build trained 200 steps (AdamW, cosine after 20 warmup steps) saving its state
# every step, killed with SIGKILL at 5 random moments and resumed each time; the final parameters
# byte-identical to the uninterrupted run's (tests/train/kill_resume.sh)
# (the streamed units' steps deferred too: clipped, accumulated; and bf16-mixed, resident and streamed)
for v in "none" "binomial --checkpoint binomial" "streamed --stream params" "bf16 --precision bf16" \
	"deferred --stream params|--clip-grad 0.5 --accum 2" "mixed --precision bf16-mixed" \
	"mixed-streamed --precision bf16-mixed --stream params|--accum 2"; do
	IFS='|' read -r v extra <<<"$v"
	set -- $v
	name=$1
	shift
	l="$o/kr_$name.log"
	if "$DPC" --target cpu --optimizer adam "$@" samples/resmlp.dp -o "$o/kr_$name" >"$l" 2>&1 &&
		bash tests/train/kill_resume.sh "$o/kr_$name.d" "$o/kr_$name" --steps 200 --optimizer adamw --lr-schedule cosine \
			--warmup 20 $extra >>"$l" 2>&1; then
		ok "train/resume $name: killed and resumed, parameters byte-identical ($(tail -1 "$l"))"
	else
		notok "train/resume $name: killed and resumed" "$l"
	fi
done
# a state is refused when it is not this run's, naming what differs; nothing is written then
r="$o/kr_none"
"$r" --steps 4 --optimizer adamw --save-state "$o/st_adamw.st" --quiet >/dev/null 2>&1
"$o/sgd" --steps 2 --save-state "$o/st_other.st" --quiet >/dev/null 2>&1
head -c 100 "$o/st_adamw.st" >"$o/st_cut.st"
expect train/resume-other-optimizer 1 "saved with optimizer adamw, this run has adam" "$r" --steps 6 --optimizer adam --resume "$o/st_adamw.st" --save "$o/never.st"
expect train/resume-other-model 1 "saved with precision f64, this run has f32" "$r" --steps 6 --optimizer adamw --resume "$o/st_other.st"
expect train/resume-other-schedule 1 "saved with lr_schedule constant, this run has cosine" "$r" --steps 6 --optimizer adamw --lr-schedule cosine --resume "$o/st_adamw.st"
expect train/resume-parameters-only 1 "not a state file (parameters)" "$r" --steps 6 --optimizer adamw --resume "$o/kr_none.d/whole.st"
expect train/resume-truncated 1 "st_cut.st" "$r" --steps 6 --optimizer adamw --resume "$o/st_cut.st"
expect train/resume-missing 1 "no_such.st" "$r" --steps 6 --optimizer adamw --resume "$o/no_such.st"
expect train/resume-past-steps 1 "the state is at step 4, past --steps 3" "$r" --steps 3 --optimizer adamw --resume "$o/st_adamw.st"
check "train/resume refused: nothing written" test ! -e "$o/never.st"
# a save that fails part-way (a file size limit standing in for a full disk: SIGXFSZ ignored, so
# the write fails with EFBIG) is an error, and the previous state is left as it was, no temporary file
"$r" --steps 4 --optimizer adamw --save-state "$o/st_full.st" --quiet >/dev/null 2>&1
cp "$o/st_full.st" "$o/st_full.before"
expect train/save-state-disk-full 1 "cannot write $o/st_full.st" bash -c "trap '' XFSZ; ulimit -f 64; exec \"\$@\"" sh \
	"$r" --steps 6 --optimizer adamw --resume "$o/st_full.st" --save-state "$o/st_full.st" --quiet
check "train/save-state-disk-full: the previous state intact, no temporary file" bash -c \
	"cmp '$o/st_full.st' '$o/st_full.before' && ! ls '$o'/st_full.st.tmp.* 2>/dev/null"
expect train/save-every-needs-state 2 "--save-every needs --save-state" "$r" --save-every 2
# the order training reads its data in: .npy rows shuffled per epoch by the seed (resumable), text
# as windows at random offsets, --eval in turn (tests/train/order_check.py)
l="$o/order.log"
if "$DPC" --target cpu tests/train/order.dp -o "$o/order" >"$l" 2>&1 && "$DPC" --target cpu tests/train/windows.dp -o "$o/windows" >>"$l" 2>&1 &&
	"$DPC" --target cpu tests/train/three.dp -o "$o/three" >>"$l" 2>&1 &&
	python3 tests/train/order_check.py "$o" "$o/order" "$o/windows" "$o/three" >>"$l" 2>&1; then
	ok "train/data order: .npy shuffled per epoch, text in random windows, eval in turn, resumed alike ($(tail -1 "$l"))"
else
	notok "train/data order" "$l"
fi
# validation of a model of three inputs, all of which the loss computes from: every input needs its
# rows, each given once, by name (--val-data cannot say which)
expect train/val-missing-input 2 "input 'z' has no data: give it with --val-input z=FILE" "$o/three" --steps 2 \
	--val-input "x=$o/x.npy" --val-input "y=$o/x.npy"
expect train/val-unknown-input 2 "the model has no input named 'q'" "$o/three" --steps 2 --val-input "q=$o/x.npy"
expect train/val-input-twice 2 "input 'x' is given twice, by --val-input" "$o/three" --steps 2 --val-input "x=$o/x.npy" \
	--val-input "x=$o/x.npy" --val-input "y=$o/x.npy" --val-input "z=$o/x.npy"
expect train/val-data-which 2 "--val-data .*: the model has 3 inputs that the loss computes from (x, y, z): give each by name" \
	"$o/three" --steps 2 --val-data "$o/x.npy"
finish
