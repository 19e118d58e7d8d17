#!/bin/bash
# Memory bounded by the configuration (issue 31): a peer fills the target
# with sessions of 8 I/O queues at depth 128 up to max-connections.  The
# target's RSS stays within the bound it logs at start (registered buffers
# + max-connections x the cost of a connection), the connection past the
# limit is refused with its reason, and once the peer has gone the RSS
# comes back near where it was (on 52674ed most of it stayed: the queues'
# memory was left in the reactors' malloc arenas).
. "$top_srcdir/tests/helpers.sh"
requires python3

[ "$E2E_TRANSPORT" = tcp ] || skip "raw tcp framing: tcp transport only"
port=$(free_port)
truncate -s 16M "$T/disk.img"
# A small pool, so the connections' share dominates; 2 reactors.
TARGET_EXTRA="buffers = 16
max-io-queues = 8
max-queue-depth = 128
max-connections = 200
max-connections-per-address = 200
max-sessions = 64
max-sessions-per-host = 64" write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"
pid=$(cat "$T/target.pid")
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"; }

bound=$(sed -n 's/.*memory bound: .* = \([0-9]*\) KiB.*/\1/p' "$T/target.log")
[ -n "$bound" ] || fail "the target did not log its memory bound"
base=$(rss)
note "baseline RSS $base KiB, bound $bound KiB beyond it"

timeout 300 python3 "$top_srcdir/tests/attack-limits.py" 127.0.0.1 "$port" --mode fill \
	--count 64 --nq 8 --depth 128 --kato 120000 --seconds 600 >"$T/fill.out" 2>&1 &
fill_pid=$!
_pidfiles="$_pidfiles $T/fill.pid"
echo "$fill_pid" >"$T/fill.pid"
wait_until 240 grep -q '^holding' "$T/fill.out" || fail "the fill attack did not finish: $(cat "$T/fill.out")"
grep -q '^holding 200 queues' "$T/fill.out" || fail "want 200 queues held: $(cat "$T/fill.out")"
held=$(rss)
note "held 200 connections: RSS $held KiB (+$((held - base)))"
[ "$held" -le $((base + bound)) ] || fail "RSS $held KiB beyond baseline $base + bound $bound KiB"
# The peer's 201st connection was refused at the limit, with its reason.
stop_pidfile "$T/fill.pid"
grep -q 'max-connections = 200' "$T/target.log" || fail "the refusal at the limit was not logged"

# Gone: the target frees the queues as it sees the connections close.
grow=$((held - base))
wait_until 60 sh -c "[ \$(awk '/^VmRSS:/ { print \$2 }' /proc/$pid/status) -le \
	$((base + grow / 4 + 2048)) ]" ||
	fail "RSS $(rss) KiB after the connections closed: baseline $base, held $held"
note "after: RSS $(rss) KiB"
echo ok
