#!/bin/bash
# Hosts (or one peer) that open connections until the target runs out of
# file descriptors: accept fails with EMFILE while the listener stays
# readable.  The target must wait before trying again (a handful of log
# lines, not a busy loop flooding the log), and accept again once
# descriptors are free.
. "$top_srcdir/tests/helpers.sh"
requires python3 prlimit

[ "$E2E_TRANSPORT" = tcp ] || skip "raw tcp framing: tcp transport only"
port=$(free_port)
truncate -s 16M "$T/disk.img"
TARGET_THREADS=1 write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"
pid=$(cat "$T/target.pid")
prlimit --pid "$pid" --nofile=$(($(ls /proc/"$pid"/fd | wc -l) + 8))

PYTHONPATH="$top_srcdir/tests" python3 - "$port" "$T/target.log" <<'PY' || fail "raw hosts failed"
import socket, sys, time
from tcphost import *
port, log = int(sys.argv[1]), sys.argv[2]


class Opener(Host):
    """A connection whose hello is sent and not waited for: the target may
    never accept it (out of descriptors), however fast it is."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.rx, self.tag = 0, 1
        self.send_frame(HELLO, cm_req2(), addr=HELLO_MAGIC)


def emfile_logged():
    with open(log, errors="replace") as f:
        return "Too many open files" in f.read()


hosts = [Opener(port) for _ in range(16)]  # twice the descriptors it has left
deadline = time.monotonic() + 60
while not emfile_logged():
    if time.monotonic() > deadline:
        sys.exit("the descriptor limit was never reached")
    time.sleep(0.1)
time.sleep(2)  # at the limit for a while, connections waiting in the backlog
for h in hosts:
    h.close()
h = Host(port, timeout=60)  # descriptors free again: accepted once the pause ends
st, _, _ = h.connect("fd-limit")
assert st == 0, st
PY
n=$(grep -c "Too many open files" "$T/target.log" || true)
note "accept failures logged: $n"
[ "$n" -gt 0 ] || fail "the target never ran out of descriptors"
[ "$n" -le 20 ] || fail "the acceptor spun on EMFILE: $n log lines in about 3 s"
pid_alive "$T/target.pid" || fail "target died"
echo "ok"
