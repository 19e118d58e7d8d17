#!/bin/bash
# The initiator faces a hostile target (tests/evil-target.py, tcp): it fails
# every command, answers for unknown or already answered command ids, floods
# responses, RDMA WRITEs or READ requests, asks for data outside the buffer
# it was given, never answers I/O, keep-alive or CONNECT.  Each time the
# initiator stays up, its I/O ends (EIO) instead of hanging, and its memory
# and log stay bounded: lines a target can cause at will are rate-limited,
# with "N similar messages suppressed" summaries.  No reconnects here
# (ctrl-loss-tmo 0); e2e-evil-target-reconnect.sh has those.
. "$top_srcdir/tests/helpers.sh"
. "$top_srcdir/tests/evil-helpers.sh"
requires python3

ini() { # NAME MODE [args]: an initiator on the evil target of MODE
	local name=$1 mode=$2
	shift 2
	start_initiator "$name" "tcp://127.0.0.1:$eport/x" -q 1 -d 8 --timeout 1000 "$@"
}

# Every command failed: one warning per I/O was a log flood.
evil_target fail-io
ini fail fail-io
evil_io fail 400
[ "$(io_field eio)" = 400 ] || fail "fail-io: $io"
check_bounds fail 60
wait_until 30 grep -q "I/O failed by the target: [0-9]* similar messages suppressed" "$T/fail.log" ||
	fail "no summary of the suppressed lines"
stop_pidfile "$T/fail.pid"
evil_stop fail-io

# Answers that answer nothing outstanding: the queue is failed, I/O gets EIO.
for mode in unknown-cid duplicate resp-flood; do
	evil_target $mode
	ini $mode $mode
	evil_io $mode 20
	[ "$(io_field eio)" -ge 19 ] && [ "$(io_field other)" = 0 ] || fail "$mode: $io"
	check_bounds $mode 40
	grep -q "which is not outstanding\|with no receive posted" "$T/$mode.log" ||
		fail "$mode: the bogus answer was not named"
	stop_pidfile "$T/$mode.pid"
	evil_stop $mode
done

# READ requests outside the WRITE's buffer: refused, the queue dies.
evil_target bad-readreq
ini badrr bad-readreq
evil_io badrr 6
[ "$(io_field ok)" = 1 ] && [ "$(io_field eio)" = 5 ] || fail "bad-readreq: $io"
grep -q "refused READ rkey .*: out of region bounds" "$T/badrr.log" || fail "no refusal logged"
check_bounds badrr 40
stop_pidfile "$T/badrr.pid"
evil_stop bad-readreq

# Floods of READ requests (never reading our answers) and of RDMA WRITEs:
# memory stays bounded while the command times out.
for mode in readreq-flood write-flood; do
	evil_target $mode
	ini $mode $mode
	evil_io $mode 4
	[ "$(io_field eio)" -ge 3 ] || fail "$mode: $io"
	check_bounds $mode 40
	stop_pidfile "$T/$mode.pid"
	evil_stop $mode
	case $evil in
	*" writes=0 read_reqs=0") fail "$mode: no flood: $evil" ;;
	esac
done

# Never answers I/O: the requests time out, then find no slot: EIO.
evil_target silent-io
ini silent silent-io
evil_io silent 12
[ "$(io_field eio)" = 12 ] || fail "silent-io: $io"
check_bounds silent 40
stop_pidfile "$T/silent.pid"
evil_stop silent-io

# Never answers a keep-alive: the session is lost, later I/O gets EIO.
evil_target silent-ka
ini ka silent-ka --keepalive 1000
wait_until 60 grep -q "keep-alive failed" "$T/ka.log" || fail "no keep-alive failure"
evil_io ka 4
[ "$(io_field eio)" = 4 ] || fail "silent-ka: $io"
check_bounds ka 40
stop_pidfile "$T/ka.pid"
evil_stop silent-ka

# Never answers HELLO, or CONNECT: the initiator gives up with an error, in time.
for mode in silent-hello silent-connect; do
	evil_target $mode
	"$INITIATOR_BIN" "tcp://127.0.0.1:$eport/x" --timeout 1000 --connect-timeout 1000 \
		--nbd-socket "$T/$mode.sock" >"$T/$mode.log" 2>&1 &
	scpid=$!
	echo $scpid >"$T/$mode.pid"
	_pidfiles="$_pidfiles $T/$mode.pid"
	wait_until 60 sh -c "! kill -0 $scpid 2>/dev/null" || fail "$mode: still waiting"
	rc=0
	wait $scpid || rc=$?
	[ "$rc" -ne 0 ] || fail "$mode: exit status 0"
	evil_stop $mode
done
grep -q "connect: Connection timed out" "$T/silent-hello.log" || fail "silent HELLO: no error logged"
grep -q "CONNECT got no answer" "$T/silent-connect.log" || fail "silent CONNECT: no error logged"
echo "ok"
