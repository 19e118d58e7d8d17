#!/bin/bash
# At --nbd-max-clients, clients idle after the handshake (no request for
# 5 s) give their place to a new client instead of locking everyone out:
# the idle one longest is closed, with a (rate-limited) warning, and the
# new one is served.  A busy client is never chosen.  The attack is
# tests/attack-nbd.py (also for the bench).
. "$top_srcdir/tests/helpers.sh"
requires python3

start_disk_target
start_initiator ini "$(target_url "$port")/disk0" --nbd-max-clients 4

# Three idle attackers and one busy client fill the places.
python3 "$top_srcdir/tests/attack-nbd.py" idle --unix "$T/ini.sock" --clients 3 \
	--seconds 90 --until-closed 1 >"$T/attack.out" 2>&1 &
attack=$!
wait_until 30 grep -q "3 clients connected" "$T/attack.out" ||
	fail "attackers did not connect: $(cat "$T/attack.out")"

PYTHONPATH="$top_srcdir/tests" python3 - "$T/ini.sock" <<'PY' || fail "client script failed"
import socket, sys, threading, time
from nbdraw import *
path = sys.argv[1]
busy = attach(path)
stop = False


def keep_busy():
    """One request after another: never idle for long."""
    h = 1
    while not stop:
        request(busy, CMD_READ, h, 0, 4096)
        err, got = reply(busy)
        assert (err, got) == (0, h), f"busy client's READ: error {err}"
        recvall(busy, 4096)
        h += 1
        time.sleep(0.05)


t = threading.Thread(target=keep_busy, daemon=True)
t.start()
# Once the attackers have idled 5 s a new client gets a place; until then it
# may be refused (EOF at once).  Generous deadline for a loaded machine.
end = time.monotonic() + 60
while True:
    try:
        s = attach(path, timeout=10)
        break
    except (EOFError, ConnectionResetError, BrokenPipeError):
        if time.monotonic() > end:
            sys.exit("new client still refused after 60 s")
        time.sleep(0.2)
request(s, CMD_READ, 9, 4096, 4096)
err, h = reply(s)
assert (err, h) == (0, 9), f"new client's READ: error {err}"
recvall(s, 4096)
stop = True
t.join(30)
assert not t.is_alive(), "busy client stuck"
PY
wait $attack || fail "attack script failed"
cat "$T/attack.out"
sum=$(tail -n 1 "$T/attack.out")
case $sum in
*" closed=1 open=2 "*) ;;
*) fail "expected one idle attacker closed: $sum" ;;
esac
grep -q "at nbd-max-clients = 4: closing client [0-9]* (.*), idle or not reading its replies for [0-9]* ms, to serve a new one" \
	"$T/ini.log" || fail "no warning for the closed idle client"
grep -q "closed: idle at nbd-max-clients" "$T/ini.log" || fail "no close reason logged"

# Clients that never read their replies (8 READs of 512 KiB each) are as
# good as idle: one gives its place too.
start_initiator ini2 "$(target_url "$port")/disk0" --nbd-max-clients 2
python3 "$top_srcdir/tests/attack-nbd.py" stuck --unix "$T/ini2.sock" --clients 2 \
	--seconds 90 --until-closed 1 >"$T/attack2.out" 2>&1 &
attack=$!
wait_until 30 grep -q "2 clients connected" "$T/attack2.out" ||
	fail "stuck attackers did not connect: $(cat "$T/attack2.out")"
PYTHONPATH="$top_srcdir/tests" python3 - "$T/ini2.sock" <<'PY' || fail "client script failed (stuck)"
import sys, time
from nbdraw import *
end = time.monotonic() + 60
while True:
    try:
        s = attach(sys.argv[1], timeout=10)
        break
    except (EOFError, ConnectionResetError, BrokenPipeError):
        if time.monotonic() > end:
            sys.exit("new client still refused after 60 s (stuck clients)")
        time.sleep(0.2)
request(s, CMD_READ, 9, 0, 4096)
err, h = reply(s)
assert (err, h) == (0, 9), f"new client's READ: error {err}"
recvall(s, 4096)
PY
wait $attack || fail "attack script failed (stuck)"
cat "$T/attack2.out"
case $(tail -n 1 "$T/attack2.out") in
*" closed=1 open=1 "*) ;;
*) fail "expected one stuck attacker closed: $(tail -n 1 "$T/attack2.out")" ;;
esac
echo "ok"
