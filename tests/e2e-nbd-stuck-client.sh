#!/bin/bash
# One NBD client must not fail another's I/O by holding command slots: a
# client that sends big READs and never reads the replies keeps their
# slots.  Another client on the same queue waits a command timeout for a
# slot; then the stuck client is closed and the waiting READ succeeds.
# The same for clients that stop in the middle of a WRITE payload.
. "$top_srcdir/tests/helpers.sh"
requires python3

start_disk_target
start_initiator ini "$(target_url "$port")/disk0" --queues 1 --threads 1 --queue-depth 8 \
	--timeout 2000

PYTHONPATH="$top_srcdir/tests" python3 - "$T/ini.sock" <<'PY' || fail "client script failed"
import socket, sys, time
from nbdraw import *
sock = sys.argv[1]

def stuck_then_served(stuck, what):
    time.sleep(0.5)  # the stuck client's requests are all in
    b = attach(sock)
    t0 = time.time()
    request(b, CMD_READ, 9, 0, 4096)
    err, handle = reply(b)
    waited = time.time() - t0
    assert (err, handle) == (0, 9), f"{what}: the waiting READ got error {err}"
    recvall(b, 4096)
    assert 1.5 < waited < 8, f"{what}: answered after {waited:.1f} s"
    stuck.settimeout(5)
    try:
        while stuck.recv(1 << 20):
            pass  # replies sent before the close, then EOF
    except ConnectionResetError:
        pass
    b.close()
    print(f"{what}: served after {waited:.1f} s, stuck client closed")

# A reader that never reads: four 512 KiB READs take the queue's 8 slots.
a = attach(sock)
a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
for i in range(4):
    request(a, CMD_READ, i, i << 19, 1 << 19)
stuck_then_served(a, "reader")

# Writers that stop in the middle of a payload: one holds half the slots.
ws = []
for i in range(2):
    w = attach(sock)
    request(w, CMD_WRITE, i, i << 19, 1 << 19)
    w.sendall(b"\0" * 4096)
    ws.append(w)
stuck_then_served(ws[0], "writers")
PY
grep -c "holds command slots and moved no data" "$T/ini.log" | grep -qx 3 ||
	fail "expected three stuck clients closed"
echo "ok"
