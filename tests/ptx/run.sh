#!/usr/bin/env bash
# Without a GPU: every sample's and op program's kernels, in both precisions,
# assemble with ptxas for sm_90, and the CUDA executables link and refuse to
# run cleanly on a machine without a GPU. Skipped where the CUDA toolkit is absent.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
PTXAS=$CUDA_HOME/bin/ptxas
if [ ! -x "$PTXAS" ] || [ ! -f runtime/libdprt_cuda.a ]; then
	echo "# no CUDA toolkit at $CUDA_HOME: PTX checks skipped"
	echo "$npass passed, $nfail failed, 1 skipped"
	exit 0
fi
for dp in samples/*.dp tests/ops/*.dp; do
	name=$(basename "$dp" .dp)
	for prec in f32 f64; do
		ptx="$TEST_OUT/$name.$prec.ptx"
		if "$DPC" --precision $prec --emit=ptx "$dp" -o "$ptx" 2>"$ptx.log" &&
			"$PTXAS" --gpu-name sm_90 "$ptx" -o "$ptx.cubin" >>"$ptx.log" 2>&1; then
			ok "ptxas/$name.$prec"
		else
			notok "ptxas/$name.$prec" "$ptx.log"
		fi
	done
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
