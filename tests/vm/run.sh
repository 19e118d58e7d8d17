#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Boot the test VM once and run guest tests in it, or give a shell in it.
#
#   tests/vm/run.sh [options] [TEST...]
#     TEST        t-NAME.sh, NAME, or a path to a guest script (default: tests/vm/t-*.sh)
#     --shell     interactive shell in the VM instead of tests (power off: exit the shell)
#     --results DIR   where results come back (default BUILDDIR/tests/vm/results)
#     --builddir DIR  build tree the guest tests use (default $top_builddir or .)
#     --timeout N     per-test timeout in seconds (default 300; "# vm-timeout: N" overrides)
#     --no-prepare    the caller ran prepare.sh already
#     -v          print the guest console when done
#
# Results: DIR/NAME.{log,rc,dmesg}, DIR/console.log, DIR/done. Exit 0 when every test passed
# or skipped, 1 when one failed or has no result, 2 when the VM did not finish, 77 when the VM
# cannot be had here (prepare.sh said why).
# Environment: RDMABLK_VM_CACHE (see prepare.sh), RDMABLK_VM_MEM (MiB, 2048),
# RDMABLK_VM_SMP (2), RDMABLK_VM_BOOT_TIMEOUT (seconds allowed on top of the tests, 180).

set -eu

VMDIR=$(cd "$(dirname "$0")" && pwd)
SRCDIR=$(cd "$VMDIR/../.." && pwd)
BUILDDIR=${top_builddir:-.}
RESULTS=
MODE=run
VERBOSE=0
PREPARE=1
TEST_TIMEOUT=300
CACHE=${RDMABLK_VM_CACHE:-/var/cache/rdmablk-vm}
export RDMABLK_VM_CACHE="$CACHE"

usage() { sed -n '4,20s/^# \{0,1\}//p' "$0"; exit "$1"; }

while [ $# -gt 0 ]; do
	case "$1" in
	--shell) MODE=shell ;;
	--results) RESULTS=$2; shift ;;
	--builddir) BUILDDIR=$2; shift ;;
	--timeout) TEST_TIMEOUT=$2; shift ;;
	--no-prepare) PREPARE=0 ;;
	-v) VERBOSE=1 ;;
	-h | --help) usage 0 ;;
	--) shift; break ;;
	-*) echo "run.sh: unknown option $1" >&2; usage 2 >&2 ;;
	*) break ;;
	esac
	shift
done

BUILDDIR=$(cd "$BUILDDIR" && pwd)
RESULTS=${RESULTS:-$BUILDDIR/tests/vm/results}
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)

