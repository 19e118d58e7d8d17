#!/bin/sh
# SPDX-License-Identifier: MIT
#
# make check host test: prepare the VM and boot it once for every guest test in
# $RDMABLK_VM_TESTS (set by Makefile.am; default tests/vm/t-*.sh). Leaves the results in
# $top_builddir/tests/vm/results, where each guest test's host side (lib.sh) reads its own;
# suite.status tells them whether the VM ran ("ok"), was skipped or failed.
#
# Passes when the VM booted and came back with a result for every test (the tests' own
# verdicts are reported by their own make check entries). Skips (77) only when the VM cannot
# be had here (prepare.sh says why) or RDMABLK_VM=0; under CI=true a skip is a failure.

set -u

VMDIR=$(cd "$(dirname "$0")" && pwd)
BUILDDIR=$(cd "${top_builddir:-.}" && pwd)
RES=$BUILDDIR/tests/vm/results
mkdir -p "$RES"
rm -f "$RES/suite.status"

set_status() { echo "$*" >"$RES/suite.status"; }

finish_skip() {
	set_status skip "$*"
	if [ "${CI:-}" = true ]; then
		echo "FAIL: VM tests skipped, which CI does not allow: $*"
		exit 1
	fi
	echo "SKIP: $*"
	exit 77
}

[ "${RDMABLK_VM:-1}" = 0 ] && finish_skip "RDMABLK_VM=0 in the environment"

names=
for t in ${RDMABLK_VM_TESTS:-"$VMDIR"/t-*.sh}; do
	names="$names $(basename "$t")"
done
[ -n "$names" ] || { set_status fail "no guest tests"; echo "FAIL: no guest tests"; exit 1; }

t0=$(date +%s)
rc=0
sh "$VMDIR/prepare.sh" >"$RES/prepare.log" 2>&1 || rc=$?
cat "$RES/prepare.log"
t1=$(date +%s)
echo "# prepare: $((t1 - t0)) s"
case $rc in
0) ;;
77) finish_skip "$(sed -n 's/^prepare: SKIP: //p' "$RES/prepare.log" | head -n 1)" ;;
*)
	set_status fail "prepare.sh exit $rc"
	echo "FAIL: prepare.sh exit $rc"
	exit 1
	;;
esac

rc=0
# shellcheck disable=SC2086
sh "$VMDIR/run.sh" --no-prepare --results "$RES" --builddir "$BUILDDIR" $names >"$RES/run.out" 2>&1 ||
	rc=$?
cat "$RES/run.out"
t2=$(date +%s)
echo "# VM run: $((t2 - t1)) s for$names"
echo "---- guest console ($RES/console.log)"
cat "$RES/console.log" 2>/dev/null
echo "---- end of guest console"
case $rc in
0 | 1)
	# Every test has a result (1: some failed; their own entries say so).
	set_status ok
	exit 0
	;;
2)
	# Some tests have none (out of boots or time); each test's own entry says which.
	set_status ok
	echo "FAIL: the VM did not run every test: $(grep -c ': NO RESULT$' "$RES/run.out") without a result"
	exit 1
	;;
77) finish_skip "run.sh could not start the VM" ;;
*)
	set_status fail "run.sh exit $rc"
	echo "FAIL: run.sh exit $rc"
	exit 1
	;;
esac
