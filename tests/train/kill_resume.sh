#!/usr/bin/env bash
# kill_resume.sh OUT EXE ARGS...: EXE ARGS run once uninterrupted (--save); then
# again, saving its state every step, killed with SIGKILL at 5 random moments
# (in a step, between steps, in a save) and each time resumed from the state it
# left; then to the end. The final parameters must be byte-identical to the
# uninterrupted run's. Prints what the kills hit.
set -u
out=$1 exe=$2
shift 2
mkdir -p "$out"
rm -f "$out"/state.st* "$out"/whole.st "$out"/final.st
start=$(date +%s.%N)
"$exe" "$@" --save-state "$out/state.st" --save-every 1 --save "$out/whole.st" --quiet >"$out/whole.log" 2>&1 || { cat "$out/whole.log"; exit 1; }
whole=$(echo "$(date +%s.%N) - $start" | bc)
rm -f "$out/state.st"
killed=0
for k in 1 2 3 4 5; do
	# a random moment in the first sixth of the run's length, so that each of the five
	# lands before the run ends: in a step, between steps or in a save
	delay=$(awk -v w="$whole" -v r="$RANDOM" 'BEGIN { printf "%.3f", 0.01 + w * r / 32767 / 6 }')
	resume=()
	[ -f "$out/state.st" ] && resume=(--resume "$out/state.st")
	{
		timeout -s KILL "$delay" "$exe" "$@" "${resume[@]}" --save-state "$out/state.st" --save-every 1 \
			--save "$out/final.st" --quiet >>"$out/runs.log" 2>&1
		rc=$?
	} 2>>"$out/runs.log" # the shell's "Killed"
	if [ $rc = 137 ]; then
		killed=$((killed + 1))
	elif [ $rc != 0 ]; then
		echo "run $k failed with status $rc"; cat "$out/runs.log"; exit 1
	fi
done
resume=()
[ -f "$out/state.st" ] && resume=(--resume "$out/state.st")
"$exe" "$@" "${resume[@]}" --save-state "$out/state.st" --save-every 1 --save "$out/final.st" --quiet >>"$out/runs.log" 2>&1 ||
	{ echo "the last resume failed"; cat "$out/runs.log"; exit 1; }
cmp "$out/whole.st" "$out/final.st" || exit 1
echo "$killed of 5 runs killed (run: ${whole}s)"
[ $killed -ge 3 ]
