#!/bin/bash
# With --ctrl-loss-tmo, a command the target does not answer within --timeout
# starts a reconnect (NVMe-oF error recovery) instead of failing with EIO.  The
# target is frozen, not killed, for longer than the command timeout: its
# connections stay open, so only the timeout can notice.  The writes waiting
# meanwhile complete after the thaw, none fails, and the data reads back.
. "$top_srcdir/tests/helpers.sh"
requires timeout

start_disk_target
start_initiator ini "$(target_url "$port")/disk0" --queues 2 --timeout 2000 \
	--ctrl-loss-tmo 30000 --reconnect-delay 500 --connect-timeout 1000
uri=$(nbd_uri ini disk0)
ops() { "$top_builddir/tests/nbd-ops" "$uri" "$@"; }
ops write:0:65536:aa write:1048576:4096:aa || fail "baseline writes failed"

kill -STOP "$(cat "$T/target.pid")"
# A target-pulled write and an in-capsule one.
ops write:0:65536:bb write:1048576:4096:cc >"$T/write.out" 2>&1 &
wpid=$!
wait_until 60 grep -q "not answered in time; reconnecting to send it again" "$T/ini.log" ||
	fail "the command timeout did not start a reconnect"
sleep 2
kill -0 $wpid 2>/dev/null || fail "the write ended while the target was frozen: $(cat "$T/write.out")"
grep -q "failing it with EIO" "$T/ini.log" && fail "a command was failed instead of sent again"
kill -CONT "$(cat "$T/target.pid")"
wait_until 60 grep -q "re-established" "$T/ini.log" ||
	fail "the initiator did not reconnect after the target thawed"
wait_child_ok $wpid 20 "the writes across the reconnect" "$T/write.out"
ops read:0:65536:bb read:1048576:4096:cc || fail "data after the reconnect is wrong"
pid_alive "$T/target.pid" || fail "target died"
stop_and_status "$T/ini.pid"
[ "$stop_rc" -eq 0 ] || fail "initiator exit status $stop_rc after SIGTERM"
echo "ok"
