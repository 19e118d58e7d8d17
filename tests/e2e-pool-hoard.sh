#!/bin/bash
# Pool hoarding (issue 31): two attacking sessions fill their I/O queues with
# commands that hold the reactor's data buffers, one with keyed WRITEs whose
# data it never lets the target fetch, one with READs whose data it never
# reads off its socket, and both renew their queues whenever the target drops
# them.  transfer-timeout is long (60 s): only the fair shares and the
# pressure-timeout (default) keep the pool moving.  Meanwhile legitimate
# hosts connect (a fresh CONNECT must not be closed by the identify timer
# while it waits for a buffer), list exports and do verified I/O: all of it
# completes, the attackers' queues are the ones dropped (a log line names
# their peers), and the target stays up.
. "$top_srcdir/tests/helpers.sh"
requires python3 timeout

[ "$E2E_TRANSPORT" = tcp ] || skip "raw tcp framing: tcp transport only"
port=$(free_port)
truncate -s 16M "$T/disk.img"
TARGET_THREADS=1 TARGET_EXTRA=$'buffers = 32\nincapsule = 0\ntransfer-timeout = 60000' \
	write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"
url="$(target_url "$port")"

attack() { # NAME MODE
	PYTHONPATH="$top_srcdir/tests" python3 "$top_srcdir/tests/attack-pool-hoard.py" \
		127.0.0.1 "$port" disk0 --mode "$2" --queues 2 --depth 128 --length 65536 \
		--seconds 300 --hostid "$1" >"$T/$1.log" 2>&1 &
	echo $! >"$T/$1.pid"
	_pidfiles="$_pidfiles $T/$1.pid"
}
attack hoard-w write
wait_until 60 grep -q "^filled" "$T/hoard-w.log" ||
	fail "write attacker did not fill its queues: $(cat "$T/hoard-w.log")"
# The second attacker's CONNECT is the first that must get through (before
# the fix, the identify timer closed it); its queues are checked below.
attack hoard-r read

# A fresh CONNECT while the attackers hold the pool.  Generous ceilings:
# with the fix each step waits at most a pressure-timeout or two.
start_initiator ini "$url/disk0" --queues 1 --timeout 60000
for i in 1 2 3; do
	off=$((i * 1048576 + 4 * 1048576))
	timeout 90 "$top_builddir/tests/nbd-ops" "$(nbd_uri ini disk0)" \
		"write:$off:65536:$((30 + i))" "read:$off:65536:$((30 + i))" \
		"write:$((off + 65536)):4096:$((40 + i))" "read:$((off + 65536)):4096:$((40 + i))" ||
		fail "legitimate verified I/O round $i failed"
	timeout 90 "$INITIATOR_BIN" --list "$url" >"$T/list$i.log" 2>&1 ||
		fail "--list during the attack failed: $(cat "$T/list$i.log")"
	grep -q disk0 "$T/list$i.log" || fail "--list did not show disk0: $(cat "$T/list$i.log")"
done
# A second host attaches and verifies what the first wrote.
start_initiator ini2 "$url/disk0" --queues 1 --timeout 60000
timeout 90 "$top_builddir/tests/nbd-ops" "$(nbd_uri ini2 disk0)" "read:$((5 * 1048576)):65536:31" \
	"read:$((7 * 1048576 + 65536)):4096:43" || fail "second host's verified read failed"

pid_alive "$T/target.pid" || fail "the target died"
for a in hoard-w hoard-r; do
	pid_alive "$T/$a.pid" || fail "attacker $a ended early: $(cat "$T/$a.log")"
done
# The attackers' queues were dropped, each named with its peer, and none else.
ports=$(sed -n 's/^io queue [0-9]* port \([0-9]*\)$/\1/p' "$T"/hoard-w.log "$T"/hoard-r.log)
grep "did not complete the .* within pressure-timeout" "$T/target.log" >"$T/drops" ||
	fail "no queue was dropped for holding buffers under pressure"
while read -r line; do
	p=$(sed -n 's/.*(peer [^ ]*:\([0-9]*\), qp.*/\1/p' <<<"$line")
	grep -qx "$p" <<<"$ports" || fail "a legitimate queue was dropped: $line"
done <"$T/drops"
for a in hoard-w hoard-r; do
	mine=$(sed -n 's/^io queue [0-9]* port \([0-9]*\)$/\1/p' "$T/$a.log")
	hit=0
	for p in $mine; do grep -q "peer [^ ]*:$p, qp" "$T/drops" && hit=1; done
	[ $hit = 1 ] || fail "no queue of attacker $a was dropped"
done
grep -q "keep-alive timeout" "$T/target.log" && fail "a connection was closed by the identify timer"
grep -q "session .* lost\|reconnect" "$T/ini.log" "$T/ini2.log" &&
	fail "a legitimate initiator lost its session"
stop_pidfile "$T/hoard-w.pid"
stop_pidfile "$T/hoard-r.pid"
note "$(grep -h '^attack-pool-hoard' "$T/hoard-w.log" "$T/hoard-r.log")"
note "$(wc -l <"$T/drops") attacker queues dropped"
echo "ok"
