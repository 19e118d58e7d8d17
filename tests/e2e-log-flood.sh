#!/bin/bash
# Issue 31, log floods: tests/attack-log-flood.py sends 200k capsules the
# target rejects on one connection, then has 2000 connections dropped or
# refused (before HELLO, bad HELLO, wrong protocol version, unknown
# session).  Each used to cost a log line (201k lines/s); now the target's
# log stays within the rate limiter's budget -- 50 lines and a summary per
# kind per 10 s window, whatever the machine's speed -- and says how many
# similar messages it suppressed.  The target keeps serving throughout.
. "$top_srcdir/tests/helpers.sh"
requires python3

CAPSULES=${CAPSULES:-200000}
DROPS=${DROPS:-2000}
start_disk_target
url=$(target_url "$port")
t0=$(date +%s)

timeout 600 python3 "$top_srcdir/tests/attack-log-flood.py" 127.0.0.1 "$port" \
	--capsules "$CAPSULES" --drops "$DROPS" --seconds 500 --src 127.0.0.2 >"$T/flood.out" 2>&1 ||
	{ cat "$T/flood.out"; fail "the target stopped answering the flood"; }
cat "$T/flood.out"
grep -q "^log-flood: $CAPSULES rejected capsules sent, $CAPSULES answered" "$T/flood.out" ||
	fail "not every rejected capsule was answered"
grep -q "connections dropped or refused" "$T/flood.out" || fail "no summary from the attack"
pid_alive "$T/target.pid" || fail "the target died"
timeout 60 "$INITIATOR_BIN" --list "$url" >"$T/list.out" 2>&1 ||
	{ cat "$T/list.out"; fail "--list after the flood failed"; }

# The first lines of each kind are there, as informative as ever ...
grep -q "cid [0-9]* rejected: INVALID_OPCODE" "$T/target.log" || fail "no rejected-capsule line"
grep -q "bad HELLO" "$T/target.log" || fail "no bad-HELLO line"
grep -q "protocol version 1 refused" "$T/target.log" || fail "no refused-version line"
grep -q "connection for queue 1 rejected" "$T/target.log" || fail "no rejected-connection line"
# ... and the rest is summed up once the 10 s window is over (the target's
# once-a-second timer prints it even though the flood stopped).
wait_until 60 grep -q "rejected capsules: [0-9]* similar messages suppressed" "$T/target.log" ||
	fail "no 'similar messages suppressed' summary of the rejected capsules"

# Per rate-limited kind the attack touches (at most 8), 50 lines and a
# summary per window, plus the handful of lines of its two sessions.
elapsed=$(($(date +%s) - t0))
windows=$((elapsed / 10 + 2))
ceiling=$((100 + 8 * 51 * windows))
lines=$(wc -l <"$T/target.log")
bytes=$(wc -c <"$T/target.log")
note "target log: $lines lines, $bytes bytes in ${elapsed}s (ceiling $ceiling lines, $((ceiling * 250)) bytes)"
[ "$lines" -le "$ceiling" ] || fail "target log has $lines lines, more than $ceiling"
[ "$bytes" -le $((ceiling * 250)) ] || fail "target log has $bytes bytes, more than $((ceiling * 250))"
