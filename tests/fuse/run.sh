#!/usr/bin/env bash
# Fused loops: a loop whose body is small kernels and copies runs as one
# kernel (the forward loop's steps, a revolve's schedule in chunks of
# actions). Against the unfused build (--no-fuse), under every schedule and
# precision: gradients bitwise, the same recomputed steps and FLOPs, the same
# peak, and a handful of launches a step instead of thousands. The
# oscillator at T = 10^6 under binomial checkpointing takes at most 300
# launches a step, with the closed form's recomputed steps. Loops that do not
# qualify say why in --emit=llvm.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/fuse"
mkdir -p "$o"

# same NAME MAX DPC-ARGS...: fused and --no-fuse builds, 2 steps each, compared;
# the fused build makes at most MAX launches a step and the unfused ten times as many
same() {
	local name=$1 max=$2 log="$o/$1.log"
	shift 2
	if "$DPC" --target cpu --schedule-json "$o/$name.plan.json" "$@" -o "$o/$name" >"$log" 2>&1 &&
		"$DPC" --target cpu --no-fuse "$@" -o "$o/$name.nf" >>"$log" 2>&1 &&
		"$o/$name" --steps 2 --quiet --dump-grads "$o/$name.g" --summary-json "$o/$name.json" >>"$log" 2>&1 &&
		"$o/$name.nf" --steps 2 --quiet --dump-grads "$o/$name.nf.g" --summary-json "$o/$name.nf.json" >>"$log" 2>&1 &&
		cmp "$o/$name.g" "$o/$name.nf.g" >>"$log" 2>&1 &&
		python3 - "$o/$name.json" "$o/$name.nf.json" "$o/$name.plan.json" "$max" >>"$log" 2>&1 <<'PY'; then
import json, sys
f, u, plan = (json.load(open(a)) for a in sys.argv[1:4])
most = int(sys.argv[4])
assert f["recomputed_steps"] == u["recomputed_steps"] == 2 * plan["recomputed_steps"], \
    (f["recomputed_steps"], u["recomputed_steps"], plan["recomputed_steps"])
assert f["recomputed_flops"] == u["recomputed_flops"], (f["recomputed_flops"], u["recomputed_flops"])
assert f["peak_device_bytes"] == u["peak_device_bytes"] == f["predicted_device_bytes"], (f, u)
assert f["kernel_launches"] <= 2 * most, f["kernel_launches"]
assert 10 * f["kernel_launches"] <= u["kernel_launches"], (f["kernel_launches"], u["kernel_launches"])
print(f"launches {f['kernel_launches']} fused, {u['kernel_launches']} unfused")
PY
		ok "fuse/$name"
	else
		notok "fuse/$name" "$log"
	fi
}

# a cell of elementwise ops, a row softmax, a reduction, a relu (masks in bits
# under auto), slices by the step index; every schedule, budgets with rows
cell=tests/fuse/cell.dp
same cell-none 20 --checkpoint none $cell
same cell-binomial 20 --checkpoint binomial $cell
same cell-binomial-s3 20 --checkpoint binomial --snapshots 3 $cell
same cell-auto 20 --checkpoint auto $cell
same cell-auto-s3 20 --checkpoint auto --snapshots 3 $cell
same cell-budget-rows 20 --device-mem 400000 --stream none $cell
same cell-budget-tight 20 --device-mem 215000 --stream none $cell
same cell-binomial-f64 20 --checkpoint binomial --precision f64 $cell
same cell-auto-f64 20 --checkpoint auto --precision f64 $cell
same cell-binomial-bf16 20 --checkpoint binomial --precision bf16 $cell
same cell-auto-bf16 20 --checkpoint auto --precision bf16 $cell
# an RNN cell: small matmuls as dot-product kernels inside the fused loop
rnn=tests/fuse/rnn.dp
same rnn-none 20 --checkpoint none $rnn
same rnn-binomial 20 --checkpoint binomial $rnn
same rnn-auto 20 --checkpoint auto $rnn
same rnn-auto-f64 20 --checkpoint auto --precision f64 $rnn
same rnn-binomial-bf16 20 --checkpoint binomial --precision bf16 $rnn
# the oscillator's body: elementwise over [32] and scalar parameters
osc=samples/oscillator.dp
same osc-none 20 --checkpoint none -D T=2000 $osc
same osc-binomial 20 --checkpoint binomial -D T=2000 $osc
same osc-auto 20 --checkpoint auto -D T=2000 $osc
same osc-budget 20 --device-mem 20000 --stream none -D T=2000 $osc

# T = 10^6 under binomial checkpointing: one step fused and unfused, bitwise;
# launches a step at most 300; recomputed steps r n - C(s + r, r - 1) with
# s = ceil(sqrt(n)) + 1, computed here
big="$o/osc1e6" log="$o/osc1e6.log"
if "$DPC" --target cpu --checkpoint binomial -D T=1000000 $osc -o "$big" >"$log" 2>&1 &&
	"$DPC" --target cpu --no-fuse --checkpoint binomial -D T=1000000 $osc -o "$big.nf" >>"$log" 2>&1 &&
	"$big" --steps 1 --quiet --dump-grads "$big.g" --summary-json "$big.json" >>"$log" 2>&1 &&
	"$big.nf" --steps 1 --quiet --dump-grads "$big.nf.g" --summary-json "$big.nf.json" >>"$log" 2>&1 &&
	cmp "$big.g" "$big.nf.g" >>"$log" 2>&1 &&
	python3 - "$big.json" "$big.nf.json" >>"$log" 2>&1 <<'PY'; then
