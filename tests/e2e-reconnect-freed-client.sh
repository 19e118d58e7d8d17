#!/bin/bash
# A reconnect parks the reactor in the middle of a batch of events while
# the recovery thread drives its work: an NBD client whose slot wait timed
# out meanwhile is closed and freed there.  When the reactor resumes, the
# rest of its batch must not touch that client (run it under the sanitizer
# build).  tests/epoll-delay.so widens the window in which the client's
# hang-up joins the batch behind the recovery's wake-up.
. "$top_srcdir/tests/helpers.sh"
requires python3

start_disk_target
EPOLL_DELAY_MS=300 INITIATOR_PRELOAD=epoll-delay.so start_initiator ini \
	"$(target_url "$port")/disk0" --queues 1 --threads 1 --queue-depth 2 --timeout 1000 \
	--keepalive 0 --ctrl-loss-tmo 20000 --reconnect-delay 500 --log-level debug

PYTHONPATH="$top_srcdir/tests" python3 - "$T/ini.sock" "$T/ini.log" "$(cat "$T/target.pid")" <<'PY' || fail "client script failed"
import os, signal, sys, time
from nbdraw import *
sock, log, tpid = sys.argv[1], sys.argv[2], int(sys.argv[3])

def read(s, off, handle):
    request(s, CMD_READ, handle, off, 4096)

a, x = attach(sock), attach(sock)
os.kill(tpid, signal.SIGSTOP)
try:
    # a takes both slots; x waits for one.  a's commands time out, the
    # session reconnects; x hangs up just after the recovery parked us.
    read(a, 0, 1)
    read(a, 4096, 2)
    time.sleep(0.8)
    read(x, 0, 3)
    end = time.time() + 10
    while b"reconnecting every" not in open(log, "rb").read():
        assert time.time() < end, "no reconnect"
        time.sleep(0.005)
    time.sleep(0.1)
    x.close()
    time.sleep(3)
finally:
    os.kill(tpid, signal.SIGCONT)
end = time.time() + 10
while b"re-established" not in open(log, "rb").read():
    assert time.time() < end, "not reconnected"
    time.sleep(0.1)
time.sleep(1)
PY

pid_alive "$T/ini.pid" || fail "initiator died after the reconnect"
! grep -q "AddressSanitizer" "$T/ini.log" || fail "sanitizer report in the initiator log"
grep -q "nbd client 2 .*closed: client closed the connection" "$T/ini.log" ||
	note "the waiting client was not closed during the reconnect (timing)"
if [ -x "$top_builddir/tests/nbd-ops" ]; then
	"$top_builddir/tests/nbd-ops" "$(nbd_uri ini disk0)" write:0:4096:5a read:0:4096:5a ||
		fail "no service after the reconnect"
fi
echo "ok"
