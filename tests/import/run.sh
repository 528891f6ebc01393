#!/usr/bin/env bash
# ONNX models through `dpc MODEL.onnx` (compiler/frontend/onnx/onnx2dp.py):
# small models built with onnx.helper (tests/import/models.py), checked
# against onnx's reference evaluator in float64 (check.py), two exported by
# PyTorch against PyTorch's own gradients (tests/import/torch), and the bad
# input the converter must refuse with a clear message. Needs the onnx
# package (make deps), not PyTorch.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
d="$TEST_OUT/import"
rm -rf "$d"
mkdir -p "$d"
if ! python3 -c 'import onnx' 2>/dev/null; then
	notok "import: the onnx package is not installed (make deps installs compiler/frontend/onnx/requirements.txt)"
	finish
	exit 1
fi
if ! python3 tests/import/models.py "$d" >"$d/models.log" 2>&1; then
	notok "import: tests/import/models.py builds the models" "$d/models.log"
	finish
	exit 1
fi

for m in cnn gpt seq:mse mask:mse gathers:mse elementwise:mse; do
	loss=${m#*:} m=${m%%:*}
	[ "$loss" = "$m" ] && loss=cross_entropy
	half=
	case $m in seq | mask | gathers | elementwise) half=--no-half ;; esac # its working set is most of its peak
	python3 tests/import/check.py "$DPC" "$d" "$m" --loss "$loss" $half >"$d/$m.log" 2>&1
	rc=$?
	cat "$d/$m.log"
	# a check.py that stops part-way (an exception) fails, whatever it printed before
	[ $rc = 0 ] || grep -q '^not ok - ' "$d/$m.log" || notok "import/$m: check.py ran to its end (status $rc)" "$d/$m.log"
	grep -q '^\(not \)\?ok - ' "$d/$m.log" || notok "import/$m: check.py ran no check" "$d/$m.log"
	npass=$((npass + $(grep -c '^ok - ' "$d/$m.log")))
	nfail=$((nfail + $(grep -c '^not ok - ' "$d/$m.log")))
done

# GPT-2's GELU written out in its tanh form after a Conv1D's Gemm and view (tests/import/models.py gelutanh):
# one gelu() on the Gemm's rows, the view after it, so that the GPU's GEMM applies the bias and GELU (cuBLASLt's
# epilogue; RT_EP_GELU_BIAS, 2) where the plain form leaves only the bias (1); the next Gemm's view back to rows
# taken away, so that in the adjoint its gradient's GEMM applies GELU's derivative (RT_EP_DGELU, 3)
"$DPC" "$d/gelutanh.onnx" --target cpu --loss mse --emit=dp -o "$d/gelutanh.dp" >/dev/null 2>&1
check "import: GPT-2's GELU in its tanh form written out is one gelu() on the Gemm's rows" \
	bash -c "grep -q '^  let h_gelu_rows = gelu(h2)\$' '$d/gelutanh.dp' && ! grep -q 'tanh(\|pow(' '$d/gelutanh.dp'"
if "$DPC" "$d/gelutanh.onnx" --target cpu --loss mse -o "$d/gelutanh" >"$d/gelutanh.log" 2>&1 &&
	"$d/gelutanh" --eval --steps 1 --data "$d/gelutanh.x.npy" --labels "$d/gelutanh.y.npy" \
		--summary-json "$d/gelutanh.json" >>"$d/gelutanh.log" 2>&1; then
	check "import: that gelu(): the loss the reference evaluator's (f64, the file's constants) within f32's rounding" \
		python3 - "$d" <<'PY'
import json, sys
sys.path.insert(0, "tests/import")
import numpy as np, onnx
from onnx.reference import ReferenceEvaluator
import reference
d = sys.argv[1]
m = reference.to_f64(onnx.load(f"{d}/gelutanh.onnx"))
y = ReferenceEvaluator(m).run(None, {"x": np.load(f"{d}/gelutanh.x.npy")})[0]
want = float(np.mean((y - np.load(f"{d}/gelutanh.y.npy")) ** 2))
got = json.load(open(f"{d}/gelutanh.json"))["loss"]
assert abs(got - want) <= 1e-6 * abs(want), (got, want)
PY
else
	notok "import: GPT-2's GELU written out compiles and runs" "$d/gelutanh.log"
fi
eps=$(DPC_EPILOGUE=on "$DPC" "$d/gelutanh_big.onnx" --target cpu --loss mse --emit=llvm 2>/dev/null |
	sed -n 's/.*call i32 @rt_gemm_ep(i8\* %[0-9]*, i32 \([0-9]\),.*/\1/p' | sort -u | tr '\n' ' ')
check "import: that GELU and its bias, and its derivative, in the GEMMs' epilogues on the GPU (kinds made: '$eps', want '1 2 3 ')" \
	test "$eps" = "1 2 3 "
check "import: a view back to what a view started from is that value (no reshape of h_gelu_rows's view)" \
	bash -c "grep -q '^  let y2 = h_gelu_rows @ proj_weight + proj_bias\$' '$d/gelutanh.dp'"

check "import: a causal mask too large for a literal is made from arange, not carried as a buffer" \
	bash -c "grep -q 'where(reshape(cast(arange(80), f32), \[1, 80\])' '$d/mask64.dp' && ! grep -q '^buffer' '$d/mask64.dp'"

