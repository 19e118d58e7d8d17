#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Runs inside the VM (started by guest-init.sh): executes each guest test in
# $RDMABLK_VM_TESTS with a timeout and writes, into the results share:
#   NAME.log    stdout+stderr of the test
#   NAME.rc     its exit status (0 pass, 77 skip, 124 timeout, else fail)
#   NAME.dmesg  kernel messages logged while it ran
#   done        written last, after every test ran
#   tainted     instead of done when the reset after a test failed: the runner stops, the
#               host boots again for the tests left
# A test may ask for a longer timeout with a line "# vm-timeout: SECONDS".
# The host's watchdog (run.sh) follows the "===" / "---" lines on the console.

RES=/run/rdmablk/results
. "$RES/params"

RDMABLK_VM_GUEST=1
top_srcdir=$RDMABLK_SRCDIR
top_builddir=$RDMABLK_BUILDDIR
export RDMABLK_VM_GUEST RDMABLK_SRCDIR RDMABLK_BUILDDIR top_srcdir top_builddir
export RDMABLK_VM_RESULTS="$RES"
. "$RDMABLK_SRCDIR/tests/vm/lib.sh"

# Processes in D state with their kernel stacks: what a hang is waiting for.
blocked_report() {
	for p in $(ps -eo pid=,stat= | awk '$2 ~ /^D/ { print $1 }'); do
		echo "# blocked: pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
		sed 's/^/#   /' "/proc/$p/stack" 2>/dev/null
	done
}

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
	case $rc in 124 | 137) blocked_report >>"$RES/$name.log" ;; esac
	pkill -KILL -g "$pid" 2>/dev/null
	end=$(cut -d. -f1 /proc/uptime)
	dmesg >"$RES/$name.dmesg" 2>/dev/null
	# A reset that cannot finish (a device held by an unkillable process) must not hang
	# the VM: the tests after it would fail on a half-torn setup anyway.
	rrc=0
	timeout -k 5 60 /bin/sh -c '. "$RDMABLK_SRCDIR/tests/vm/lib.sh" && vm_reset' \
		>>"$RES/$name.log" 2>&1 || rrc=$?
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
	if [ "$rrc" != 0 ]; then
		{
			echo "# vm_reset after the test failed (exit $rrc):"
			blocked_report
		} >>"$RES/$name.log" 2>&1
		echo "reset after $name failed (exit $rrc), see $name.log" >"$RES/tainted"
		echo "rdmablk-vm: reset after $name failed (exit $rrc); stopping this boot"
		exit 0
	fi
done
echo "$npass passed, $nfail failed, $nskip skipped" >"$RES/done"
echo "rdmablk-vm: guest: $npass passed, $nfail failed, $nskip skipped"
