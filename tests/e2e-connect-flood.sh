#!/bin/bash
# Issue 31, connect floods: while tests/attack-connect-flood.py keeps
# hundreds of raw connections open from 8 source addresses (silent ones,
# ones that send part of a valid HELLO, ones that send garbage) and opens a
# new one whenever the target closes one, a legitimate host on 127.0.0.1
# does LISTS --list handshakes and an attach with verified I/O.  Every
# legitimate handshake must succeed (before: a flood evicted some), the
# target stays up and its log stays bounded.
. "$top_srcdir/tests/helpers.sh"
requires python3 nbdinfo

LISTS=${LISTS:-100}
start_disk_target
url=$(target_url "$port")
t0=$(date +%s)

python3 "$top_srcdir/tests/attack-connect-flood.py" 127.0.0.1 "$port" --seconds 900 \
	--sockets 150 --sources 127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7,127.0.0.8,127.0.0.9 \
	>"$T/flood.out" 2>&1 &
echo $! >"$T/flood.pid"
_pidfiles="$_pidfiles $T/flood.pid"
# The flood is on once the target drops its connections.
wait_until 60 grep -q "too many connections without HELLO" "$T/target.log" ||
	fail "the flood did not reach the target's half-open limit"

ok=0
for i in $(seq 1 "$LISTS"); do
	timeout 60 "$INITIATOR_BIN" --list "$url" >"$T/list.out" 2>&1 ||
		{ cat "$T/list.out"; fail "legitimate handshake $i of $LISTS failed ($ok succeeded)"; }
	grep -q disk0 "$T/list.out" || { cat "$T/list.out"; fail "--list $i: no disk0"; }
	ok=$((ok + 1))
done
note "$ok of $LISTS legitimate --list handshakes succeeded under the flood"

# An attach (admin + I/O queue handshakes) with verified I/O, still under the flood.
start_initiator ini "$url/disk0" --queues 2
uri=$(nbd_uri ini disk0)
"$top_builddir/tests/nbd-ops" "$uri" write:0:65536:a5 read:0:65536:a5 \
	write:1048576:4096:5a read:1048576:4096:5a || fail "I/O under the flood failed"
stop_pidfile "$T/ini.pid"

pid_alive "$T/flood.pid" || { cat "$T/flood.out"; fail "the flood ended early"; }
stop_pidfile "$T/flood.pid"
cat "$T/flood.out"
grep -q "^connect-flood:" "$T/flood.out" || fail "the attack printed no summary"
pid_alive "$T/target.pid" || fail "the target died"
timeout 60 "$INITIATOR_BIN" --list "$url" >"$T/list.out" 2>&1 ||
	{ cat "$T/list.out"; fail "--list after the flood failed"; }

# Bounded log: the legitimate sessions' lines (at most 5 each) plus, per
# rate-limited kind (5 here), 50 lines and a summary per 10 s window.
elapsed=$(($(date +%s) - t0))
windows=$((elapsed / 10 + 2))
ceiling=$((100 + 5 * (LISTS + 6) + 5 * 51 * windows))
lines=$(wc -l <"$T/target.log")
note "target log: $lines lines in ${elapsed}s (ceiling $ceiling)"
[ "$lines" -le "$ceiling" ] || fail "target log has $lines lines, more than $ceiling"
