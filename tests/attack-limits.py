#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Attacks on the target's limits (issue 31), over the tcp framing of
tests/tcphost.py.  Each mode opens what it attacks, holds it for --seconds
(or until the target has closed all of it), and ends with one summary line:

  attack-limits MODE opened=N refused=N reasons=NAME:N,... closed_by_target=N
      open_at_end=N [granted_queues=N granted_kato=N] seconds=S

Modes:
  conns      admin queues (HELLO only) from each --source address, --count each
  sessions   export sessions (admin queue + CONNECT) as --hostid, or as
             HOSTID-N when --distinct-hosts
  discovery  discovery sessions (CONNECT, empty export), kato 0; with
             --keepalive-every S each sends KEEPALIVE (--op list: LIST_EXPORTS)
             that often
  queues     one session asking --nq I/O queues, then queues 1..nq+1
  keepalive  sessions asking --kato, then silent: does the target end them?
  fill       sessions with every I/O queue granted at --depth, until refused
  churn      discovery sessions opened and closed in a loop for --seconds, as
             fast as the target takes them (every one logs lines)
"""
import argparse
import os
import select
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tcphost import Host, capsule, OP_KEEPALIVE, OP_LIST_EXPORTS, SGL_NONE  # noqa: E402

REJECTS = {1: "bad-magic", 2: "bad-version", 3: "bad-qid", 4: "no-session", 5: "bad-depth",
           6: "no-resources", 7: "shutting-down", 8: "conn-limit", 9: "addr-conn-limit"}
STATUSES = {16: "BUSY", 24: "SESSION_LIMIT", 25: "HOST_SESSION_LIMIT", 26: "ADDR_SESSION_LIMIT"}


class Tally:
    def __init__(self):
        self.opened, self.refused, self.reasons, self.open = 0, 0, {}, []

    def refuse(self, why):
        self.refused += 1
        self.reasons[why] = self.reasons.get(why, 0) + 1


def reject_reason(payload):
    if len(payload) >= 8 and struct.unpack_from("<I", payload)[0] == 0x4B4C4252:
        return REJECTS.get(struct.unpack_from("<H", payload, 6)[0], "reject-%d" %
                           struct.unpack_from("<H", payload, 6)[0])
    return "reject-no-reason"


def hello(t, a, **kw):
    """A queue, or None with the refusal counted."""
    try:
        return Host(a.port, addr=a.host, timeout=a.timeout, **kw)
    except ConnectionRefusedError as e:
        t.refuse(reject_reason(e.args[0] if e.args else b""))
    except (ConnectionResetError, EOFError, BrokenPipeError, socket.timeout) as e:
        t.refuse("closed:" + type(e).__name__)
    return None


def session(t, a, hostid, export, nq=1, depth=8, kato=0, source=None):
    """(Host, session id, connect response) of a CONNECTed admin queue, or None."""
    h = hello(t, a, source=source)
    if not h:
        return None
    try:
        st, sid, rsp = h.connect(hostid, export, nq=nq, depth=depth, kato_ms=kato)
        h.ack()
    except (ConnectionResetError, EOFError, BrokenPipeError, socket.timeout) as e:
        t.refuse("closed:" + type(e).__name__)
        h.close()
        return None
    if st:
        t.refuse(STATUSES.get(st, "status-%d" % st))
        h.close()
        return None
    t.opened += 1
    t.open.append(h)
    return h, sid, rsp


def hold(t, a, keepalive_every=0, op="keepalive"):
    """Until --seconds pass or the target closed every queue; the count it
    closed.  With keepalive_every, each queue sends KEEPALIVE (or
    LIST_EXPORTS) that often."""
    closed, end = 0, time.monotonic() + a.seconds
    live = {h.s: h for h in t.open}
    next_ka = time.monotonic() + keepalive_every if keepalive_every else None
    while live and time.monotonic() < end:
        if next_ka and time.monotonic() >= next_ka:
            for h in list(live.values()):
                try:
                    h.send(capsule(OP_LIST_EXPORTS, 8, 4096) if op == "list" else
                           capsule(OP_KEEPALIVE, 7, 0, sgl=SGL_NONE))
                except OSError:
                    pass
            next_ka = time.monotonic() + keepalive_every
        r, _, _ = select.select(list(live), [], [], 0.2)
        for s in r:
            try:
                live[s].frame(skip_acks=False)  # KEEPALIVE answers, ACK_REQs
                live[s].ack()
            except (EOFError, OSError):
                closed += 1
                del live[s]
    return closed, len(live)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--mode", required=True,
                   choices=["conns", "sessions", "discovery", "queues", "keepalive", "fill",
                            "churn"])
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--source", default="", help="comma-separated 127.0.0.N to connect from")
    p.add_argument("--hostid", default="attacker")
    p.add_argument("--distinct-hosts", action="store_true")
    p.add_argument("--export", default="disk0")
    p.add_argument("--nq", type=int, default=4)
    p.add_argument("--depth", type=int, default=128)
    p.add_argument("--kato", type=int, default=0)
    p.add_argument("--keepalive-every", type=float, default=0)
    p.add_argument("--op", choices=["keepalive", "list"], default="keepalive",
                   help="what --keepalive-every sends")
    p.add_argument("--timeout", type=float, default=30)
    a = p.parse_args()
    t, extra, start = Tally(), "", time.monotonic()
    sources = [s for s in a.source.split(",") if s] or [None]

    if a.mode == "conns":
        for src in sources:
            for _ in range(a.count):
                h = hello(t, a, source=src)
                if h:
                    t.opened += 1
                    t.open.append(h)
    elif a.mode in ("sessions", "discovery", "keepalive"):
        export = "" if a.mode == "discovery" else a.export
        katos = []
        for i in range(a.count):
            hostid = "%s-%d" % (a.hostid, i) if a.distinct_hosts else a.hostid
            r = session(t, a, hostid, export, kato=a.kato, source=sources[i % len(sources)])
            if r:
                katos.append(struct.unpack_from("<I", r[2], 44)[0] if len(r[2]) >= 48 else -1)
        if katos:
            extra = " granted_kato=%d" % min(katos)
    elif a.mode == "queues":
        r = session(t, a, a.hostid, a.export, nq=a.nq, depth=a.depth, kato=a.kato)
        if r:
            h, sid, rsp = r
            granted = struct.unpack_from("<H", rsp, 32)[0]
            extra = " granted_queues=%d" % granted
            for qid in range(1, a.nq + 2):
                q = hello(t, a, qid=qid, depth=a.depth, session=sid)
                if q:
                    t.opened += 1
                    t.open.append(q)
    elif a.mode == "fill":
        sessions = 0
        for i in range(a.count):
            r = session(t, a, "%s-%d" % (a.hostid, i), a.export, nq=a.nq, depth=a.depth,
                        kato=a.kato, source=sources[i % len(sources)])
            if not r:
                break
            sessions += 1
            nq = struct.unpack_from("<H", r[2], 32)[0]
            for qid in range(1, nq + 1):
                q = hello(t, a, qid=qid, depth=a.depth, session=r[1],
                          source=sources[i % len(sources)])
                if not q:
                    break
                t.opened += 1
                t.open.append(q)
            if t.refused:
                break
        extra = " sessions=%d" % sessions
        print("holding %d queues" % len(t.open), flush=True)

    elif a.mode == "churn":
        end, i = time.monotonic() + a.seconds, 0
        while time.monotonic() < end:
            r = session(t, a, "%s-%d" % (a.hostid, i % 1000), "", source=sources[i % len(sources)])
            i += 1
            if r:
                t.open.remove(r[0])
                r[0].close()
        extra = " rounds=%d" % i
        print("attack-limits churn rounds=%d" % i, flush=True)

    closed, still = hold(t, a, a.keepalive_every if a.mode == "discovery" else 0, a.op)
    for h in t.open:
        h.close()
    reasons = ",".join("%s:%d" % kv for kv in sorted(t.reasons.items())) or "none"
    print("attack-limits %s opened=%d refused=%d reasons=%s closed_by_target=%d open_at_end=%d%s "
          "seconds=%.1f" % (a.mode, t.opened, t.refused, reasons, closed, still, extra,
                            time.monotonic() - start), flush=True)


if __name__ == "__main__":
    main()
