#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Runs inside the VM (started by guest-init.sh): executes each guest test in
# $RDMABLK_VM_TESTS with a timeout and writes, into the results share:
#   NAME.log    stdout+stderr of the test
#   NAME.rc     its exit status (0 pass, 77 skip, 124 timeout, else fail)
#   NAME.dmesg  kernel messages logged while it ran
#   done        written last, after every test ran
# A test may ask for a longer timeout with a line "# vm-timeout: SECONDS".

RES=/run/rdmablk/results
. "$RES/params"

RDMABLK_VM_GUEST=1
top_srcdir=$RDMABLK_SRCDIR
top_builddir=$RDMABLK_BUILDDIR
export RDMABLK_VM_GUEST RDMABLK_SRCDIR RDMABLK_BUILDDIR top_srcdir top_builddir
export RDMABLK_VM_RESULTS="$RES"
. "$RDMABLK_SRCDIR/tests/vm/lib.sh"

npass=0
nfail=0
nskip=0
for t in $RDMABLK_VM_TESTS; do
	name=$(basename "$t" .sh)
	tmo=$(sed -n 's/^# vm-timeout: *\([0-9][0-9]*\).*/\1/p' "$t" 2>/dev/null | head -n 1)
	tmo=${tmo:-$RDMABLK_VM_TEST_TIMEOUT}
	scratch=/tmp/rdmablk-vm/$name
	rm -rf "$scratch"
	mkdir -p "$scratch"
	dmesg -C 2>/dev/null
	echo "rdmablk-vm: === $name (timeout ${tmo}s)"
	start=$(cut -d. -f1 /proc/uptime)
	# timeout(1) puts itself in a new process group: kill what the test left behind with it.
	(cd "$scratch" && TMPDIR=$scratch RDMABLK_VM_SCRATCH=$scratch \
		exec timeout -k 10 "$tmo" /bin/sh "$t") >"$RES/$name.log" 2>&1 </dev/null &
	pid=$!
	wait "$pid"
	rc=$?
	pkill -KILL -g "$pid" 2>/dev/null
	end=$(cut -d. -f1 /proc/uptime)
	dmesg >"$RES/$name.dmesg" 2>/dev/null
	vm_reset >>"$RES/$name.log" 2>&1
	echo "$rc" >"$RES/$name.rc"
	case $rc in
	0) res=PASS npass=$((npass + 1)) ;;
	77) res=SKIP nskip=$((nskip + 1)) ;;
	124 | 137) res="FAIL (timeout)" nfail=$((nfail + 1)) ;;
	*) res="FAIL (exit $rc)" nfail=$((nfail + 1)) ;;
	esac
	echo "rdmablk-vm: --- $name: $res in $((end - start)) s"
	# The scratch dirs live in the guest's RAM (tmpfs): keep only a failed test's.
	[ "$rc" != 0 ] || rm -rf "$scratch"
done
echo "$npass passed, $nfail failed, $nskip skipped" >"$RES/done"
echo "rdmablk-vm: guest: $npass passed, $nfail failed, $nskip skipped"