# an integer attention mask cast to BOOL (BERT's legacy export): a well-typed program, the mask applied, the
# loss the reference evaluator's in f64; the executable takes both inputs by name and the labels by role
if "$DPC" "$d/castmask.onnx" --target cpu --precision f64 -o "$d/castmask" >"$d/castmask.log" 2>&1 &&
	"$d/castmask" --eval --steps 1 --input ids="$d/castmask.ids.npy" --input mask="$d/castmask.mask.npy" \
		--labels "$d/castmask.y.npy" --summary-json "$d/castmask.json" >>"$d/castmask.log" 2>&1; then
	check "import: Cast of an int64 mask to BOOL, the mask applied: the reference evaluator's loss (1e-10)" python3 - "$d" <<'PY'
import json, sys
sys.path.insert(0, "tests/import")
import numpy as np, onnx
from onnx.reference import ReferenceEvaluator
import reference
d = sys.argv[1]
m = reference.to_f64(onnx.load(f"{d}/castmask.onnx"))
feeds = {k: np.load(f"{d}/castmask.{k}.npy") for k in ("ids", "mask")}
logits = ReferenceEvaluator(m).run(None, feeds)[0]
want = reference.cross_entropy(logits, np.load(f"{d}/castmask.y.npy"))
got = json.load(open(f"{d}/castmask.json"))["loss"]
assert abs(got - want) <= 1e-10 * abs(want), (got, want)
PY
else
	notok "import: Cast of an int64 mask to BOOL compiles and runs" "$d/castmask.log"
fi

# --loss causal_lm (HuggingFace's labels=): position t's logits against label t + 1, -100 counting for nothing;
# the gpt model's loss against the reference evaluator's logits shifted so (f64, 1e-10); an ignore index
# outside the vocabulary other than -100 refused
python3 - "$d" <<'PY'
import numpy as np, sys
d = sys.argv[1]
ids = np.load(f"{d}/gpt.x.npy")
lab = ids.copy()
lab[0, 2] = lab[1, 7] = -100
np.save(f"{d}/gpt.clm.npy", lab.astype(np.int64))
PY
if "$DPC" "$d/gpt.onnx" --target cpu --precision f64 --loss causal_lm -o "$d/gptclm" >"$d/gptclm.log" 2>&1 &&
	"$d/gptclm" --eval --steps 1 --data "$d/gpt.x.npy" --labels "$d/gpt.clm.npy" --summary-json "$d/gptclm.json" >>"$d/gptclm.log" 2>&1; then
	check "import: --loss causal_lm shifts the labels by one and ignores -100, as HuggingFace's labels= (1e-10)" python3 - "$d" <<'PY'
import json, sys
sys.path.insert(0, "tests/import")
import numpy as np, onnx
from onnx.reference import ReferenceEvaluator
import reference
d = sys.argv[1]
m = reference.to_f64(onnx.load(f"{d}/gpt.onnx"))
logits = ReferenceEvaluator(m, new_ops=reference.NEW_OPS).run(None, {"ids": np.load(f"{d}/gpt.x.npy")})[0][:, :-1]
lab = np.load(f"{d}/gpt.clm.npy")[:, 1:]
keep = lab != -100
z = logits - logits.max(axis=-1, keepdims=True)
logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
want = -np.take_along_axis(logp, np.where(keep, lab, 0)[..., None], axis=-1)[..., 0][keep].mean()
got = json.load(open(f"{d}/gptclm.json"))["loss"]
assert abs(got - want) <= 1e-10 * abs(want), (got, want)
PY
else
	notok "import: --loss causal_lm compiles and runs" "$d/gptclm.log"
fi
expect import/ignore-index-outside 1 "--ignore-index 11: a label outside the 11 classes of 'logits' other than -100" \
	"$DPC" "$d/gpt.onnx" --target cpu --loss causal_lm --ignore-index 11 -o "$d/never"

# PyTorch's buffers stay fixed (issue 61): the dynamo exporter marks them (bufmod.onnx, its mean), and
# --params-from names the parameters for the legacy exporter's, which does not (bufplain.onnx); after a
# step of training the parameter moved and the buffer, a constant now, is not among what --save writes;
# --train-buffer trains one; an export that does not say is noted in the program
d_buf() { "$DPC" "$@" --emit=dp -o "$d/buf.dp" >"$d/buf.log" 2>&1 && cat "$d/buf.dp"; }
check "import: a buffer the dynamo exporter marks is fixed" bash -c "$(declare -f d_buf); d='$d' DPC='$DPC'
	d_buf '$d/bufmod.onnx' | grep -q 'kept fixed, as PyTorch.s buffers.*: mean' && ! grep -q 'param mean' '$d/buf.dp'"
printf 'w\n' >"$d/buf.params"
check "import: --params-from names the parameters of a legacy export, the rest fixed" bash -c "$(declare -f d_buf); d='$d' DPC='$DPC'
	d_buf '$d/bufplain.onnx' --params-from '$d/buf.params' | grep -q 'kept fixed.*: mean' && ! grep -q 'param mean' '$d/buf.dp'"
check "import: an export that does not say which are buffers trains every one, and says so" bash -c "$(declare -f d_buf); d='$d' DPC='$DPC'
	d_buf '$d/bufplain.onnx' | grep -q 'does not say which initializers are PyTorch buffers' && grep -q 'param mean' '$d/buf.dp'"
check "import: --train-buffer trains a buffer" bash -c "$(declare -f d_buf); d='$d' DPC='$DPC'
	d_buf '$d/bufmod.onnx' --train-buffer mean | grep -q 'param mean'"
if "$DPC" "$d/bufmod.onnx" --target cpu -o "$d/bufmod" >"$d/bufmod.log" 2>&1 &&
	"$d/bufmod" --steps 2 --lr 0.1 --data "$d/bufmod.x.npy" --labels "$d/bufmod.y.npy" --save "$d/bufmod.st" >>"$d/bufmod.log" 2>&1; then
	check "import: trained, the parameter moved and the buffer is not among the saved tensors" python3 - "$d" <<'PY'