import json, math, sys
f, u = (json.load(open(a)) for a in sys.argv[1:3])
n = 10**6
s = math.isqrt(n - 1) + 2  # ceil(sqrt(n)) + 1
r = 0
while math.comb(s + r, s) < n:
    r += 1
closed = r * n - math.comb(s + r, r - 1)
assert f["steps"] == 1 and f["recomputed_steps"] == u["recomputed_steps"] == closed, (f["recomputed_steps"], closed)
calls = f["kernel_launches"] + f["gemm_calls"] + f["copy_calls"]
assert calls <= 300, calls
print(f"{f['kernel_launches']} launches and {calls} device calls a step fused, "
      f"{u['kernel_launches'] + u['gemm_calls'] + u['copy_calls']} unfused; {closed} recomputed steps")
PY
	ok "fuse/oscillator-1e6: $(tail -1 "$log")"
else
	notok "fuse/oscillator-1e6" "$log"
fi

# the choice, in --emit=llvm: one kernel, or why not; --profile names the fused kernels
expect "fuse/emit-llvm: one kernel" 0 'revolve %t.[0-9]* (2000 steps) in dp_step: one kernel' \
	"$DPC" --target cpu --checkpoint binomial -D T=2000 --emit=llvm $osc
# a matmul with 300 terms per dot product (more than IR_SMALL_DOT) is a GEMM: the loop stays unfused
cat >"$o/gemm.dp" <<'DP'
param A : f32[300, 8] = normal(0.05)
param C : f32[8, 300] = normal(0.3)
input x : f32[4, 300]
loss {
  let h = x
  for i in 0..3 {
    h = tanh(h @ A @ C)
  }
  return mean(h * h)
}
DP
expect "fuse/emit-llvm: a GEMM keeps the launches" 0 'a launch per op and step, as matmul runs from the host' \
	"$DPC" --target cpu --emit=llvm "$o/gemm.dp"
expect "fuse/emit-llvm: a small matmul fuses" 0 'loop %i.[0-9]* (5 steps) in dp_step: one kernel' \
	"$DPC" --target cpu --emit=llvm tests/ops/loop.dp
expect "fuse/emit-llvm: --no-fuse" 0 'a launch per op and step, as --no-fuse' \
	"$DPC" --target cpu --no-fuse -D T=100 --emit=llvm $osc
if "$DPC" --target cpu --checkpoint binomial -D T=2000 $osc -o "$o/prof" >"$o/prof.log" 2>&1 &&
	"$o/prof" --steps 2 --profile >>"$o/prof.log" 2>&1 &&
	grep -Eq '^ +[0-9.]+ +[0-9.]+ +1 +revolve\[2000\]$' "$o/prof.log" &&
	grep -Eq '^ +[0-9.]+ +[0-9.]+ +1 +loop\[2000\]$' "$o/prof.log"; then
	ok "fuse/profile: one revolve[2000] and one loop[2000] launch in the step"
else
	notok "fuse/profile: one revolve[2000] and one loop[2000] launch in the step" "$o/prof.log"
fi

# finite differences through the fused kernels, in f64
for dp in $cell $rnn; do
	for ck in none binomial auto; do
		exe="$o/gc-$(basename $dp .dp)-$ck"
		if "$DPC" --target cpu --precision f64 --checkpoint $ck $dp -o "$exe" >"$exe.log" 2>&1 &&
			grep -q 'one kernel' <("$DPC" --target cpu --precision f64 --checkpoint $ck --emit=llvm $dp) &&
			"$exe" --gradcheck --gradcheck-threshold 1e-6 >>"$exe.log" 2>&1; then
			ok "fuse/gradcheck-$(basename $dp .dp)-$ck"
		else
			notok "fuse/gradcheck-$(basename $dp .dp)-$ck" "$exe.log"
		fi
	done
done

# the fused kernels assemble for sm_90: one block's barriers, the actions read into shared memory
PTXAS=${CUDA_HOME:-/usr/local/cuda}/bin/ptxas
if [ -x "$PTXAS" ]; then
	for prec in f32 f64 bf16; do
		for ck in binomial auto; do
			for dp in $cell $rnn; do
				s=$(basename $dp .dp) ptx="$o/$s.$ck.$prec.ptx"
				if "$DPC" --target cuda --precision $prec --checkpoint $ck --emit=ptx $dp -o "$ptx" >"$ptx.log" 2>&1 &&
					grep -q 'bar.sync' "$ptx" && grep -q 'dp_actions' "$ptx" &&
					"$PTXAS" --gpu-name sm_90 "$ptx" -o "$ptx.cubin" >>"$ptx.log" 2>&1; then
					ok "fuse/ptxas-$s-$ck.$prec"
				else
					notok "fuse/ptxas-$s-$ck.$prec" "$ptx.log"
				fi
			done
		done
	done
else
	echo "# no ptxas: the fused kernels' PTX is not assembled"
fi
finish
