#!/usr/bin/env bash
# Golden outputs of the emitted stages of every sample. UPDATE=1 rewrites them
# (review the diff before committing: the files are the spec).
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
# golden NAME WANT GOT: GOT against WANT (rewritten first under UPDATE=1)
golden() {
	local name=$1 want=$2 got=$3
	[ "${UPDATE:-0}" = 1 ] && cp "$got" "$want"
	if [ ! -f "$want" ]; then
		notok "golden/$name: $want is missing (run UPDATE=1 bash tests/golden/run.sh)"
	elif diff -u "$want" "$got" >"$got.diff"; then
		ok "golden/$name"
	else
		notok "golden/$name differs" "$got.diff"
	fi
}
for dp in samples/*.dp; do
	s=$(basename "$dp" .dp)
	for stage in ast ir grad ckpt stream streamed; do
		want="tests/golden/$s.$stage"
		got="$TEST_OUT/golden.$s.$stage"
		flags="" emit=$stage
		[ $stage = ckpt ] && flags="--checkpoint binomial --snapshots 3"
		# resmlp's layers streamed with Adam under binomial checkpointing: residency and every transfer
		[ $stage = streamed ] && { [ $s = resmlp ] || continue; emit=stream flags="--stream params --optimizer adam --checkpoint binomial --snapshots 3"; }
		if ! "$DPC" --emit=$emit $flags "$dp" -o "$got" 2>"$got.err"; then
			notok "golden/$s.$stage: dpc failed" "$got.err"
			continue
		fi
		golden $s.$stage "$want" "$got"
	done
done
# the language's buffers, updates, training() and tensor literals, as parsed and lowered
for stage in ast grad; do
	want="tests/golden/batchnorm.$stage"
	got="$TEST_OUT/golden.batchnorm.$stage"
	if ! "$DPC" --emit=$stage tests/ops/batchnorm.dp -o "$got" 2>"$got.err"; then
		notok "golden/batchnorm.$stage: dpc failed" "$got.err"
		continue
	fi
	golden batchnorm.$stage "$want" "$got"
done

# values offloaded to the host and fetched back: the U-Net at its least with offloading priced
# (B=4, 16x16): the offloads after their definitions, the settles after their last forward
# readers, the fetches issued ahead and waited for before their first readers
want=tests/golden/unet.offload got="$TEST_OUT/golden.unet.offload"
if ! "$DPC" --emit=ckpt -D B=4 -D S=16 --checkpoint min-memory --device-mem 1G samples/unet.dp -o "$got" 2>"$got.err"; then
	notok "golden/unet.offload: dpc failed" "$got.err"
else
	golden unet.offload "$want" "$got"
fi

# equal tensor literals share one constant array (and so one kernel)
lit="$TEST_OUT/golden.literals"
printf 'param w : f32[3] = ones\nloss { return sum(w * [1, 2, 3]) + sum(w * w * [1, 2, 3]) + sum(w * [3, 2, 1]) }\n' >"$lit.dp"
if "$DPC" --emit=llvm "$lit.dp" -o "$lit.ll" 2>"$lit.err" && [ "$(grep -c '^@dp_literal' "$lit.ll")" = 2 ]; then
	ok "golden/literals-shared"
else
	notok "golden/literals-shared: expected 2 constant arrays" "$lit.err"
fi

# Compile time stays linear in a program's length: a 20,000-term sum is
# emitted as host functions of bounded size (codegen splits a long block into
# parts of at most 256 ops, compiler/codegen/host.c). In one function, as
# before, dp_step had 50,000 instructions in one basic block and LLVM's
# InstCombine and backend took time quadratic in that (14 s here, minutes for
# longer terms); a function over 2,000 instructions fails this check.
long="$TEST_OUT/golden.sum20k"
python3 -c "
n = 20000
print('const B = 4')
print('param W : f32[B, 1] = normal(0.1)')
print('input x : f32[B, 1]')
print('loss {')
print('  let h = x * W')
print('  return mean(' + ' + '.join(['h'] * n) + ')')
print('}')" >"$long.dp"
if "$DPC" --emit=llvm "$long.dp" -o "$long.ll" 2>"$long.err"; then
	awk '/^define/ { name = $0; n = 0 } /^  / { n++ } /^}/ { if (n > max) { max = n; big = name } }
	     /call void @rt_launch/ { launches++ }
	     END { printf "largest function: %d instructions (%s)\nlaunches: %d\n", max, big, launches
	           exit !(max <= 2000 && launches >= 2500) }' "$long.ll" >"$long.log" 2>&1
	if [ $? -eq 0 ]; then
		ok "scale/sum20k: $(sed -n "s/ (.*//p" "$long.log" | head -1)"
	else
		notok "scale/sum20k: a host function over 2,000 instructions (or too few launches)" "$long.log"
	fi
else
	notok "scale/sum20k: dpc failed" "$long.err"
fi
finish