import sys
sys.path.insert(0, "tests/import")
import numpy as np, onnx
from onnx import numpy_helper
import reference
d = sys.argv[1]
saved = reference.read_safetensors(f"{d}/bufmod.st") if hasattr(reference, "read_safetensors") else None
import json, struct
b = open(f"{d}/bufmod.st", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
names = {k for k in json.loads(b[8:8 + n]) if k != "__metadata__"}
assert names == {"w"}, names
PY
else
	notok "import: bufmod trains" "$d/bufmod.log"
fi
expect import/train-buffer-not-a-buffer 1 "--train-buffer names no PyTorch buffer of .*bufmod.onnx: w" \
	"$DPC" "$d/bufmod.onnx" --train-buffer w --emit=dp -o "$d/never.dp"
expect import/params-from-names-nothing 1 "--params-from .*buf.none names none of the initializers" \
	bash -c "printf 'nothing\n' >'$d/buf.none'; '$DPC' '$d/bufplain.onnx' --params-from '$d/buf.none' --emit=dp -o '$d/never.dp'"

# padding_idx (issue 61): the dynamo export's record of it carried into embed, said in the header; the
# legacy export's given by --padding-idx; row 0's gradient exactly zero where ids hold 0, the others
# the finite differences'; none trains it
check "import: PyTorch's padding_idx from the dynamo export's node metadata" \
	bash -c "'$DPC' '$d/pademb.onnx' --emit=dp -o '$d/pad.dp' && grep -q 'embed(wte, ids, padding_idx=0)' '$d/pad.dp' &&
	         grep -q \"note: the embedding wte's row 0 gets no gradient, as its padding_idx\" '$d/pad.dp'"
check "import: --padding-idx for the legacy export, which loses it" \
	bash -c "'$DPC' '$d/padplain.onnx' --padding-idx wte=0 --emit=dp -o '$d/pad2.dp' && grep -q 'padding_idx=0' '$d/pad2.dp'"
check "import: --padding-idx NAME=none trains every row" \
	bash -c "'$DPC' '$d/pademb.onnx' --padding-idx wte=none --emit=dp -o '$d/pad3.dp' && ! grep -q 'padding_idx' '$d/pad3.dp'"
expect "import: --padding-idx naming no embedding" 1 "--padding-idx names no embedding table of .*padplain.onnx: head" \
	"$DPC" "$d/padplain.onnx" --padding-idx head=0 --emit=dp -o "$d/never.dp"
expect "import: --padding-idx outside the table" 1 "the padding index 7 of wte lies outside its 7 rows" \
	"$DPC" "$d/padplain.onnx" --padding-idx wte=7 --emit=dp -o "$d/never.dp"
if "$DPC" "$d/pademb.onnx" --target cpu --precision f64 -o "$d/pademb" >"$d/pademb.log" 2>&1 &&
	"$d/pademb" --steps 1 --data "$d/pademb.x.npy" --labels "$d/pademb.y.npy" --dump-grads "$d/pademb.grads" >>"$d/pademb.log" 2>&1 &&
	"$DPC" "$d/pademb.onnx" --padding-idx wte=none --target cpu --precision f64 -o "$d/padnone" >>"$d/pademb.log" 2>&1 &&
	"$d/padnone" --steps 1 --data "$d/pademb.x.npy" --labels "$d/pademb.y.npy" --dump-grads "$d/padnone.grads" >>"$d/pademb.log" 2>&1; then
	check "import: the pad row's gradient is exactly zero, the other rows' as without padding_idx" python3 - "$d" <<'PY'
import sys
sys.path.insert(0, "tests/import")
import numpy as np
import reference
d = sys.argv[1]
a, b = reference.read_safetensors(f"{d}/pademb.grads"), reference.read_safetensors(f"{d}/padnone.grads")
assert (a["wte"][0] == 0).all() and (b["wte"][0] != 0).any(), (a["wte"][0], b["wte"][0])
assert np.array_equal(a["wte"][1:], b["wte"][1:]) and np.array_equal(a["head"], b["head"])
PY
else
	notok "import: pademb compiles and runs" "$d/pademb.log"
fi

# models as PyTorch's own exporters write them (tests/import/torch/export.py, committed with PyTorch's
# loss and gradients): a DenseNet of torchvision's class (legacy exporter, training mode),
# HuggingFace's GPT-2 (dynamo exporter), a Llama (dynamo: RMSNorm, rotary tables from the inv_freq
# buffer, grouped-query attention; causal_lm labels holding -100) and a BERT classifier with an
# attention mask padding row 1 and id 0, its word embeddings' padding_idx, once where it is attended;
# in f64, against PyTorch computing in f64 throughout
t=tests/import/torch
for m in densenet gpt2 llama bert; do
	loss= feed=(--data "$t/$m.x.npy")
	[ $m = llama ] && loss="--loss causal_lm"
	[ $m = bert ] && feed=(--input input_ids="$t/bert.x.npy" --input attention_mask="$t/bert.mask.npy")
	if "$DPC" "$t/$m.onnx" --target cpu --precision f64 $loss -o "$d/torch_$m" >"$d/torch_$m.log" 2>&1 &&
		"$d/torch_$m" --steps 1 --lr 0 "${feed[@]}" --labels "$t/$m.y.npy" --summary-json "$d/torch_$m.json" \
			--dump-grads "$d/torch_$m.grads" >>"$d/torch_$m.log" 2>&1; then
		python3 "$t/compare.py" "$m" "$d/torch_$m.json" "$d/torch_$m.grads" >"$d/torch_$m.cmp" 2>&1
		cat "$d/torch_$m.cmp"
		grep -q '^ok - ' "$d/torch_$m.cmp" || notok "import/torch $m: compare.py ran no check" "$d/torch_$m.cmp"
		npass=$((npass + $(grep -c '^ok - ' "$d/torch_$m.cmp")))
		nfail=$((nfail + $(grep -c '^not ok - ' "$d/torch_$m.cmp")))
	else
		notok "import/torch $m: dpc imports and runs PyTorch's export" "$d/torch_$m.log"
	fi
done
check "import/torch gpt2: HuggingFace's GPT-2 layers are one loop" grep -q '^  for l in 0\.\.2 {' "$d/torch_gpt2.dp"
check "import/torch gpt2: a float64 export's GELU kept as written (its float32 constants are not gelu()'s there)" \
	bash -c "grep -q 'tanh(' '$d/torch_gpt2.dp' && ! grep -q 'gelu(' '$d/torch_gpt2.dp'"
check "import/torch llama: the Llama's layers are one loop, inv_freq kept fixed" \
	bash -c "grep -q '^  for l in 0\.\.2 {' '$d/torch_llama.dp' && grep -q 'kept fixed, as PyTorch.s buffers.*inv_freq' '$d/torch_llama.dp'"
check "import/torch bert: BERT's layers are one loop, the pad row of its word embeddings carried" \
	bash -c "grep -q '^  for l in 0\.\.2 {' '$d/torch_bert.dp' && grep -q 'embed(.*word_embeddings_weight, .*padding_idx=0)' '$d/torch_bert.dp'"
# the pad row matters here: trained, its gradient is PyTorch's no longer
if "$DPC" "$t/bert.onnx" --target cpu --precision f64 --padding-idx bert.embeddings.word_embeddings.weight=none \
	-o "$d/torch_bertpad" >"$d/torch_bertpad.log" 2>&1 &&
	"$d/torch_bertpad" --steps 1 --lr 0 --input input_ids="$t/bert.x.npy" --input attention_mask="$t/bert.mask.npy" \
		--labels "$t/bert.y.npy" --summary-json "$d/torch_bertpad.json" --dump-grads "$d/torch_bertpad.grads" >>"$d/torch_bertpad.log" 2>&1; then
	expect "import/torch bert: without padding_idx the pad row's gradient is not PyTorch's" 0 "^not ok - .*word_embeddings" \
		python3 "$t/compare.py" bert "$d/torch_bertpad.json" "$d/torch_bertpad.grads"
else
	notok "import/torch bert: compiles and runs with --padding-idx NAME=none" "$d/torch_bertpad.log"
fi

# loops recovered: a block of layers alike is one loop over stacked parameters
check "import: gpt's 8 layers are one loop" grep -q '^  for l in 0\.\.8 {' "$d/gpt64.dp"
check "import: cnn's 6 residual blocks are one loop, their statistics updated a layer at a time" \
	bash -c "grep -q '^  for l in 0\.\.6 {' '$d/cnn64.dp' && grep -q 'update layer_bn_running_mean\[l\] = ' '$d/cnn64.dp'"
check "import: --no-loops writes every layer out" bash -c "'$DPC' '$d/gpt.onnx' --no-loops --emit=dp -o '$d/unrolled.dp' && ! grep -q 'for l in' '$d/unrolled.dp'"
# the loop streams: its layers pass through device slots under a budget below the weights, with the
# loss and the gradients of the unrolled import (f64: the same sums in the same order)
"$DPC" "$d/gpt.onnx" --target cpu --precision f64 --no-loops -o "$d/gptunrolled" --schedule-json "$d/gptunrolled.sj" >/dev/null 2>&1
weights=$(json "$d/gptunrolled.sj" peak_device_bytes params 2>/dev/null || echo 0)
budget=$((weights * 65 / 100))
"$DPC" "$d/gpt.onnx" --target cpu --precision f64 --device-mem "$budget" -o "$d/gptstream" >"$d/gptstream.log" 2>&1
run_gpt() { "$1" --steps 1 --data "$d/gpt.x.npy" --labels "$d/gpt.y.npy" --summary-json "$1.json" --dump-grads "$1.grads.safetensors" >/dev/null 2>&1; }
if run_gpt "$d/gptunrolled" && run_gpt "$d/gptstream"; then
	check "import: gpt streams its stacked layers under --device-mem $budget, 65% of its $weights bytes of weights" \
		python3 -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(not j['stream_h2d_bytes'] > 0)" "$d/gptstream.json"
	check "import: ... with the unrolled import's loss" \
		python3 -c "import json,sys; a,b=(json.load(open(f))['loss_first'] for f in sys.argv[1:]); sys.exit(abs(a-b) > 1e-12*abs(a))" "$d/gptunrolled.json" "$d/gptstream.json"
	check "import: ... and gradients (1e-12), under the ONNX file's names" python3 - "$d/gptunrolled.grads.safetensors" "$d/gptstream.grads.safetensors" <<'PY'
import sys
sys.path.insert(0, "tests/import")
import numpy as np
import reference
a, b = (reference.read_safetensors(f) for f in sys.argv[1:])
assert a.keys() == b.keys() and "h.2.attn.c_attn.weight" in a, (sorted(a), sorted(b))
for k in a:
    assert np.abs(a[k] - b[k]).max() <= 1e-12 * max(1, np.abs(a[k]).max()), k
PY
else
	notok "import: gpt unrolled and streamed compile and run" "$d/gptstream.log"
fi

# the readable program: --emit=dp prints it, its weights file beside -o's
expect "import: --emit=dp writes the program, each parameter loading its ONNX name" 0 'param conv1_weight : f32\[8, 3, 3, 3\] = load("conv1.weight")' \
	bash -c "'$DPC' '$d/cnn.onnx' --emit=dp -o '$d/emitted.dp' && cat '$d/emitted.dp'"
check "import: --emit=dp -o F.dp writes F.safetensors, and the program compiles alone" \
	bash -c "test -s '$d/emitted.safetensors' && grep -q '^weights \"emitted.safetensors\"' '$d/emitted.dp' &&
	         '$DPC' '$d/emitted.dp' -o '$d/emitted' && '$d/emitted' --steps 2 --data '$d/cnn.x.npy' --labels '$d/cnn.y.npy'"

# bad input: every op dpc cannot express at once, naming each node, its op and its inputs' shapes
python3 - "$d" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
d = sys.argv[1]
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
W = numpy_helper.from_array(np.ones((4, 4), np.float32), "W")
def model(nodes, opset=17, inputs=(x,), inits=(W,)):
    g = helper.make_graph(nodes, "bad", list(inputs), [y], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
onnx.save(model([helper.make_node("MatMul", ["x", "W"], ["a"], name="mm"),
                 helper.make_node("Hardmax", ["a"], ["b0"], name="hard"),
                 helper.make_node("Hardmax", ["b0"], ["b"], name="hard_after_hard"),
                 helper.make_node("Det", ["W"], ["c"], name="det_of_w"),
                 helper.make_node("Mul", ["b", "c"], ["y"], name="mul")]), d + "/unsupported.onnx")
onnx.save(model([helper.make_node("MatMul", ["x", "W"], ["y"])], opset=99), d + "/newopset.onnx")
# refused, each saying why: a pad that is not constant, a range of computed bounds, an einsum of three, a
# scatter that adds, a gather of computed indices on axis 1
i64 = lambda a: numpy_helper.from_array(np.array(a, np.int64), "k")
n = helper.make_node
onnx.save(model([n("MatMul", ["x", "W"], ["a"]),
                 n("Constant", [], ["p"], value=i64([0, 1, 0, 1])),
                 n("Pad", ["a", "p"], ["b"], mode="reflect", name="pad_reflect"),
                 n("ReduceSum", ["a"], ["s"], keepdims=0),
                 n("Cast", ["s"], ["si"], to=TensorProto.INT64),
                 n("Constant", [], ["one"], value=i64(1)),
                 n("Range", ["one", "si", "one"], ["r"], name="range_of_data"),
                 n("Einsum", ["a", "W", "W"], ["e"], equation="bi,ij,jk->bk", name="einsum3"),
                 n("Constant", [], ["rows"], value=i64([[1]])),
                 n("Constant", [], ["z"], value=i64([0])), n("Constant", [], ["one1"], value=i64([1])),
                 n("Slice", ["a", "z", "one1", "z"], ["top"]),
                 n("ScatterND", ["a", "rows", "top"], ["sc"], reduction="add", name="scatter_add"),
                 n("Cast", ["a"], ["ai"], to=TensorProto.INT64),
                 n("Gather", ["W", "ai"], ["g"], axis=1, name="gather_cols"),
                 n("Add", ["e", "x"], ["y"])], opset=18), d + "/refused.onnx")
dyn = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
onnx.save(model([helper.make_node("MatMul", ["x", "W"], ["y"])], inputs=(dyn,)), d + "/dynamic.onnx")
PY
expect "import: every unsupported node at once, with its op and its inputs' shapes" 1 \
	"3 node(s) dpc cannot express:" "$DPC" "$d/unsupported.onnx" --target cpu -o "$d/unsupported"
expect "import: ... naming the first" 1 "node 'hard' (Hardmax) with inputs \[2, 4\]" "$DPC" "$d/unsupported.onnx" --target cpu -o "$d/unsupported"
expect "import: ... one after it, its input's shape from shape inference" 1 \
	"node 'hard_after_hard' (Hardmax) with inputs \[2, 4\]: dpc has no such op" "$DPC" "$d/unsupported.onnx" --target cpu -o "$d/unsupported"
expect "import: ... and the second" 1 "node 'det_of_w' (Det) with inputs \[4, 4\]" "$DPC" "$d/unsupported.onnx" --target cpu -o "$d/unsupported"
for r in "node 'pad_reflect' (Pad) with inputs \[2, 4\], const \[4\]: a pad in mode 'reflect' (dpc pads with a constant)" \
	"node 'range_of_data' (Range) .*: its start, limit and delta must be constants once shapes are fixed" \
	"node 'einsum3' (Einsum) .*: an einsum of 3 operands ('bi,ij,jk->bk'; dpc takes one or two)" \
	"node 'scatter_add' (ScatterND) .*: a scatter with reduction 'add' (dpc scatters only with reduction none)" \
	"node 'gather_cols' (Gather) .*: a gather of computed indices on axis 1"; do
	expect "import: refused, with the reason: ${r%%:*}" 1 "$r" "$DPC" "$d/refused.onnx" --target cpu --loss mse -o "$d/refused"
done
head -c 300 "$d/cnn.onnx" >"$d/truncated.onnx"
expect "import: a truncated file is named, exit 2" 2 "truncated.onnx: not an ONNX model, or a truncated one" \
	"$DPC" "$d/truncated.onnx" --target cpu -o "$d/truncated"
expect "import: a missing file, exit 2" 2 "nothere.onnx: no such file" "$DPC" "$d/nothere.onnx" --target cpu
expect "import: an opset newer than the converter knows, exit 2" 2 "opset 99 is newer than this converter knows" \
	"$DPC" "$d/newopset.onnx" --target cpu -o "$d/newopset"
expect "import: a dynamic dimension asks for --shape" 1 "input 'x' has a dynamic dimension 'batch'; fix it with --shape x=" \
	"$DPC" "$d/dynamic.onnx" --target cpu --loss mse -o "$d/dynamic"
check "import: --shape fixes it" "$DPC" "$d/dynamic.onnx" --target cpu --loss mse --shape x=2,4 -o "$d/dynamic"
expect "import: --loss on a .dp program is refused" 2 "--loss applies to an ONNX model" \
	"$DPC" samples/classifier.dp --loss mse --emit=ast
expect "import: --emit=dp on a .dp program is refused" 2 "--emit=dp prints an ONNX model's converted program" \
	"$DPC" samples/classifier.dp --emit=dp

# stochastic depth as torchvision exports it (EfficientNet, ConvNeXt): u = RandomUniformLike([N, 1]),
# y = h * Cast(u < 0.8) / 0.8. With h all ones and an mse loss against zeros, the loss is k / N / 0.8^2
# for the k samples kept whole; --eval passes every sample whole (loss 1); f64 gradients by finite differences
python3 - "$d" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
d, N, D = sys.argv[1], 64, 8
n = helper.make_node
nodes = [n("MatMul", ["x", "W"], ["h"]),
         n("Constant", [], ["shape"], value=numpy_helper.from_array(np.zeros((N, 1), np.float32), "s")),
         n("RandomUniformLike", ["shape"], ["u"], dtype=TensorProto.FLOAT, low=0.0, high=1.0),
         n("Constant", [], ["keep"], value=numpy_helper.from_array(np.array(0.8, np.float32), "k")),
         n("Less", ["u", "keep"], ["less"]), n("Cast", ["less"], ["mask"], to=TensorProto.FLOAT),
         n("Div", ["mask", "keep"], ["scale"]), n("Mul", ["h", "scale"], ["y"])]
g = helper.make_graph(nodes, "sd", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, D])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, D])],
                      [numpy_helper.from_array(np.eye(D, dtype=np.float32), "W")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d + "/sd.onnx")
