#!/bin/bash
# The initiator out of file descriptors: accept on its NBD socket fails
# with EMFILE and the connection stays in the backlog, the socket readable.
# The listener must rest (a warning a second, not one every 50 ms from a
# main loop that sleeps in between), the connected clients keep working,
# and new clients are served again soon after descriptors are free.
. "$top_srcdir/tests/helpers.sh"
requires python3 prlimit

start_disk_target
start_initiator ini "$(target_url "$port")/disk0" --queues 1 --threads 1
pid=$(cat "$T/ini.pid")
soft=$(prlimit --pid "$pid" --nofile --noheadings --output SOFT)
# Room for a few NBD clients, then EMFILE (the soft limit only: it goes back).
prlimit --pid "$pid" --nofile=$(($(ls /proc/"$pid"/fd | wc -l) + 4)):

PYTHONPATH="$top_srcdir/tests" python3 - "$T/ini.sock" "$T/ini.log" "$pid" "$soft" <<'PY' ||
import socket, subprocess, sys, time
from nbdraw import *
sock, log, pid, soft = sys.argv[1:]


def accept_failures():
    return open(log).read().count("Too many open files")


def read_ok(s, handle, what):
    request(s, CMD_READ, handle, 0, 4096)
    err, h = reply(s)
    assert (err, h) == (0, handle), f"{what}: READ got error {err}"
    recvall(s, 4096)


held, waiting = [], []
for i in range(32):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)  # lands in the backlog even when not accepted
    s.settimeout(0.5)
    try:
        held.append(handshake(s))
    except (OSError, EOFError):
        waiting.append(s)  # no greeting: not accepted
        break
if not waiting:
    sys.exit("the descriptor limit was never reached")
for i in range(3):  # more in the backlog
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    waiting.append(s)
n0 = accept_failures()
time.sleep(2)  # at the limit, connections waiting
n = accept_failures() - n0
print(f"{len(held)} clients accepted; accept failures logged in 2 s: {n}")
assert n > 0, "the initiator never ran out of descriptors"
assert n <= 3, f"the listener did not rest on EMFILE: {n} warnings in 2 s"
held[0].settimeout(5)
read_ok(held[0], 1, "a client connected before the limit")
subprocess.run(["prlimit", "--pid", pid, f"--nofile={soft}:"], check=True)
for s in waiting:
    s.close()
t0 = time.time()
while True:
    try:
        c = attach(sock, timeout=1)
        break
    except (OSError, EOFError):
        if time.time() - t0 > 4:
            sys.exit("not served 4 s after descriptors were free")
print(f"served {time.time() - t0:.1f} s after descriptors were free")
read_ok(c, 2, "new client")
PY
	fail "client script failed"
grep -q "nbd listener unix:$T/ini.sock: accept: Too many open files; accepting again in 1000 ms" \
	"$T/ini.log" || fail "the warning does not name the listener and the pause"
pid_alive "$T/ini.pid" || fail "initiator died"
echo "ok"
