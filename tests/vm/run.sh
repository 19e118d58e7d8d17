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
# Results: DIR/NAME.{log,rc,dmesg,host}, DIR/console.log, DIR/progress, DIR/done. Exit 0 when
# every test passed or skipped, 1 when one failed (or hung: NAME.host), 2 when some test was
# never run (out of boots or time), 77 when the VM cannot be had here (prepare.sh said why).
# Environment: RDMABLK_VM_CACHE (see prepare.sh), RDMABLK_VM_MEM (MiB, 2048),
# RDMABLK_VM_SMP (2); the watchdog's RDMABLK_VM_BOOT_TIMEOUT (180), RDMABLK_VM_RESET_MARGIN
# (120), RDMABLK_VM_RETRIES (2), RDMABLK_VM_DEADLINE (epoch seconds; none by default).

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

usage() { sed -n '4,21s/^# \{0,1\}//p' "$0"; exit "$1"; }

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
	rm -f "$RESULTS/$n.log" "$RESULTS/$n.rc" "$RESULTS/$n.dmesg" "$RESULTS/$n.host" "$RESULTS/$n".*.out
done
rm -f "$RESULTS/done" "$RESULTS/tainted" "$RESULTS/console.log" "$RESULTS/console.boot" \
	"$RESULTS/params" "$RESULTS/progress"

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

write_params() {
	cat >"$RESULTS/params" <<PARAMS
RDMABLK_SRCDIR='$SRCDIR'
RDMABLK_BUILDDIR='$BUILDDIR'
RDMABLK_VM_MODDIR='$RDMABLK_VM_MODDIR'
RDMABLK_VM_MODE='$MODE'
RDMABLK_VM_TESTS='$1'
RDMABLK_VM_TEST_TIMEOUT='$TEST_TIMEOUT'
PARAMS
}

if [ "$MODE" = shell ]; then
	write_params ""
	echo "run.sh: booting a shell (kernel $RDMABLK_VM_KVER); exit it to power off, ^A x kills qemu"
	exec "$@"
fi

# ---- the watchdog ------------------------------------------------------------------------
# The guest prints "=== NAME (timeout Ns)" before each test, "--- NAME: RESULT" after it and
# its reset, and "guest: ..." when done. The host follows the console and kills the VM when
# the guest stops making progress: not up within BOOT_TIMEOUT, a test not finished within its
# timeout plus RESET_MARGIN (the guest's own timeout fires first; missing it means the guest
# itself is stuck), no next step RESET_MARGIN after a test. The stuck test gets NAME.host
# saying so, and the tests after it run in a new boot (at most RETRIES more boots), so one
# hung test costs minutes and takes no other test with it. RDMABLK_VM_DEADLINE (epoch
# seconds, set by CI from its budget) caps everything.
BOOT_TIMEOUT=${RDMABLK_VM_BOOT_TIMEOUT:-180}
RESET_MARGIN=${RDMABLK_VM_RESET_MARGIN:-120}
RETRIES=${RDMABLK_VM_RETRIES:-2}
CONSOLE=$RESULTS/console.boot
t_begin=$(date +%s)
deadline=$((t_begin + ${RDMABLK_VM_BOOT_TIMEOUT:-180} + total_tmo))
if [ -n "${RDMABLK_VM_DEADLINE:-}" ] && [ "$RDMABLK_VM_DEADLINE" -lt "$deadline" ]; then
	deadline=$RDMABLK_VM_DEADLINE
fi

progress() {
	_l="run.sh: [+$(($(date +%s) - t_begin))s] $*"
	echo "$_l"
	echo "$_l" >>"$RESULTS/progress"
}

# The guest's step lines, without the serial console's carriage returns.
steps() {
	tr -d '\r' <"$CONSOLE" 2>/dev/null | grep -E '^rdmablk-vm: (===|---|up after|guest:|FATAL|reset)' || :
}