np.save(d + "/sd.x.npy", np.ones((N, D)))
np.save(d + "/sd.y.npy", np.zeros((N, D)))
PY
sd="--data $d/sd.x.npy --labels $d/sd.y.npy"
if "$DPC" "$d/sd.onnx" --target cpu --precision f64 --loss mse -o "$d/sd" >"$d/sd.log" 2>&1 &&
	"$d/sd" --steps 1 --lr 0 $sd --summary-json "$d/sd.train.json" >>"$d/sd.log" 2>&1 &&
	"$d/sd" --eval --steps 1 $sd --summary-json "$d/sd.eval.json" >>"$d/sd.log" 2>&1; then
	k=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['loss_first'] * 64 * 0.64)" "$d/sd.train.json")
	e=$(json "$d/sd.eval.json" loss)
	check "import: stochastic depth keeps whole samples ($k of 64, each with probability 0.8)" \
		python3 -c "import sys; k = float(sys.argv[1]); sys.exit(not (abs(k - round(k)) < 1e-5 and 30 <= round(k) < 64))" "$k"
	check "import: ... and passes every sample whole in --eval (loss $e)" python3 -c "import sys; sys.exit(abs(float(sys.argv[1]) - 1) > 1e-12)" "$e"
	check "import: ... its gradients against finite differences (f64)" "$d/sd" --gradcheck $sd