# Resolve the tests to absolute paths the guest can open (the host / is its lower layer).
tests=
total_tmo=0
[ $# -gt 0 ] || set -- "$VMDIR"/t-*.sh
for t in "$@"; do
	case "$t" in
	*/*) p=$t ;;
	t-*.sh) p=$VMDIR/$t ;;
	t-*) p=$VMDIR/$t.sh ;;
	*) p=$VMDIR/t-$t.sh ;;
	esac
	[ -f "$p" ] || { echo "run.sh: no such guest test: $t" >&2; exit 1; }
	p=$(cd "$(dirname "$p")" && pwd)/$(basename "$p")
	tests="$tests $p"
	tmo=$(sed -n 's/^# vm-timeout: *\([0-9][0-9]*\).*/\1/p' "$p" | head -n 1)
	total_tmo=$((total_tmo + ${tmo:-$TEST_TIMEOUT} + 15))
done

if [ $PREPARE = 1 ]; then
	rc=0
	sh "$VMDIR/prepare.sh" || rc=$?
	[ $rc = 0 ] || exit $rc
fi
[ -r "$CACHE/current.env" ] || { echo "run.sh: $CACHE/current.env missing: run prepare.sh" >&2; exit 1; }
. "$CACHE/current.env"

# Only our own files: the results dir may be one the user chose.
for t in $tests; do
	n=$(basename "$t" .sh)
	rm -f "$RESULTS/$n.log" "$RESULTS/$n.rc" "$RESULTS/$n.dmesg"
done
rm -f "$RESULTS/done" "$RESULTS/console.log" "$RESULTS/params"
cat >"$RESULTS/params" <<EOF
RDMABLK_SRCDIR='$SRCDIR'
RDMABLK_BUILDDIR='$BUILDDIR'
RDMABLK_VM_MODDIR='$RDMABLK_VM_MODDIR'
RDMABLK_VM_MODE='$MODE'
RDMABLK_VM_TESTS='$tests'
RDMABLK_VM_TEST_TIMEOUT='$TEST_TIMEOUT'
EOF

# tsc=reliable: under TCG the guest's clocksource watchdog may call the TSC unstable
# mid-run; the kernel then live-patches sched_clock's static key, and that int3-based
# patching once crashed a CI guest (Oops: int3 in sched_clock_cpu).  TCG's TSC follows
# the host clock on every vCPU, so it is reliable.
set -- qemu-system-x86_64 -machine q35,accel=tcg -cpu max \
	-smp "${RDMABLK_VM_SMP:-2}" -m "${RDMABLK_VM_MEM:-2048}" \
	-nographic -no-reboot -nic none \
	-kernel "$RDMABLK_VM_KERNEL" -initrd "$RDMABLK_VM_INITRD" \
	-append "console=ttyS0 quiet panic=-1 tsc=reliable rdmablk.init=$VMDIR/guest-init.sh" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs local,path="$RESULTS",mount_tag=results,security_model=none

if [ "$MODE" = shell ]; then
	echo "run.sh: booting a shell (kernel $RDMABLK_VM_KVER); exit it to power off, ^A x kills qemu"
	exec "$@"
fi

# Never let a hung guest hang the caller: boot margin plus every test's own timeout.
global_tmo=$((${RDMABLK_VM_BOOT_TIMEOUT:-180} + total_tmo))
echo "run.sh: booting kernel $RDMABLK_VM_KVER for$(for t in $tests; do printf ' %s' "$(basename "$t")"; done) (limit ${global_tmo}s)"
start=$(date +%s)
boot() {
	qrc=0
	timeout -k 10 "$global_tmo" "$@" </dev/null >"$RESULTS/console.log" 2>&1 || qrc=$?
}
boot "$@"
# The emulated (TCG) kernel now and then oopses while it boots, before our
# init runs (seen: int3 in sched_clock_cpu during an initcall).  No test ran
# then, so one more boot loses nothing; a crash after init is a result.
if [ ! -e "$RESULTS/done" ] && ! grep -q 'rdmablk-vm: up after' "$RESULTS/console.log" &&
	grep -q 'Kernel panic' "$RESULTS/console.log"; then
	echo "run.sh: guest kernel crashed while booting, before any test ran; booting again:"
	grep -m 3 -E 'Oops|RIP:|Kernel panic' "$RESULTS/console.log" | sed 's/^/  | /'
	boot "$@"
fi
elapsed=$(($(date +%s) - start))
# Drop the firmware's terminal control sequences so the log reads as text.
sed -i 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc//g' "$RESULTS/console.log"
[ "$VERBOSE" = 1 ] && cat "$RESULTS/console.log"

status=0
if [ -e "$RESULTS/done" ]; then
	echo "run.sh: VM finished in ${elapsed}s: $(cat "$RESULTS/done")"
else
	if [ $qrc = 124 ] || [ $qrc = 137 ]; then
		echo "run.sh: VM killed after ${global_tmo}s (hung?); console tail:"
	else
		echo "run.sh: VM stopped after ${elapsed}s (qemu exit $qrc) before finishing; console tail:"
	fi
	tail -n 40 "$RESULTS/console.log" | sed 's/^/  | /'
	status=2
fi
for t in $tests; do
	n=$(basename "$t" .sh)
	if [ ! -e "$RESULTS/$n.rc" ]; then
		echo "run.sh: $n: NO RESULT"
		[ $status = 2 ] || status=1
		continue
	fi
	r=$(cat "$RESULTS/$n.rc")
	case $r in
	0) echo "run.sh: $n: PASS" ;;
	77) echo "run.sh: $n: SKIP: $(sed -n 's/^SKIP: *//p' "$RESULTS/$n.log" | head -n 1)" ;;
	*)
		echo "run.sh: $n: FAIL (exit $r); log $RESULTS/$n.log"
		[ $status = 2 ] || status=1
		;;
	esac
done
exit $status
