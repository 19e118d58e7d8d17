#!/bin/bash
# DISCONNECT is answered before the target closes the admin queue (issue 27:
# "DISCONNECT: no answer" on a clean detach).
# Over tcp, a raw host sends KEEPALIVE, reads the answer without
# acknowledging it, then sends DISCONNECT and, in the same segment, the ack
# of the KEEPALIVE answer: the target sees the DISCONNECT and the KEEPALIVE
# answer's SEND completion in one round.  The queue may close only once the
# DISCONNECT's own answer is delivered, not at the first SEND completion
# after the DISCONNECT.
# On every transport: --list and attach/detach, a bounded number of times,
# never log a warning, and --list prints only the list on stdout; a frozen
# target's silence ends the detach after the initiator's bound.
. "$top_srcdir/tests/helpers.sh"
requires python3

start_disk_target

# The raw host speaks the tcp framing: tcp only.
raw_sessions=
[ "$E2E_TRANSPORT" = tcp ] && raw_sessions="discovery disk0" ||
	note "raw tcp host part: tcp transport only"
for sess in $raw_sessions; do
	PYTHONPATH="$top_srcdir/tests" timeout 60 python3 - "$port" "$sess" \
		>"$T/raw-$sess.log" 2>&1 <<'PY' || fail "raw host ($sess session): $(cat "$T/raw-$sess.log")"
import socket, struct, sys
from tcphost import *
a = Host(int(sys.argv[1]), timeout=60)
export = "" if sys.argv[2] == "discovery" else sys.argv[2]
st, sid, rsp = a.connect("raw-host", export, kato_ms=0)
assert st == 0, "CONNECT status %d" % st
a.ack()
a.send(capsule(OP_KEEPALIVE, 1, 0, sgl=SGL_NONE))
cid, st, _ = a.response()
assert cid == 1, "answer for cid %d, want KEEPALIVE's 1" % cid
# DISCONNECT acking everything but the KEEPALIVE answer, then that ack.
disc = capsule(OP_DISCONNECT, 2, 0, sgl=SGL_NONE)
a.s.sendall(HDR.pack(SEND, 0, 0, len(disc), a.rx - 1, 0, a.tag, 0) + disc +
            HDR.pack(ACK, 0, 0, 0, a.rx, 0, 0, 0))
a.tag += 1
try:
    cid, st, _ = a.response()
except EOFError:
    sys.exit("DISCONNECT: the target closed the queue without answering")
assert (cid, st) == (2, 0), "DISCONNECT answered cid %d status %d" % (cid, st)
a.ack()
try:
    while a.s.recv(4096):
        pass
except ConnectionResetError:
    pass
except socket.timeout:
    sys.exit("the target kept the queue open after answering DISCONNECT")
print("ok")
PY
done
grep -q "closing: host sent DISCONNECT" "$T/target.log" || [ -z "$raw_sessions" ] ||
	fail "the target did not log the DISCONNECT"

# The initiator over the same target, a bounded number of times: no
# DISCONNECT may go unanswered and no detach may warn; --list prints the
# list alone on stdout (a header and one line per export), logs go to stderr.
for i in $(seq 1 20); do
	"$INITIATOR_BIN" --list "$(target_url "$port")" >"$T/list.out" 2>"$T/list.err" ||
		fail "--list #$i failed: $(cat "$T/list.err")"
	[ -s "$T/list.err" ] && fail "--list #$i logged: $(cat "$T/list.err")"
	head -n 1 "$T/list.out" | grep -q "^NAME " &&
		[ "$(awk 'NR > 1 { print $1 }' "$T/list.out")" = disk0 ] ||
		fail "--list #$i printed: $(cat "$T/list.out")"

	# A fresh name each time: start_initiator must not find the last one's log.
	start_initiator "ini$i" "$(target_url "$port")/disk0" --queues 1
	stop_and_status "$T/ini$i.pid"
	[ "$stop_rc" -eq 0 ] || fail "detach #$i: exit status $stop_rc"
	grep -q "session.* disconnected" "$T/ini$i.log" ||
		fail "detach #$i: no clean DISCONNECT: $(cat "$T/ini$i.log")"
	grep -E "^<[0-4]>" "$T/ini$i.log" && fail "detach #$i: the initiator warned"
	rm -f "$T/ini$i.log"
done
# The list is the whole point: one that cannot be written is a failure.
"$INITIATOR_BIN" --list "$(target_url "$port")" >/dev/full 2>"$T/full.err" &&
	fail "--list to a full stdout exited 0"
grep -q "writing the list" "$T/full.err" || fail "--list to a full stdout: $(cat "$T/full.err")"
# A DISCONNECT that truly gets no answer (the target frozen) ends the
# detach after the initiator's bound, saying so, instead of hanging.
start_initiator late "$(target_url "$port")/disk0" --queues 1
kill -STOP "$(cat "$T/target.pid")"
start=$(date +%s)
stop_and_status "$T/late.pid"
took=$(($(date +%s) - start))
kill -CONT "$(cat "$T/target.pid")"
note "detach from a frozen target: exit $stop_rc after ${took}s"
grep -q "DISCONNECT: no answer" "$T/late.log" ||
	fail "an unanswered DISCONNECT was not reported: $(cat "$T/late.log")"
[ "$took" -le 30 ] || fail "the detach from a frozen target took ${took}s"
echo "ok"