else
	notok "import: stochastic depth compiles and runs" "$d/sd.log"
fi
python3 - "$d" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper
d = sys.argv[1]
n = helper.make_node
nodes = [n("RandomUniformLike", ["x"], ["u"]), n("Add", ["x", "u"], ["y"], name="noise")]
g = helper.make_graph(nodes, "noise", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), d + "/noise.onnx")
PY
expect "import: a random uniform tensor read other than as a mask is refused" 1 \
	"node 'noise' (Add) with inputs \[2, 4\], \[2, 4\]: reads a random uniform tensor" "$DPC" "$d/noise.onnx" --target cpu --loss mse -o "$d/noise"

# nothing lost: a program dpc did not write is not overwritten by the converted one
printf '# my own program\n' >"$d/mine.dp"
expect "import: -o OUT does not write over an OUT.dp dpc did not make" 1 "was not written by dpc's ONNX converter" \
	"$DPC" "$d/cnn.onnx" --target cpu -o "$d/mine"
check "import: ... which is left as it was" grep -qx '# my own program' "$d/mine.dp"

printf 'not dpc'"'"'s\n' >"$d/saved.safetensors"
expect "import: -o OUT does not write over an OUT.safetensors without dpc's OUT.dp beside it" 1 "saved.safetensors exists, and no" \
	"$DPC" "$d/cnn.onnx" --target cpu -o "$d/saved"
