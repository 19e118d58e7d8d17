#!/bin/bash
# An NBD client that connects and never finishes the handshake (silent
# after the greeting, or after its flags) is closed after the handshake
# limit (10 s), so that stalled connections cannot hold the places under
# --nbd-max-clients for ever.  A client in the transmission phase may stay
# idle as long as it likes.
. "$top_srcdir/tests/helpers.sh"
requires python3

start_disk_target
start_initiator ini "$(target_url "$port")/disk0" --nbd-max-clients 3

PYTHONPATH="$top_srcdir/tests" python3 - "$T/ini.sock" <<'PY' || fail "client script failed"
import socket, struct, sys, time
from nbdraw import *
path = sys.argv[1]


started = {}


def connect(what):
    s = socket.socket(socket.AF_UNIX)
    started[what] = time.monotonic()  # the server's clock starts later: a lower bound
    s.connect(path)
    s.settimeout(60)
    return s


silent = connect("silent client")
recvall(silent, 18)  # greeting read, then nothing
flags_only = connect("client stopped after its flags")
recvall(flags_only, 18)
flags_only.sendall(struct.pack(">I", 3))  # flags, then no option
idle = attach(path)  # handshake done, then idle
# Closed at the limit, not before it; "not never" has a generous bound, so a
# loaded machine does not fail it.
for s, what in ((silent, "silent client"), (flags_only, "client stopped after its flags")):
    try:
        data = s.recv(64)
    except socket.timeout:
        sys.exit(f"{what}: still connected after 60 s")
    assert data == b"", f"{what}: got {data!r}, expected EOF"
    took = time.monotonic() - started[what]
    assert took >= 9.9, f"{what}: closed after {took:.1f} s, before the 10 s limit"
    print(f"{what}: closed after {took:.1f} s")
request(idle, CMD_READ, 7, 0, 4096)
err, h = reply(idle)
assert (err, h) == (0, 7), f"idle client's READ: error {err}"
recvall(idle, 4096)
# The places are free again: two more clients fit under the cap of 3.
attach(path).close()
attach(path).close()
PY
n=$(grep -c "handshake not finished after 10000 ms; closing it" "$T/ini.log")
[ "$n" -eq 2 ] || fail "expected 2 handshake-limit warnings, got $n"
echo "ok"
