#!/bin/bash
# A host that never acknowledges the data the target sends it (here: a raw
# tcp host that keeps its admin queue alive but never acks its I/O queue)
# holds the target's pool buffers.  With 4 buffers per reactor, another
# host's CONNECT, which needs one, would wait behind it for ever.  After
# transfer-timeout the target closes the guilty queue, and the other host
# attaches and reads.  An honest host that goes idle, whose last answers
# stay unacknowledged until it sends again (lazy acks), must not be cut.
. "$top_srcdir/tests/helpers.sh"
requires python3

[ "$E2E_TRANSPORT" = tcp ] || skip "raw tcp framing: tcp transport only"
port=$(free_port)
truncate -s 16M "$T/disk.img"
TARGET_THREADS=1 TARGET_EXTRA=$'buffers = 4\nincapsule = 0\ntransfer-timeout = 2000' \
	write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"

PYTHONPATH="$top_srcdir/tests" python3 - "$port" >"$T/bad.log" 2>&1 <<'PY' &
import struct, sys, time
from tcphost import *
a = Host(int(sys.argv[1]))
st, sid, rsp = a.connect("stuck-host", "disk0", nq=1, depth=16, kato_ms=60000)
assert st == 0, st
handle = struct.unpack("<I", rsp[28:32])[0]
a.ack()
q = Host(int(sys.argv[1]), qid=1, depth=16, session=sid)
for i in range(8):  # 4 get the buffers, 4 wait for them
    q.send(capsule(OP_READ, i, 4096, handle=handle, offset=i * 4096))
print("reads sent", flush=True)
for k in range(60):  # a live admin queue; the I/O queue is never acked
    a.send(capsule(OP_KEEPALIVE, 100 + k, 0, sgl=SGL_NONE))
    a.response()
    a.ack()
    time.sleep(0.5)
PY
echo $! >"$T/bad.pid"
_pidfiles="$_pidfiles $T/bad.pid"
wait_until 60 grep -q "reads sent" "$T/bad.log" || fail "raw host did not start: $(cat "$T/bad.log")"
sleep 0.5

start_initiator ini "$(target_url "$port")/disk0" --queues 1 --timeout 20000
"$top_builddir/tests/nbd-ops" "$(nbd_uri ini disk0)" "write:0:4096:5" "read:0:4096:5" ||
	fail "the second host's I/O failed"
# Whether or not the CONNECT had to wait for it, the stuck queue is closed.
wait_until 30 grep -q "queue 1 (peer .*READ cid .*: the host did not complete the response within transfer-timeout (2000 ms)" \
	"$T/target.log" || fail "the target did not name the stuck queue"
pid_alive "$T/bad.pid" && grep -q "stuck-host" "$T/target.log" ||
	fail "the raw host's admin queue should have stayed up"

# Idle for twice the timeout, with its last answers not yet acknowledged.
sleep 4.5
"$top_builddir/tests/nbd-ops" "$(nbd_uri ini disk0)" "read:0:4096:5" ||
	fail "I/O after an idle spell failed"
n=$(grep -c "within transfer-timeout" "$T/target.log")
[ "$n" -eq 1 ] || fail "$n queues hit transfer-timeout; only the stuck host's should"
grep -q "session .* lost\|reconnect" "$T/ini.log" && fail "the honest initiator lost its session"
echo "ok"