check "import: ... which is left as it was" grep -qx "not dpc's" "$d/saved.safetensors"
check "import: a second import to the same -o writes over its own files" "$DPC" "$d/cnn.onnx" --target cpu --precision f64 -o "$d/cnn64"

# the executable starts from its weights file; without it, it says so
check "import: the executable runs from OUT.safetensors" "$d/cnn64" --eval --steps 1 --data "$d/cnn.x.npy" --labels "$d/cnn.y.npy"
mv "$d/cnn64.safetensors" "$d/moved.safetensors"
expect "import: a missing weights file is named, with --init as the way out" 1 "cnn64.safetensors, the weights file this model starts from" \
	"$d/cnn64" --eval --steps 1 --data "$d/cnn.x.npy" --labels "$d/cnn.y.npy"
check "import: --init gives it from elsewhere" "$d/cnn64" --eval --steps 1 --init "$d/moved.safetensors" --data "$d/cnn.x.npy" --labels "$d/cnn.y.npy"

# a PyTorch state dict, its batch normalizations' step counters (int64) beside the weights: --init takes it
python3 - "$d/moved.safetensors" "$d/statedict.safetensors" <<'PY'
import sys
import numpy as np
sys.path.insert(0, "tests/import")
sys.path.insert(0, "compiler/frontend/onnx")
import reference
from onnx2dp import safetensors_bytes
t = reference.read_safetensors(sys.argv[1])
t["bn.num_batches_tracked"] = np.array(3, np.int64)
open(sys.argv[2], "wb").write(safetensors_bytes(t))
PY
check "import: --init takes a PyTorch state dict, skipping num_batches_tracked" \
	"$d/cnn64" --eval --steps 1 --init "$d/statedict.safetensors" --data "$d/cnn.x.npy" --labels "$d/cnn.y.npy"

