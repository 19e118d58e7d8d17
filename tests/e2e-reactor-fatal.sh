#!/bin/bash
# A reactor whose epoll_wait fails with anything but EINTR (a bug: its epoll
# fd is gone) cannot go on, and leaving its loop would hang every queue and
# client it serves while the process looks alive.  The daemon must say why
# and abort instead, so that systemd restarts it and initiators reconnect.
# The epoll shim fails one reactor's epoll_wait once a file appears.
. "$top_srcdir/tests/helpers.sh"

# expect_abort NAME: the daemon whose launch pid is in $T/NAME.pid.launch (or
# $T/NAME.pid) must die of SIGABRT within 10 s, naming the failed call.
expect_abort() {
	local name=$1 pid rc=0
	pid=$(cat "$T/$name.pid.launch" 2>/dev/null || cat "$T/$name.pid")
	timeout 10 tail --pid="$pid" -f /dev/null ||
		fail "$name still running 10 s after its reactor's epoll_wait failed"
	wait "$pid" || rc=$?
	[ "$rc" -eq 134 ] || fail "$name exited $rc, not by SIGABRT (134)"
	grep -q "fatal: reactor [0-9]*: epoll_wait: Bad file descriptor; aborting" "$T/$name.log" ||
		fail "$name did not log why it aborted"
	rm -f "$T/$name.pid"
}

port=$(free_port)
truncate -s 16M "$T/disk.img"
write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
EPOLL_FAIL_FILE=$T/fail-target TARGET_PRELOAD=epoll-delay.so start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/disk0" --queues 1 --timeout 3000
"$top_builddir/tests/nbd-ops" "$(nbd_uri ini disk0)" "write:0:4096:7" "read:0:4096:7" ||
	fail "I/O failed before the shim did anything"
touch "$T/fail-target"
expect_abort target
note "target aborted"
stop_pidfile "$T/ini.pid"

port=$(free_port)
write_target_conf "$T/target2.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target2.conf" target2
EPOLL_FAIL_FILE=$T/fail-ini INITIATOR_PRELOAD=epoll-delay.so \
	start_initiator ini2 "$(target_url "$port")/disk0" --queues 1
"$top_builddir/tests/nbd-ops" "$(nbd_uri ini2 disk0)" "read:0:4096:7" ||
	fail "I/O failed before the shim did anything"
touch "$T/fail-ini"
expect_abort ini2
note "initiator aborted"
echo "ok"
