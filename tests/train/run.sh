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
finish