# a conversion for a stage other than the executable goes into a temporary folder that goes with dpc (its
# files' names were freed before the exit handler read them: every --emit=schedule of a model left its folder)
mkdir -p "$d/tmp"
TMPDIR="$d/tmp" "$DPC" --target cpu tests/import/torch/gpt2.onnx --emit=schedule -o /dev/null >"$d/tmp.log" 2>&1
check "import: the temporary conversion is removed when dpc ends" test -z "$(ls -A "$d/tmp")"

# Under a budget, a model whose loops were recovered is converted flat too (--no-loops) and planned beside;
# the flat program is taken where it fits with less recomputed (GPT-2's two layers at 80% of its peak: its
# loop's rows recompute 0.61 of a forward, the flat chain 0.01). Its files become OUT.dp and
# OUT.safetensors, no .flat files stay, and it trains to the loops' gradients and losses.
g2=tests/import/torch/gpt2.onnx
"$DPC" --target cpu $g2 --checkpoint none --stream none --emit=schedule --schedule-json "$d/g2.none.json" -o /dev/null \
	>"$d/g2.log" 2>&1
b=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['peak_device_bytes']['total'] * 8 // 10)" "$d/g2.none.json")
if DPC_NO_FLAT=1 "$DPC" --target cpu $g2 --device-mem "$b" --stream none --schedule-json "$d/g2loop.json" -o "$d/g2loop" \
	>>"$d/g2.log" 2>&1 && "$DPC" -v --target cpu $g2 --device-mem "$b" --stream none --schedule-json "$d/g2flat.json" \
	-o "$d/g2flat" >>"$d/g2.log" 2>&1; then
	check "import: under a budget the flat conversion is taken where it recomputes less, its files OUT.dp and OUT.safetensors" \
		python3 - "$d" "$b" <<'PY'
import json, os, sys
d, budget = sys.argv[1], int(sys.argv[2])
loop, flat = json.load(open(f"{d}/g2loop.json")), json.load(open(f"{d}/g2flat.json"))
assert flat["peak_device_bytes"]["total"] <= budget, flat["peak_device_bytes"]
assert flat["recomputed_flops"] < loop["recomputed_flops"], (flat["recomputed_flops"], loop["recomputed_flops"])
assert not flat.get("loops") and loop.get("loops"), (flat.get("loops"), loop.get("loops"))
text = open(f"{d}/g2flat.dp").read()
assert "\n  for " not in text and 'weights "g2flat.safetensors"' in text
assert not os.path.exists(f"{d}/g2flat.flat.dp") and not os.path.exists(f"{d}/g2flat.flat.safetensors")
assert not os.path.exists(f"{d}/g2loop.flat.dp") and not os.path.exists(f"{d}/g2loop.flat.safetensors")
PY
	check "import: -v says the flat program was taken" grep -q "flat program (--no-loops) recomputes less" "$d/g2.log"
	x=tests/import/torch/gpt2
	if "$d/g2loop" --steps 2 --data $x.x.npy --labels $x.y.npy --dump-grads "$d/g2loop.g" --summary-json "$d/g2loop.run" \
		>>"$d/g2.log" 2>&1 && "$d/g2flat" --steps 2 --data $x.x.npy --labels $x.y.npy --dump-grads "$d/g2flat.g" \
		--summary-json "$d/g2flat.run" >>"$d/g2.log" 2>&1; then
		check "import: the flat program trains to the loops' gradients and losses, bit for bit" python3 - "$d" <<'PY'
import json, sys
sys.path.insert(0, "tests/import")
import reference
d = sys.argv[1]
a, b = reference.read_safetensors(f"{d}/g2loop.g"), reference.read_safetensors(f"{d}/g2flat.g")
assert a.keys() == b.keys() and all(a[k].tobytes() == b[k].tobytes() for k in a)
r, s = json.load(open(f"{d}/g2loop.run")), json.load(open(f"{d}/g2flat.run"))
assert (r["loss_first"], r["loss_last"]) == (s["loss_first"], s["loss_last"]), (r, s)
PY
	else
		notok "import: the flat program and the loops' train" "$d/g2.log"
	fi
else
	notok "import: GPT-2 under a budget compiles with its loops and flat" "$d/g2.log"
fi

# A stage before the executable (here --emit=schedule) with the flat program taken prints the plan the
# child process made of it, the one the flat conversion gets alone; where the loops fit (streaming their
# layers) and the flat program does not, the loops' plan, dpc ending well though the child has ended
"$DPC" --target cpu $g2 --device-mem "$b" --stream none --emit=schedule -o "$d/g2stage.txt" >"$d/g2stage.log" 2>&1
"$DPC" --target cpu $g2 --no-loops --device-mem "$b" --stream none --emit=schedule -o "$d/g2nl.txt" >>"$d/g2stage.log" 2>&1
check "import: a stage's output from the flat program taken is the flat conversion's own plan" cmp "$d/g2stage.txt" "$d/g2nl.txt"
# dpc as the first process of a PID namespace (a container's, say): the flat conversion's child plans beside
# it as elsewhere (it took a parent of PID 1 for dpc gone and ended at once, and the loops' plan was taken)
if unshare --pid --fork true 2>/dev/null; then
	unshare --pid --fork "$DPC" --target cpu $g2 --device-mem "$b" --stream none --emit=schedule -o "$d/g2pid1.txt" \
		>"$d/g2pid1.log" 2>&1
	check "import: dpc as PID 1 takes the flat conversion's plan, as elsewhere" cmp "$d/g2pid1.txt" "$d/g2nl.txt"
