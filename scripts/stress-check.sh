#!/bin/bash
# SPDX-License-Identifier: MIT
# stress-check.sh [options] TEST...: run tests N times, optionally with every
# core kept busy, and report each test's pass count. A test that depends on
# how fast the machine is shows up here as a count below N.
#
#   TEST      a test of `make check`: tests/e2e-reload.sh, e2e-reload, test-wire,
#             tests/vm/t-ublk-fs-tcp.sh; or a group: host (every host test: unit
#             and end-to-end), vm (the VM suite: one boot per round, every guest test)
#   -n N      rounds (default 5)
#   --load    keep every core busy with a CPU hog at normal priority meanwhile
#   --builddir DIR   a configured and built tree (default: build under the source)
#   --keep DIR       where logs of failed runs go (default: BUILDDIR/stress-results)
#
# Example: scripts/stress-check.sh host -n 5 --load
#          scripts/stress-check.sh vm -n 2
# Exit 0 when every run of every test passed (a skip counts as not passed).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
rounds=5 load=0 builddir=$src/build keep=
tests=()

usage() {
	sed -n '3,17s/^# \{0,1\}//p' "$0"
	exit "$1"
}

while [ $# -gt 0 ]; do
	case "$1" in
	-n) rounds=$2; shift ;;
	--load) load=1 ;;
	--builddir) builddir=$2; shift ;;
	--keep) keep=$2; shift ;;
	-h | --help) usage 0 ;;
	-*) echo "stress-check: unknown option $1" >&2; usage 2 >&2 ;;
	*) tests+=("$1") ;;
	esac
	shift
done
[ ${#tests[@]} -gt 0 ] || { echo "stress-check: name at least one test or group" >&2; usage 2 >&2; }
case "$rounds" in
'' | *[!0-9]* | 0) echo "stress-check: -n wants a positive count, got '$rounds'" >&2; exit 2 ;;
esac
[ -f "$builddir/Makefile" ] ||
	{ echo "stress-check: $builddir is not a configured build tree (scripts/build.sh DIR)" >&2; exit 2; }
builddir=$(cd "$builddir" && pwd)
keep=${keep:-$builddir/stress-results}
mkdir -p "$keep"

# The TESTS value for make, and the list of test names it expands to.
expand() {
	make -s -C "$builddir" -f Makefile -f - print-tests TESTS="$1" <<'MK'
print-tests:
	@echo $(TESTS)
MK
}
sel=()
for t in "${tests[@]}"; do
	case "$t" in
	host) sel+=('$(HOST_TESTS)') ;;
	vm) sel+=('tests/vm/vm-suite.sh $(VM_GUEST_TESTS)') ;;
	tests/*) sel+=("$t") ;;
	t-*) sel+=("tests/vm/${t%.sh}.sh") ;;
	test-*) sel+=("tests/$t") ;;
	*) sel+=("tests/${t%.sh}.sh") ;;
	esac
done
TESTS_VALUE="${sel[*]}"
read -r -a names <<<"$(expand "$TESTS_VALUE")"
[ ${#names[@]} -gt 0 ] || { echo "stress-check: no test selected" >&2; exit 2; }
# A guest test needs the suite's boot first.
for n in "${names[@]}"; do
	case "$n" in tests/vm/t-*)
		case " ${names[*]} " in *" tests/vm/vm-suite.sh "*) ;; *)
			TESTS_VALUE="tests/vm/vm-suite.sh $TESTS_VALUE"
			names=(tests/vm/vm-suite.sh "${names[@]}") ;;
		esac
		break ;;
	esac
done
for n in "${names[@]}"; do
	[ -e "$src/$n" ] || [ -e "$builddir/$n" ] ||
		{ echo "stress-check: no such test: $n" >&2; exit 2; }
done

hogs=()
stop_hogs() {
	[ ${#hogs[@]} -eq 0 ] || kill "${hogs[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
if [ "$load" = 1 ]; then
	for _ in $(seq 1 "$(nproc)"); do
		sh -c 'while :; do :; done' &
		hogs+=($!)
	done
	echo "stress-check: ${#hogs[@]} CPU hog(s) running"
fi

declare -A pass
for n in "${names[@]}"; do pass[$n]=0; done
t0=$(date +%s)
for r in $(seq 1 "$rounds"); do
	echo "=== round $r/$rounds ($(($(date +%s) - t0))s)"
	make -C "$builddir" check TESTS="$TESTS_VALUE" >"$keep/round-$r.out" 2>&1 || true
	for n in "${names[@]}"; do
		trs="$builddir/${n%.*}.trs"
		res=$(sed -n 's/^:test-result: //p' "$trs" 2>/dev/null | head -1)
		if [ "$res" = PASS ]; then
			pass[$n]=$((pass[$n] + 1))
		else
			echo "  $n: ${res:-no result}"
			mkdir -p "$keep/round-$r"
			cp "$builddir/${n%.*}.log" "$keep/round-$r/" 2>/dev/null || true
		fi
	done
done

echo "=== passes per test, $rounds round(s)$([ "$load" = 1 ] && echo ", under load") in $(($(date +%s) - t0))s"
bad=0
for n in "${names[@]}"; do
	mark=
	[ "${pass[$n]}" -eq "$rounds" ] || { mark="  <--"; bad=$((bad + 1)); }
	printf '%4d/%d  %s%s\n' "${pass[$n]}" "$rounds" "$n" "$mark"
done
[ "$bad" -eq 0 ] || echo "stress-check: $bad test(s) failed at least once; logs in $keep/round-*/"
[ "$bad" -eq 0 ]
