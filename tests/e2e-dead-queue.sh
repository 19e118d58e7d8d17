#!/bin/bash
# A command that waits for a data buffer while its queue dies.  With one
# buffer per reactor, LIST_EXPORTS #1 holds it (answered, not yet
# acknowledged) and LIST_EXPORTS #2 waits for it.  One frame then both
# acknowledges #1 (the buffer comes back) and is a truncated capsule (the
# queue dies): #2 gets the buffer in that same round, on a dead queue.  Its
# data WRITE is flushed, and the request may only be freed once that
# completion arrives.  The target must survive and go on serving.
. "$top_srcdir/tests/helpers.sh"
requires python3

[ "$E2E_TRANSPORT" = tcp ] || skip "raw tcp framing: tcp transport only"
port=$(free_port)
truncate -s 16M "$T/disk.img"
TARGET_THREADS=1 TARGET_EXTRA="buffers = 1" \
	write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"

PYTHONPATH="$top_srcdir/tests" python3 - "$port" <<'PY' || fail "raw host failed"
import sys, time
from tcphost import *
h = Host(int(sys.argv[1]))
st, _, _ = h.connect("dead-queue")
assert st == 0, st
h.ack()
h.send(capsule(OP_LIST_EXPORTS, 1, 272))  # takes the only buffer
h.expect(WRITE)
h.expect(SEND)
h.send(capsule(OP_LIST_EXPORTS, 2, 272), ack=h.rx - 2)  # waits for it
time.sleep(0.3)
h.send(b"x" * 10)  # acks #1 and is a truncated capsule
try:
    while True:
        h.frame()
except (EOFError, OSError):
    pass
PY
wait_until 30 grep -q "truncated capsule" "$T/target.log" ||
	fail "target did not see the truncated capsule"
pid_alive "$T/target.pid" || fail "target died: $(grep -i -m1 -E 'assert|ERROR' "$T/target.log")"

# Still serving: a new host connects and lists the export.
PYTHONPATH="$top_srcdir/tests" python3 - "$port" <<'PY' || fail "target stopped serving"
import sys
from tcphost import *
h = Host(int(sys.argv[1]))
st, _, _ = h.connect("dead-queue-2")
assert st == 0, st
h.send(capsule(OP_LIST_EXPORTS, 1, 272))
_, st, result = h.response()
assert st == 0 and result & 0xffffffff == 1, (st, result)
PY
pid_alive "$T/target.pid" || fail "target died: $(grep -i -m1 -E 'assert|ERROR' "$T/target.log")"
echo "ok"
