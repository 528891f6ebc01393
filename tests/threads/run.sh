#!/usr/bin/env bash
# The same bits at any thread count (docs/threads.md): every sample, at sizes
# where its GEMMs are cut into several tiles and its convolutions into
# several pieces of images, trains 3 steps at 1, 2 and 3 threads in f32, f64
# and bf16; the saved parameters must be byte-identical. --threads gives a
# count up to the cores this process may run on, OMP_NUM_THREADS one beyond
# (--threads is cut to the cores, OMP_NUM_THREADS taken as given). Then the
# thread count's sources, its report (-v, the summary's "threads") and bad
# counts.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/threads"
mkdir -p "$o"
cores=$(nproc)

# sizes: GEMMs of 2^24 FLOPs or more, convolutions of several pieces
declare -A size=(
	[classifier]="-D B=512 -D D=128 -D H=256"
	[densenet]="-D B=8 -D S=32"
	[dranet]="-D B=4 -D S=32 -D C=16"
	[gpt]="-D B=4 -D T=128 -D D=128 -D L=1"
	[inception]="-D B=8 -D S=32"
	[oscillator]="-D T=200"
	[resmlp]="-D B=256 -D D=128 -D H=256 -D L=2"
	[resnet]="-D B=8 -D S=32 -D C=16 -D N=1"
	[unet]="-D B=4 -D S=32 -D C=16"
)
# the segmentation samples read a toy set (tools/seg_data.py) at their size: the synthetic teacher's labels are slow there
python3 tools/seg_data.py "$o/dranet_x.npy" "$o/dranet_y.npy" 8 32 4 4
python3 tools/seg_data.py "$o/unet_x.npy" "$o/unet_y.npy" 8 32 3 2
for dp in samples/*.dp; do
	name=$(basename "$dp" .dp)
	data=""
	case $name in dranet | unet) data="--data $o/${name}_x.npy --labels $o/${name}_y.npy" ;; esac
	for prec in f32 f64 bf16; do
		exe="$o/$name.$prec"
		log="$exe.log"
		# shellcheck disable=SC2086
		if ! "$DPC" --target cpu --precision $prec ${size[$name]:-} "$dp" -o "$exe" >"$log" 2>&1; then
			notok "threads/$name $prec: compile" "$log"
			continue
		fi
		good=1
		for t in 1 2 3; do
			if [ $t -le "$cores" ]; then run=("$exe" --threads $t); else run=(env OMP_NUM_THREADS=$t "$exe"); fi
			# shellcheck disable=SC2086
			"${run[@]}" --steps 3 $data --quiet --save "$exe.$t.st" --summary-json "$exe.$t.json" >>"$log" 2>&1 || good=0
			[ "$(json "$exe.$t.json" threads 2>/dev/null)" = $t ] || { echo "$t threads: the summary says otherwise" >>"$log"; good=0; }
		done
		if [ $good = 1 ] && cmp "$exe.1.st" "$exe.2.st" >>"$log" 2>&1 && cmp "$exe.1.st" "$exe.3.st" >>"$log" 2>&1; then
			ok "threads/$name $prec: the saved parameters byte-identical at 1, 2 and 3 threads"
		else
			notok "threads/$name $prec: the saved parameters at 1, 2 and 3 threads" "$log"
		fi
	done
done

# the count: --threads, else OMP_NUM_THREADS, else the cores this process may run on (its affinity)
exe="$o/resmlp.f32"
expect threads/verbose-default 0 "resmlp: $cores threads\? (the $cores cores\? this process may run on)" env -u OMP_NUM_THREADS "$exe" --steps 1 -v
expect threads/verbose-omp 0 "resmlp: 3 threads (OMP_NUM_THREADS; this process may run on $cores core" env OMP_NUM_THREADS=3 "$exe" --steps 1 -v
expect threads/verbose-flag 0 "resmlp: 1 thread (--threads; this process may run on" env OMP_NUM_THREADS=3 "$exe" --steps 1 --threads 1 -v
expect threads/openblas-not-read 0 "resmlp: $cores threads\? (the $cores" env -u OMP_NUM_THREADS OPENBLAS_NUM_THREADS=7 "$exe" --steps 1 -v
# taskset: one core allowed; the default follows it, and --threads above it is cut to it, said once
expect threads/taskset-default 0 "resmlp: 1 thread (the 1 core this process may run on)" env -u OMP_NUM_THREADS taskset -c 0 "$exe" --steps 1 -v
expect threads/taskset-cut 0 "warning: --threads 2: this process may run on 1 core; using 1" taskset -c 0 "$exe" --steps 1 --threads 2 \
	--summary-json "$o/cut.json"
check threads/taskset-cut-summary test "$(json "$o/cut.json" threads)" = 1
check threads/taskset-cut-once bash -c "taskset -c 0 '$exe' --steps 3 --threads 2 2>&1 | grep -c 'warning: --threads' | grep -qx 1"
expect threads/omp-garbage 0 "ignoring OMP_NUM_THREADS=lots" env OMP_NUM_THREADS=lots "$exe" --steps 1
# bad counts: a clear error, exit 2
expect threads/zero 2 "error: --threads needs an integer in 1..256, not '0'" "$exe" --threads 0
expect threads/negative 2 "error: --threads needs an integer in 1..256, not '-2'" "$exe" --threads -2
expect threads/too-many 2 "error: --threads needs an integer in 1..256, not '1000'" "$exe" --threads 1000
expect threads/not-a-number 2 "error: --threads needs an integer in 1..256, not 'two'" "$exe" --threads two
finish
