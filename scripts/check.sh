#!/bin/bash
# The full test suite, as CI runs it: install dependencies, build with
# warnings fatal, `make check` (unit, end-to-end over tcp, and the VM suite
# on real kernel NBD/ublk/Soft-RoCE), the same under ASan+UBSan, a short
# run of every fuzzer, and `make distcheck`.
#   scripts/check.sh            everything
#   SKIP_ASAN=1 / SKIP_FUZZ=1 / SKIP_DISTCHECK=1 to leave a stage out locally
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"
jobs=$(nproc)
t0=$(date +%s)
stage() { echo "=== $* ($(($(date +%s) - t0))s)"; }

# CI stops the job at CI_BUDGET seconds (90 min). The VM suite gets a deadline that leaves
# time for the stages after it, so a hung guest ends in a failure with its logs, not in a
# killed job.
if [ "${CI:-}" = true ] || [ -n "${CI_BUDGET:-}" ]; then
	RDMABLK_VM_DEADLINE=$((t0 + ${CI_BUDGET:-5400} - ${CI_RESERVE:-1200}))
	export RDMABLK_VM_DEADLINE
fi

stage deps
scripts/deps.sh
stage autogen
./autogen.sh >/dev/null

# run_check DIR TESTS-VARIABLE [configure args]: build and make check.
run_check() {
	local dir=$1 tests=$2
	shift 2
	stage "build $dir ($*)"
	rm -rf "$dir"
	scripts/build.sh "$dir" --enable-werror "$@" >"$dir.build.log" 2>&1 ||
		{ tail -50 "$dir.build.log"; exit 1; }
	stage "make check in $dir"
	local override=()
	[ "$tests" = TESTS ] || override=(TESTS="\$($tests)")
	# The VM suite's progress, live: make check shows a test's output only once it ends.
	mkdir -p "$dir/tests/vm/results"
	tail -n 0 -F "$dir/tests/vm/results/progress" 2>/dev/null &
	local tailpid=$!
	# -j1: the VM suite would otherwise starve the timing-bound host tests.
	local rc=0
	make -C "$dir" check "${override[@]}" || rc=$?
	kill "$tailpid" 2>/dev/null
	wait "$tailpid" 2>/dev/null || true
	if [ $rc != 0 ]; then
		find "$dir/tests" -name '*.log' -newer "$dir.build.log" -print0 |
			xargs -0 grep -l -E '^(FAIL|ERROR)' 2>/dev/null | while read -r l; do
			echo "---- $l"
			tail -60 "$l"
		done
		cat "$dir/test-suite.log" | head -200
		exit 1
	fi
}

# Everything, VM suite included, in the normal build; the host suite again
# under ASan+UBSan (the VM suite boots a kernel per run: once is enough
# for the 90-minute CI budget).
run_check build TESTS
[ "${SKIP_ASAN:-0}" = 1 ] || run_check build-asan HOST_TESTS --enable-sanitizers

if [ "${SKIP_FUZZ:-0}" != 1 ]; then
	stage "fuzzers"
	rm -rf build-fuzz
	scripts/build.sh build-fuzz --enable-fuzzing CC=clang-14 >build-fuzz.build.log 2>&1 ||
		{ tail -50 build-fuzz.build.log; exit 1; }
	for f in build-fuzz/fuzz/fuzz-*; do
		[ -x "$f" ] || continue
		name=$(basename "$f")
		corpus="build-fuzz/corpus-$name"
		mkdir -p "$corpus"
		[ -d "fuzz/corpus/$name" ] && cp -r "fuzz/corpus/$name/." "$corpus/"
		echo "fuzzing $name for ${FUZZ_SECONDS:-30}s"
		"$f" -max_total_time="${FUZZ_SECONDS:-30}" -print_final_stats=0 "$corpus" \
			>"build-fuzz/$name.log" 2>&1 || { tail -40 "build-fuzz/$name.log"; exit 1; }
		tail -1 "build-fuzz/$name.log"
	done
fi

if [ "${SKIP_DISTCHECK:-0}" != 1 ]; then
	stage "distcheck"
	# The tarball's own check runs the unit tests; the end-to-end and VM
	# suites ran above on this very tree.
	make -C build distcheck TESTS='$(UNIT_TESTS)' >build/distcheck.log 2>&1 ||
		{ tail -60 build/distcheck.log; exit 1; }
	grep -E "archives ready|\.tar\.gz" build/distcheck.log | head -3
fi
stage "all checks passed"
# One closing line for CI: tests run by both make check passes.
pass=0 fail=0
for d in build build-asan; do
	[ -f "$d/test-suite.log" ] || continue
	p=$(sed -n 's/^# PASS: *//p' "$d/test-suite.log")
	f=$(sed -n 's/^# FAIL: *//p' "$d/test-suite.log")
	pass=$((pass + ${p:-0}))
	fail=$((fail + ${f:-0}))
done
echo "$pass passed, $fail failed"