else
	skip "import: dpc as PID 1" "this machine cannot make a PID namespace (unshare --pid --fork)"
fi
"$DPC" --target cpu $g2 --checkpoint min-memory --stream none --no-loops --emit=schedule -o /dev/null \
	--schedule-json "$d/g2nl.least.json" >>"$d/g2stage.log" 2>&1
"$DPC" --target cpu $g2 --device-mem 300000 --emit=schedule -o /dev/null --schedule-json "$d/g2stream.json" \
	>>"$d/g2stage.log" 2>&1
check "import: loops that fit (streamed) where the flat program cannot are taken" python3 - "$d" <<'PY'
import json, sys
d = sys.argv[1]
least = json.load(open(f"{d}/g2nl.least.json"))["peak_device_bytes"]["total"]
s = json.load(open(f"{d}/g2stream.json"))
assert least > 300000 >= s["peak_device_bytes"]["total"] and s.get("loops"), (least, s["peak_device_bytes"], s.get("loops"))
PY

# the converter reads the model once for both programs: --flat writes the flat one only where loops were
# recovered (not in castmask), as --no-loops writes it (but for the weights file it names); --no-weights
# writes no weights
c2=compiler/frontend/onnx/onnx2dp.py
python3 $c2 $g2 -o "$d/c2.dp" --flat "$d/c2.flat.dp" --no-weights >"$d/c2.log" 2>&1
python3 $c2 $g2 --no-loops -o "$d/c2nl.dp" --no-weights >>"$d/c2.log" 2>&1
python3 $c2 "$d/castmask.onnx" -o "$d/c2mask.dp" --flat "$d/c2mask.flat.dp" >>"$d/c2.log" 2>&1
check "import: the converter's --flat is its --no-loops program, written only where loops were found" python3 - "$d" <<'PY'
import os, sys
d = sys.argv[1]
strip = lambda f: [ln for ln in open(f) if not ln.startswith("weights ")]
assert "\n  for " in open(f"{d}/c2.dp").read()
assert strip(f"{d}/c2.flat.dp") == strip(f"{d}/c2nl.dp")
assert 'weights "c2.flat.safetensors"' in open(f"{d}/c2.flat.dp").read()
assert not any(os.path.exists(f"{d}/{n}.safetensors") for n in ("c2", "c2.flat", "c2nl"))
assert os.path.exists(f"{d}/c2mask.dp") and os.path.exists(f"{d}/c2mask.safetensors")
assert not os.path.exists(f"{d}/c2mask.flat.dp") and not os.path.exists(f"{d}/c2mask.flat.safetensors")
PY

# --no-weights reads the model without its large initializers' raw data (read_model's slim read): a weight
# that trains (q.weight, 64 KiB) stands in for itself unread, and a constant (a causal mask as an initializer
# of 64 KiB, a buffer by --params-from) is read from the file where its values decide the program (from
# arange); the program is the one converted with every byte read
python3 - "$d" <<'PY' >"$d/slim.log" 2>&1
import os, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
d = sys.argv[1]
T, D = 128, 128
m = np.where(np.arange(T)[None, :] > np.arange(T)[:, None], np.float32(-1e9), 0).astype(np.float32)[None]
n = helper.make_node
nodes = [n("MatMul", ["x", "q.weight"], ["q"]), n("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
         n("MatMul", ["q", "xt"], ["s"]), n("Add", ["s", "causal"], ["sm"]), n("Softmax", ["sm"], ["p"], axis=-1),
         n("MatMul", ["p", "x"], ["y"])]
inits = [numpy_helper.from_array(np.random.default_rng(3).standard_normal((D, D)).astype(np.float32), "q.weight"),
         numpy_helper.from_array(m, "causal")]
g = helper.make_graph(nodes, "slim", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, T, D])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, T, D])], inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{d}/slim.onnx")
open(f"{d}/slim.params", "w").write("q.weight\n")
PY
python3 $c2 "$d/slim.onnx" --loss mse --params-from "$d/slim.params" -o "$d/slim.dp" >>"$d/slim.log" 2>&1
python3 $c2 "$d/slim.onnx" --loss mse --params-from "$d/slim.params" -o "$d/slim.nw.dp" --no-weights \
	>>"$d/slim.log" 2>&1
check "import: --no-weights leaves large initializers unread but a constant's values, the same program" bash -c "
	grep -q 'where(reshape(cast(arange(128), f32), \[1, 128\])' '$d/slim.nw.dp' &&
	diff <(grep -v '^weights ' '$d/slim.dp') <(grep -v '^weights ' '$d/slim.nw.dp') >/dev/null &&
	test -s '$d/slim.safetensors' && ! test -e '$d/slim.nw.safetensors'"

# the converter's package missing: python3 -S sees no site-packages
printf '#!/bin/sh\nexec python3 -S "$@"\n' >"$d/bare-python"
chmod +x "$d/bare-python"
expect "import: the converter's packages missing: named, with make deps" 3 "is not installed; run \`make deps\`" \
	env DPC_PYTHON="$d/bare-python" "$DPC" "$d/cnn.onnx" --target cpu -o "$d/bare"
finish
