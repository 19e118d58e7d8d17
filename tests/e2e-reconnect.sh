#!/bin/bash
# Reconnect (--ctrl-loss-tmo): the target is killed under a verifying fio job and
# started again on the same port.  The initiator reconnects, re-issues what was
# unanswered, and fio finishes with every block verified and no error.  Then the
# target is killed for good: I/O waits out --ctrl-loss-tmo, then fails with EIO.
# SIGTERM during reconnect attempts stops them and exits cleanly.
. "$top_srcdir/tests/helpers.sh"
requires fio timeout

port=$(free_port)
truncate -s 128M "$T/disk.img"
write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/disk0" --queues 2 --timeout 20000 \
	--ctrl-loss-tmo 15000 --reconnect-delay 500
uri=$(nbd_uri ini disk0)

# Writes with checksums, then reads them back, across two target restarts: small
# writes (in-capsule) in one half, large ones (target-pulled) in the other; --rate
# keeps the writes going for about 12 s.
timeout 120 fio --ioengine=nbd --uri="$uri" --rw=randwrite --iodepth=16 --rate=4m \
	--verify=crc32c --verify_fatal=1 --do_verify=1 --output="$T/fio.log" \
	--name=small --bs=4k --offset=0 --size=48M \
	--name=large --bs=64k --offset=64M --size=48M &
fio_pid=$!
for round in 1 2; do
	sleep 2
	kill -0 $fio_pid 2>/dev/null || fail "fio ended before restart $round: $(cat "$T/fio.log")"
	# Frozen first, so commands pile up unanswered: they must be re-issued.
	kill -STOP "$(cat "$T/target.pid")"
	sleep 1
	kill -KILL "$(cat "$T/target.pid")"
	wait "$(cat "$T/target.pid")" 2>/dev/null || true
	rm -f "$T/target.pid"
	sleep 1
	start_target "$T/target.conf" target
	wait_until 60 sh -c "[ \$(grep -c re-established '$T/ini.log') -ge $round ]" ||
		fail "round $round: the initiator did not reconnect"
done
rc=0
wait $fio_pid || rc=$?
[ "$rc" -eq 0 ] || fail "fio failed across the target restarts (rc $rc): $(tail -20 "$T/fio.log")"
[ "$(grep -c "err= 0" "$T/fio.log")" = 2 ] || fail "fio reported errors: $(cat "$T/fio.log")"
n=$(grep -c "re-established" "$T/ini.log")
[ "$n" -ge 2 ] || fail "expected two reconnects, saw $n"
reissued=$(sed -n 's/.*; \([0-9]*\) commands re-issued.*/\1/p' "$T/ini.log" | paste -sd+ | bc)
note "commands re-issued over both reconnects: $reissued"
[ "${reissued:-0}" -gt 0 ] || fail "no command was re-issued: the test did not exercise it"

# Lost for good: a read waits for the reconnect window, then fails.
kill -KILL "$(cat "$T/target.pid")"
start=$(date +%s)
rc=0
timeout 60 "$top_builddir/tests/nbd-ops" "$uri" fail:EIO:read:0:4096 || rc=$?
took=$(($(date +%s) - start))
[ "$rc" -eq 0 ] || fail "after giving up, a read did not fail with EIO (rc $rc)"
[ "$took" -ge 10 ] || fail "the read failed after ${took}s, before the 15 s window ran out"
grep -q "given up" "$T/ini.log" || fail "the initiator did not log giving up"
pid_alive "$T/ini.pid" || fail "the initiator died"
stop_and_status "$T/ini.pid"
[ "$stop_rc" -eq 0 ] || fail "initiator exit status $stop_rc after SIGTERM"

# SIGTERM while reconnecting ends the attempts at once: a clean exit, not a wait.
start_target "$T/target.conf" target
start_initiator ini2 "$(target_url "$port")/disk0" --ctrl-loss-tmo 600000 --reconnect-delay 1000
kill -KILL "$(cat "$T/target.pid")"
wait_until 60 grep -q "reconnect attempt 1 failed" "$T/ini2.log" ||
	fail "ini2 did not start reconnecting"
start=$(date +%s)
stop_and_status "$T/ini2.pid"
[ "$stop_rc" -eq 0 ] || fail "SIGTERM during a reconnect: exit status $stop_rc"
[ $(($(date +%s) - start)) -le 10 ] || fail "SIGTERM during a reconnect took over 10 s"
grep -q "given up (shutting down)" "$T/ini2.log" || fail "ini2 did not log the give-up on shutdown"
echo "ok: two restarts survived with verified data; gave up after ${took}s; SIGTERM while reconnecting"