# boot_vm TESTS: one boot for TESTS. Sets qrc (qemu's exit status), stuck (the test the
# guest hung in, or empty) and why (the watchdog's reason, or empty).
boot_vm() {
	bt=$1
	shift
	write_params "$bt"
	rm -f "$RESULTS/done" "$RESULTS/tainted"
	left_s=$((deadline - $(date +%s)))
	[ "$left_s" -gt 30 ] || left_s=30
	timeout -k 10 "$left_s" "$@" </dev/null >"$CONSOLE" 2>&1 &
	qpid=$!
	why=
	stuck=
	seen=
	seen_at=$(date +%s)
	limit=$BOOT_TIMEOUT
	shown=0
	while kill -0 "$qpid" 2>/dev/null; do
		sleep 2
		now=$(date +%s)
		all=$(steps)
		n=$(printf '%s\n' "$all" | grep -c '^rdmablk-vm: ---' || :)
		if [ "$n" -gt "$shown" ]; then
			printf '%s\n' "$all" | grep '^rdmablk-vm: ---' | sed -n "$((shown + 1)),\$p" |
				while read -r _ _ l; do progress "$l"; done
			shown=$n
		fi
		last=$(printf '%s\n' "$all" | tail -n 1)
		if [ "$last" != "$seen" ]; then
			seen=$last
			seen_at=$now
			case "$last" in
			*" === "*)
				stuck=$(echo "$last" | sed 's/^rdmablk-vm: === \([^ ]*\) .*/\1/')
				tmo=$(echo "$last" | sed -n 's/.*(timeout \([0-9]*\)s).*/\1/p')
				limit=$((${tmo:-$TEST_TIMEOUT} + RESET_MARGIN))
				;;
			*" up after "* | *" --- "*) stuck= limit=$RESET_MARGIN ;;
			*) stuck= limit=60 ;;
			esac
		fi
		if [ $((now - seen_at)) -gt "$limit" ]; then
			if [ -n "$stuck" ]; then
				why="the guest hung in $stuck: no result $((now - seen_at))s after it started (its timeout ${tmo}s + ${RESET_MARGIN}s)"
			elif [ -z "$seen" ]; then
				why="the guest did not come up within ${BOOT_TIMEOUT}s"
			else
				why="the guest made no progress for $((now - seen_at))s after: ${seen#rdmablk-vm: }"
			fi
			progress "watchdog: $why; killing the VM"
			kill "$qpid" 2>/dev/null
			break
		fi
	done
	qrc=0
	wait "$qpid" || qrc=$?
	# A test cut off by the VM's end (watchdog, crash, deadline) is stuck there too.
	if [ -z "$stuck" ]; then
		last=$(steps | tail -n 1)
		case "$last" in
		*" === "*) stuck=$(echo "$last" | sed 's/^rdmablk-vm: === \([^ ]*\) .*/\1/') ;;
		esac
	fi
	[ -z "$stuck" ] || [ ! -e "$RESULTS/$stuck.rc" ] || stuck=
	{
		echo "==== boot $boots: $(echo "$bt" | wc -w) tests, qemu exit $qrc${why:+; $why}"
		# Drop the firmware's terminal control sequences so the log reads as text.
		sed 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc//g' "$CONSOLE"
	} >>"$RESULTS/console.log"
}

# Tests still without a result (in order).
tests_left() {
	for t in $tests; do
		n=$(basename "$t" .sh)
		[ -e "$RESULTS/$n.rc" ] || [ -e "$RESULTS/$n.host" ] || printf ' %s' "$t"
	done
}

echo "run.sh: booting kernel $RDMABLK_VM_KVER for$(for t in $tests; do printf ' %s' "$(basename "$t")"; done) (deadline in $((deadline - t_begin))s)"
boots=0
left=$tests
while :; do
	boots=$((boots + 1))
	boot_vm "$left" "$@"
	[ -e "$RESULTS/done" ] && break
	if [ -n "$stuck" ]; then
		{
			echo "${why:-the VM ended during $stuck (qemu exit $qrc), before it had a result}"
			echo "console of that boot, last lines:"
			tail -n 40 "$CONSOLE" | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/^/  | /'
		} >"$RESULTS/$stuck.host"
		progress "$stuck: FAIL (no result: $(head -n 1 "$RESULTS/$stuck.host"))"
	elif [ -e "$RESULTS/tainted" ]; then
		progress "guest stopped early: $(cat "$RESULTS/tainted")"
	else
		progress "VM ended (qemu exit $qrc) before any test result of this boot; console tail:"
		tail -n 40 "$CONSOLE" | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/^/  | /'
	fi
	left=$(tests_left)
	[ -n "$left" ] || break
	if [ "$boots" -gt "$RETRIES" ]; then
		progress "no boots left (RDMABLK_VM_RETRIES=$RETRIES) for:$(for t in $left; do printf ' %s' "$(basename "$t" .sh)"; done)"
		break
	fi
	if [ $((deadline - $(date +%s))) -lt 60 ]; then
		progress "deadline reached; not run:$(for t in $left; do printf ' %s' "$(basename "$t" .sh)"; done)"
		break
	fi
	progress "booting again for the $(echo "$left" | wc -w) tests left"
done
rm -f "$CONSOLE"
[ "$VERBOSE" = 1 ] && cat "$RESULTS/console.log"

status=0
[ -e "$RESULTS/done" ] && progress "VM finished: $(cat "$RESULTS/done") (last boot of $boots)"
for t in $tests; do
	n=$(basename "$t" .sh)
	if [ -e "$RESULTS/$n.host" ]; then
		# With the console tail of that boot: a CI log that shows only this
		# output still says why the guest hung or died.
		echo "run.sh: $n: FAIL: $(head -n 1 "$RESULTS/$n.host")"
		sed 1d "$RESULTS/$n.host"
		[ $status = 2 ] || status=1
		continue
	fi
	if [ ! -e "$RESULTS/$n.rc" ]; then
		echo "run.sh: $n: NO RESULT"
		status=2
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
