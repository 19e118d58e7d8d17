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

PYTHONPATH="$top_srcdir/tests" python3 - "$port" <<'PY' || fail "raw hosts failed"
import sys, time
from tcphost import *
port = int(sys.argv[1])
hosts = []
for i in range(16):
    try:
        hosts.append(Host(port, timeout=0.5))
    except (OSError, EOFError):
        break  # not accepted: out of descriptors
if len(hosts) >= 16:
    sys.exit("the descriptor limit was never reached")
time.sleep(2)  # at the limit, with connections waiting in the backlog
for h in hosts:
    h.close()
time.sleep(1.5)
h = Host(port, timeout=5)  # descriptors free again: accepted
st, _, _ = h.connect("fd-limit")
assert st == 0, st
PY
n=$(grep -c "Too many open files" "$T/target.log" || true)
note "accept failures logged: $n"
[ "$n" -gt 0 ] || fail "the target never ran out of descriptors"
[ "$n" -le 20 ] || fail "the acceptor spun on EMFILE: $n log lines in about 3 s"
pid_alive "$T/target.pid" || fail "target died"
echo "ok"
