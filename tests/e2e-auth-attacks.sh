#!/bin/bash
# Authentication against a raw host (issue 30), tcp framing by hand
# (tests/tcphost.py, SHA-256 without DH): a host with its secret
# authenticates, binds an I/O queue and reads (the controls, proving the raw
# host computes what the target does); then, each refused: an I/O queue with
# a stolen session id and no session key (a guessed proof, or a READ before
# QUEUE_AUTH), an I/O queue of a session whose exchange has not finished,
# commands on the admin queue before the exchange, `replaces` of the victim's
# session by another authenticated host (the victim's session goes on), a
# replayed REPLY, and a reflected proof (the target-role proof sent as the
# host's, with host and target sharing one secret).
. "$top_srcdir/tests/helpers.sh"
requires python3
[ "$E2E_TRANSPORT" = tcp ] || skip "the raw host speaks the tcp framing only"

KEYGEN="$top_builddir/tools/rdmablk-keygen"
newkey() { (umask 077 && "$KEYGEN" >"$1") || fail "keygen $1"; }

port=$(free_port)
truncate -s 16M "$T/a.img"
newkey "$T/victim.key"
newkey "$T/evil.key"
newkey "$T/shared.key"
cat >"$T/target.conf" <<CONF
[target]
listen = $(target_url "$port")
threads = 2
target-secret-file = $T/shared.key

[export prot0]
path = $T/a.img
auth = required

[host victim]
hostid = host-victim
secret-file = $T/victim.key

[host evil]
hostid = host-evil
secret-file = $T/evil.key

[host mirror]
hostid = host-mirror
secret-file = $T/shared.key
CONF
start_target "$T/target.conf"

PYTHONPATH="$top_srcdir/tests" timeout 120 python3 - "$port" "$T" >"$T/raw.log" 2>&1 <<'PY' ||
import os, struct, sys, time
from tcphost import *
port, d = int(sys.argv[1]), sys.argv[2]
kv, ke, ks = (key_file(d + "/%s.key" % n) for n in ("victim", "evil", "shared"))
OP_READ_ = OP_READ


def closed_now(h):
    """The target closes at once, not at a deadline (10 s auth, 15 s transfer)."""
    t0 = time.monotonic()
    return h.closed() and time.monotonic() - t0 < 8


def read(h, x, cid, handle=None):
    if handle is None:
        handle = struct.unpack_from("<I", x["grant"], 28)[0]
    return h.command(capsule(OP_READ_, cid, 4096, handle=handle, offset=0), bytearray(4096))[0]


# Controls: the victim authenticates, binds an I/O queue, reads (queues 2
# and 3 are left for the thief).
victim = Host(port, timeout=30)
st, x, victim_reply = victim.login("host-victim", "prot0", kv, nq=4)
assert st == 0, "victim: REPLY status %d" % st

nh = os.urandom(32)
vq = Host(port, qid=1, session=x["session"], nonce=nh, timeout=30)
assert vq.queue_auth(x, 1, nh) == 0, "victim: QUEUE_AUTH refused"
assert read(vq, x, 2) == 0, "victim: READ refused"
handle = struct.unpack_from("<I", x["grant"], 28)[0]
print("control ok: session bound and read with the right secret")

# Stolen session id, no session key: a guessed proof fails, the queue closes.
nh2 = os.urandom(32)
a = Host(port, qid=2, session=x["session"], nonce=nh2, timeout=30)
st = a.queue_auth({"session": x["session"]}, 2, nh2, proof_bytes=os.urandom(32), handle=handle)
assert st == S_AUTH_FAILED, "stolen session id, guessed proof: status %d" % st
assert closed_now(a), "queue left open after a wrong QUEUE_AUTH"
print("stolen session id + guessed proof: AUTH_FAILED, closed")

# Stolen session id, READ before QUEUE_AUTH: refused and closed.
b = Host(port, qid=3, session=x["session"], nonce=os.urandom(32), timeout=30)
st = read(b, x, 3)
assert st == S_AUTH_REQUIRED, "READ before QUEUE_AUTH: status %d" % st
assert closed_now(b), "queue left open after a READ before QUEUE_AUTH"
print("READ before QUEUE_AUTH: AUTH_REQUIRED, closed")

# A session whose exchange has not finished binds nothing; its admin queue
# takes nothing but AUTH (and DISCONNECT).
p = Host(port, timeout=30)
st, sid, rsp = p.connect("host-victim", "prot0")
assert st == 0
p.ack()
pend = struct.unpack_from("<Q", rsp)[0]
try:
    Host(port, qid=1, session=pend, nonce=os.urandom(32), timeout=30)
    raise AssertionError("I/O queue bound to a session not authenticated")
except ConnectionRefusedError:
    pass
st, _ = p.command(capsule(OP_LIST_EXPORTS, 4, 4096), bytearray(4096))
assert st == S_AUTH_REQUIRED, "LIST_EXPORTS before the exchange: status %d" % st
print("unfinished exchange: I/O queue refused, LIST_EXPORTS AUTH_REQUIRED")

# A replayed REPLY (the victim's, recorded) fails on a new challenge.
r = Host(port, timeout=30)
st, _, _ = r.connect("host-victim", "prot0")
assert st == 0
r.ack()
st, t = r.auth(negotiate())
assert st == 0 and t[0] == AUTH_CHALLENGE
st, _ = r.auth(victim_reply, cid=0xA1)
assert st == S_AUTH_FAILED, "replayed REPLY: status %d" % st
assert closed_now(r), "admin queue left open after a failed exchange"
print("replayed REPLY: AUTH_FAILED, closed")

# `replaces` from another host: evil authenticates with its own secret, the
# victim's session is not ended; nor by a host claiming the victim's id.
e = Host(port, timeout=30)
st, ex, _ = e.login("host-evil", "prot0", ke, replaces=x["session"])
assert st == 0, "evil's own exchange: status %d" % st
f = Host(port, timeout=30)
st, _, _ = f.login("host-victim", "prot0", ke, replaces=x["session"])
assert st == S_AUTH_FAILED, "victim's host id with evil's key: status %d" % st
st, _ = victim.command(capsule(OP_KEEPALIVE, 5, 0, sgl=SGL_NONE), bytearray(0))
assert st == 0, "victim's admin queue after the replaces attempts: status %d" % st
assert read(vq, x, 6) == 0, "victim's I/O queue after the replaces attempts"
print("replaces from another host: victim's session goes on")

# Reflection: host and target share a secret; the target-role proof over
# the same transcript, sent as the host's, fails; the host-role one passes.
m = Host(port, timeout=30)
st, _, _ = m.login("host-mirror", "prot0", ks, label="target proof")
assert st == S_AUTH_FAILED, "reflected proof: status %d" % st
m2 = Host(port, timeout=30)
st, _, _ = m2.login("host-mirror", "prot0", ks)
assert st == 0, "host-mirror with its right proof: status %d" % st
print("reflected proof: AUTH_FAILED (control with the host proof: ok)")
print("ok")
PY
	{ cat "$T/raw.log"; tail -20 "$T/target.log"; fail "raw host attacks"; }
cat "$T/raw.log"
grep -q "authentication failed" "$T/target.log" || fail "target did not log the failures"
