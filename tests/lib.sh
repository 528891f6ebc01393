# Shared by the test parts: counters and ok / not ok lines.
: "${DPC_BUILD:=$PWD}"
: "${DPC:=$DPC_BUILD/bin/dpc}"
: "${TEST_OUT:=$PWD/tests/out}"
mkdir -p "$TEST_OUT"
# Under make test-sanitize (CC names -fsanitize=) each part runs every code path its checks reach, but
# leaves to the plain run the repeats that only sweep more models, sizes or precisions through the same
# code: their plans and bits are the same bytes there. Each such cut says so where it is made.
sanitized=false
case "${CC:-}" in *-fsanitize=*) sanitized=true ;; esac
npass=0
nfail=0
nskip=0
ok() { echo "ok - $1"; npass=$((npass + 1)); }
notok() {
	echo "not ok - $1"
	nfail=$((nfail + 1))
	if [ -n "${2:-}" ] && [ -f "$2" ]; then sed 's/^/    /' "$2" | head -40; fi
}
# check NAME COMMAND...: ok when the command succeeds; its output is shown on failure
check() {
	local name=$1
	shift
	local log="$TEST_OUT/check.$$.log"
	if "$@" >"$log" 2>&1; then ok "$name"; else notok "$name" "$log"; fi
}
# expect NAME STATUS PATTERN COMMAND...: the command exits with STATUS, its
# output contains PATTERN, and it reports no internal compiler error
expect() {
	local name=$1 want=$2 pat=$3 log="$TEST_OUT/expect.$$.log"
	shift 3
	"$@" >"$log" 2>&1
	local rc=$?
	if [ "$rc" -ne "$want" ]; then
		echo "exit status $rc, expected $want" >>"$log"
		notok "$name" "$log"
	elif ! grep -q -- "$pat" "$log"; then
		echo "output lacks: $pat" >>"$log"
		notok "$name" "$log"
	elif grep -q "internal compiler error" "$log"; then
		notok "$name: internal error" "$log"
	else
		ok "$name"
	fi
}
# skip NAME WHY: a check this machine cannot run, said and counted (tests/run.sh sums them)
skip() {
	echo "# skipped - $1: $2"
	nskip=$((nskip + 1))
}
finish() {
	if [ "$nskip" -gt 0 ]; then echo "$npass passed, $nfail failed, $nskip skipped"; else echo "$npass passed, $nfail failed"; fi
	[ "$nfail" -eq 0 ]
}
json() { # FILE KEY [SUBKEY]: a number of a JSON summary or schedule
	python3 -c "import json,sys; j=json.load(open(sys.argv[1]))[sys.argv[2]]; print(j[sys.argv[3]] if len(sys.argv) > 3 else j)" "$@"
}
