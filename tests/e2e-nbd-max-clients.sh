#!/bin/bash
# --nbd-max-clients: with N NBD clients connected, one more is accepted and
# closed at once (EOF, no greeting, instead of hanging in the backlog), with
# a warning at most once a second that counts the refusals; the connected
# clients keep working, and once one leaves a new client is served.  The
# nbd-max-clients key of the config file sets the same cap.
. "$top_srcdir/tests/helpers.sh"
requires python3

"$INITIATOR_BIN" --help | grep -q -- "--nbd-max-clients N" || fail "--help lacks --nbd-max-clients"
start_disk_target
start_initiator ini "$(target_url "$port")/disk0" --nbd-max-clients 2

cat >"$T/client.py" <<'PY'
import re, socket, sys, time
from nbdraw import *


def refused(path, what):
    """Connect: the server must close at once, without a greeting."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.settimeout(2)
    try:
        data = s.recv(64)
    except socket.timeout:
        sys.exit(f"{what}: neither a greeting nor EOF within 2 s")
    except ConnectionResetError:
        data = b""
    s.close()
    assert data == b"", f"{what}: {len(data)} greeting bytes: it was served"


def read_ok(s, handle, what):
    request(s, CMD_READ, handle, handle << 12, 4096)
    err, h = reply(s)
    assert (err, h) == (0, handle), f"{what}: READ got error {err}, handle {h}"
    recvall(s, 4096)


def attach_retry(path, what):
    """The server sees a hang-up a moment later: try for a few seconds."""
    end = time.time() + 5
    while True:
        try:
            return attach(path, timeout=2)
        except (EOFError, ConnectionResetError):
            if time.time() > end:
                sys.exit(f"{what}: still refused 5 s after a client left")
            time.sleep(0.1)


def refusals_logged(log):
    """Sum of the counts in the warnings."""
    pat = re.compile(r"connection refused: already at nbd-max-clients = \d+; (\d+) refused")
    return [int(m.group(1)) for m in pat.finditer(open(log).read())]
PY

PYTHONPATH="$top_srcdir/tests:$T" python3 - "$T/ini.sock" "$T/ini.log" <<'PY' ||
import sys, time
from nbdraw import *
from client import *
sock, log = sys.argv[1:]

held = [attach(sock), attach(sock)]
refused(sock, "third client")
for i, s in enumerate(held):
    read_ok(s, i + 1, f"held client {i}")
# A flood: 50 refused in well under a second; the refusals not counted in
# a warning yet are within the next two seconds, then one more is refused.
for i in range(50):
    refused(sock, f"flood client {i}")
time.sleep(2.2)
counts = refusals_logged(log)
print(f"warnings after the flood: {len(counts)}, counting {counts}")
assert 2 <= len(counts) <= 3, f"{len(counts)} warnings for 51 refusals"
assert sum(counts) == 51, f"the warnings count {sum(counts)} refusals, not 51"
refused(sock, "client after the flood")
counts = refusals_logged(log)
assert sum(counts) == 52, f"the warnings count {sum(counts)} refusals, not 52"
for i, s in enumerate(held):
    read_ok(s, i + 3, f"held client {i} after the flood")
held[0].close()
c = attach_retry(sock, "client after one left")
read_ok(c, 5, "new client")
read_ok(held[1], 6, "remaining held client")
refused(sock, "third client again")
PY
	fail "client script failed (socket flag)"
grep -q "nbd unix:$T/ini.sock: connection refused: already at nbd-max-clients = 2" "$T/ini.log" ||
	fail "the warning does not name the socket and the limit"

# The config file key.
cat >"$T/ini.conf" <<CONF
[attach a]
uri = $(target_url "$port")/disk0
nbd-max-clients = 1
CONF
start_initiator ini2 --config "$T/ini.conf"
PYTHONPATH="$top_srcdir/tests:$T" python3 - "$T/ini2.sock" <<'PY' ||
import sys
from nbdraw import *
from client import *
sock = sys.argv[1]
a = attach(sock)
refused(sock, "second client (config file)")
read_ok(a, 1, "held client (config file)")
PY
	fail "client script failed (config file)"
grep -q "already at nbd-max-clients = 1; 1 refused" "$T/ini2.log" ||
	fail "no warning from the config-file cap"
echo "ok"
