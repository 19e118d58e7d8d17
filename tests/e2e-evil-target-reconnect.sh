#!/bin/bash
# A hostile target against an initiator that reconnects (ctrl-loss-tmo):
# one that breaks every session at its first answer, and one that breaks
# the session and then never answers the reconnect's CONNECT.  The
# initiator reconnects no faster than reconnect-delay, fails a command
# that was re-issued for its timeout + ctrl-loss-tmo with EIO, stays up,
# and keeps its log bounded (tests/evil-target.py).
. "$top_srcdir/tests/helpers.sh"
. "$top_srcdir/tests/evil-helpers.sh"
requires python3

ini() { # NAME [args]
	local name=$1
	shift
	start_initiator "$name" "tcp://127.0.0.1:$eport/x" -q 1 -d 8 --timeout 1000 \
		--ctrl-loss-tmo 3000 --reconnect-delay 200 "$@"
}

# Unknown command ids after every reconnect: a tight reconnect loop before,
# with I/O that never ended.
evil_target unknown-cid
ini ucid
start=$(date +%s)
IO_TIMEOUT=45 evil_io ucid 2
[ "$(io_field eio)" = 2 ] || fail "unknown-cid: $io"
grep -q "commands unanswered for their timeout + ctrl-loss-tmo across reconnects" "$T/ucid.log" ||
	fail "unknown-cid: the give-up was not logged"
check_bounds ucid 200
stop_pidfile "$T/ucid.pid"
evil_stop unknown-cid
secs=$(($(date +%s) - start + 1))
conns=$(echo "$evil" | sed -n 's/.* connections=\([0-9]*\).*/\1/p')
# Two connections per session, one session per reconnect-delay at most.
[ "$conns" -le $((secs * 10 + 20)) ] || fail "unknown-cid: $conns connections in $secs s"

# The reconnect's CONNECT never answered: the initiator aborted before.
evil_target silent-reconnect
ini srec
evil_io srec 1
[ "$(io_field eio)" = 1 ] || fail "silent-reconnect: $io"
wait_until 60 grep -q "given up" "$T/srec.log" || fail "silent-reconnect: session not given up"
evil_io srec 2
[ "$(io_field eio)" = 2 ] || fail "silent-reconnect, after the give-up: $io"
check_bounds srec 100
stop_pidfile "$T/srec.pid"
evil_stop silent-reconnect

# Each answer followed by a flood of responses: answered, then reconnected.
evil_target resp-flood
ini rflood
evil_io rflood 10
[ "$(io_field ok)" = 10 ] || fail "resp-flood: $io"
check_bounds rflood 200
stop_pidfile "$T/rflood.pid"
evil_stop resp-flood
echo "ok"
