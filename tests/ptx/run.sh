#!/usr/bin/env bash
# Without a GPU: every sample's and op program's kernels, in each precision,
# assemble with ptxas for sm_90, and the CUDA executables link and refuse to
# run cleanly on a machine without a GPU. Skipped where the CUDA toolkit is absent.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PTXAS=$CUDA_HOME/bin/ptxas
if [ ! -x "$PTXAS" ] || [ ! -f "$DPC_BUILD/runtime/libdprt_cuda.a" ]; then
	echo "# no CUDA toolkit at $CUDA_HOME: PTX checks skipped"
	echo "$npass passed, $nfail failed, 1 skipped"
	exit 0
fi
# (under make test-sanitize the op programs in f32 alone, but wide.dp, whose f64 the checks below read:
# the compiler's paths per precision are the samples')
for dp in samples/*.dp tests/ops/*.dp; do
	name=$(basename "$dp" .dp)
	precs="f32 f64 bf16"
	$sanitized && [ "${dp#tests/ops/}" != "$dp" ] && [ "$name" != wide ] && precs=f32
	for prec in $precs; do
		ptx="$TEST_OUT/$name.$prec.ptx"
		if "$DPC" --precision $prec --emit=ptx "$dp" -o "$ptx" 2>"$ptx.log" &&
			"$PTXAS" --gpu-name sm_90 "$ptx" -o "$ptx.cubin" >>"$ptx.log" 2>&1; then
			ok "ptxas/$name.$prec"
		else
			notok "ptxas/$name.$prec" "$ptx.log"
		fi
	done
done
# rows that keep relu masks in bits (bits, unbits) under --checkpoint auto, in each precision
for prec in f32 f64 bf16; do
	ptx="$TEST_OUT/rows_relu.$prec.ptx"
	if "$DPC" --precision $prec --checkpoint auto --emit=ptx tests/ckpt/rows_relu.dp -o "$ptx" 2>"$ptx.log" &&
		grep -q "shr.u32\|shr.b32" "$ptx" && "$PTXAS" --gpu-name sm_90 "$ptx" -o "$ptx.cubin" >>"$ptx.log" 2>&1; then
		ok "ptxas/rows_relu.$prec: masks in bits"
	else
		notok "ptxas/rows_relu.$prec: masks in bits" "$ptx.log"
	fi
done
# kernel quality, read off the PTX: reductions combine lanes with warp
# shuffles (and a block's warps through shared memory), elementwise kernels
# move 16 bytes per access, and index arithmetic divides in 32 bits
expect_ptx() { # NAME FILE PATTERN COUNT-TEST
	local n
	n=$(grep -c -E "$3" "$2")
	if [ "$n" $4 ]; then ok "ptx-quality/$1 ($n)"; else notok "ptx-quality/$1: $n lines match '$3', want $4" "$2"; fi
}
expect_ptx "wide f32: warp shuffles" "$TEST_OUT/wide.f32.ptx" 'shfl\.sync\.bfly\.b32' "-ge 5"
expect_ptx "classifier f32: rows of 10 shared by groups of 8 lanes" "$TEST_OUT/classifier.f32.ptx" 'shfl\.sync\.bfly\.b32.*, 4, 31' "-ge 2"
expect_ptx "wide f32: block barriers" "$TEST_OUT/wide.f32.ptx" 'bar\.sync' "-ge 2"
expect_ptx "wide f32: 16-byte loads" "$TEST_OUT/wide.f32.ptx" 'ld(\.global)?\.v4\.f32' "-ge 1"
expect_ptx "wide f32: 16-byte stores" "$TEST_OUT/wide.f32.ptx" 'st(\.global)?\.v4\.f32' "-ge 1"
expect_ptx "wide f64: 16-byte loads" "$TEST_OUT/wide.f64.ptx" 'ld(\.global)?\.v2\.f64' "-ge 1"
expect_ptx "wide f64: shuffled halves" "$TEST_OUT/wide.f64.ptx" 'shfl\.sync\.bfly\.b32' "-ge 10"
# the sums over 2 rows of 4,096 leave the GPU short of threads: in parts (two launches), the parts' sums in module arrays of each type
expect_ptx "mixed f32: sums in parts in f32 and in f64, each type with its own array" "$TEST_OUT/mixed.f32.ptx" '\.global .*(dp_reduce_f32\[262144\]|dp_reduce_f64\[524288\])' "-eq 2"
# attention on GEMMs (the CUDA target's): the row kernels read the f32 scores (and dP) 16 bytes a lane
"$DPC" --target cuda --precision bf16 --emit=ptx samples/gpt.dp -o "$TEST_OUT/gpt_gemm.bf16.ptx" 2>"$TEST_OUT/gpt_gemm.log" ||
	notok "ptx/gpt on GEMMs: emitted" "$TEST_OUT/gpt_gemm.log"
expect_ptx "gpt bf16 on GEMMs: attention's row kernels read 16 bytes a lane" "$TEST_OUT/gpt_gemm.bf16.ptx" 'ld(\.global)?\.v4\.f32' "-ge 3"
expect_ptx "wide f32: index division in 32 bits" "$TEST_OUT/wide.f32.ptx" 'mul\.hi\.u32' "-ge 1"
for s in resmlp classifier oscillator wide; do
	expect_ptx "$s: no 64-bit index division" "$TEST_OUT/$s.f32.ptx" '(div|rem)\.[us]64|mul\.hi\.[us]64' "-eq 0"
done
# a block's partials are read only after its barrier, in every kernel: two
# reductions in a row (a loss with ignore_index, groupnorm's long rows, as
# in ResNet-56 at batch 128) read the first's partials or raced on the GPU
"$DPC" -D B=128 -D S=32 -D C=16 -D N=9 --emit=ptx samples/resnet.dp -o "$TEST_OUT/resnet56.f32.ptx" 2>"$TEST_OUT/resnet56.log" ||
	notok "ptx/resnet56: emitted" "$TEST_OUT/resnet56.log"
check "ptx-quality/block partials read after the barrier (every sample and op program, ResNet-56)" \
	python3 tests/ptx/barriers.py "$TEST_OUT"/*.ptx

# the kernels in units (compiler/codegen/units.c), forced on every sample: one PTX module that ptxas takes,
# each kernel's code that of one module; the CUDA executable the same bytes on one thread and on two
for dp in samples/*.dp; do
	name=$(basename "$dp" .dp)
	ptx="$TEST_OUT/$name.units.ptx"
	if DPC_CODEGEN_UNITS=4 "$DPC" --emit=ptx "$dp" -o "$ptx" 2>"$ptx.log" &&
		"$PTXAS" --gpu-name sm_90 "$ptx" -o "$ptx.cubin" >>"$ptx.log" 2>&1 &&
		python3 tests/ptx/units.py "$TEST_OUT/$name.f32.ptx" "$ptx" >>"$ptx.log" 2>&1; then
		ok "ptx/units: $name in 4 units assembles, each kernel as in one module"
	else
		notok "ptx/units: $name in 4 units assembles, each kernel as in one module" "$ptx.log"
	fi
done
for t in 1 2; do
	DPC_CODEGEN_UNITS=3 "$DPC" --target cuda --threads $t samples/gpt.dp -o "$TEST_OUT/units_gpt.$t" >"$TEST_OUT/units_gpt.log" 2>&1
done
check "ptx/units: the CUDA executable in 3 units the same bytes on 1 thread and on 2" \
	cmp "$TEST_OUT/units_gpt.1" "$TEST_OUT/units_gpt.2"

# a libdevice that is not bitcode, or cut short: an error naming the file, exit 1, nothing written (once the
# default diagnostic handler's "Invalid bitcode signature" and exit, from any unit's thread)
printf 'not bitcode\n' >"$TEST_OUT/notbc.bc"
head -c 2000 "$CUDA_HOME/nvvm/libdevice/libdevice.10.bc" >"$TEST_OUT/short.bc"
for bad in notbc short; do
	rm -f "$TEST_OUT/badlib"
	expect "ptx/libdevice: $bad.bc named" 1 "dpc: error: cannot use CUDA's libdevice at $TEST_OUT/$bad.bc (set DPC_LIBDEVICE): it does not read as LLVM bitcode" \
		env DPC_LIBDEVICE="$TEST_OUT/$bad.bc" DPC_CODEGEN_UNITS=2 "$DPC" --target cuda samples/classifier.dp -o "$TEST_OUT/badlib"
	check "ptx/libdevice: $bad.bc, no executable written" test ! -e "$TEST_OUT/badlib"
done

for dp in samples/*.dp; do
	name=$(basename "$dp" .dp)
	exe="$TEST_OUT/cuda_$name"
	check "link/$name" "$DPC" --target cuda "$dp" -o "$exe"
	check "link/$name binomial" "$DPC" --target cuda --checkpoint binomial "$dp" -o "$exe.binomial"
done
# here there is no GPU: the executable must say so and exit 1, not crash
if ! ls /dev/nvidia0 >/dev/null 2>&1; then
	"$TEST_OUT/cuda_resmlp" --steps 1 >"$TEST_OUT/nogpu.log" 2>&1
	rc=$?
	if [ $rc -eq 1 ] && grep -q "compiled for NVIDIA GPUs" "$TEST_OUT/nogpu.log"; then
		ok "cuda-executable-without-gpu"
	else
		echo "exit status $rc" >>"$TEST_OUT/nogpu.log"
		notok "cuda-executable-without-gpu" "$TEST_OUT/nogpu.log"
	fi
fi
finish
