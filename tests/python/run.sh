#!/usr/bin/env bash
# The Python package (python/dpc) over the C API, on models built with onnx.helper (no PyTorch): a
# session's steps from arrays give the executable's parameters byte for byte, every refusal is a
# dpc.Error with dpc's message and leaves the session going, the plan is the schedule's, --summary and
# --log-json work through it. test_dpc.py holds the checks.
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
o="$TEST_OUT/python"
mkdir -p "$o"
# A library built under the sanitizers needs their runtime loaded first, which a Python interpreter
# does not have: the C API's every call runs under them in tests/api; here the plain build alone.
if $sanitized; then
	ok "python: the package runs against the plain build (the sanitized library does not load into Python)"
	finish
	exit $?
fi
PYTHONPATH="$PWD/python" DPC="$DPC" DPC_TARGET=cpu python3 tests/python/test_dpc.py "$o" >"$o/py.log" 2>&1
rc=$?
grep -E '^(not )?ok - |^    ' "$o/py.log"
npass=$((npass + $(grep -c '^ok - ' "$o/py.log")))
nfail=$((nfail + $(grep -c '^not ok - ' "$o/py.log")))
[ $rc -eq 0 ] || grep -q '^not ok - ' "$o/py.log" || notok "python: test_dpc.py exited with status $rc" "$o/py.log"
finish
