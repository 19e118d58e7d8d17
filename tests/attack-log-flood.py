#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Log flood against a tcp target (issue 31): one admin queue sends
CAPSULES capsules the target must reject (unknown opcode) as fast as it
answers them, then DROPS connections the target drops or refuses, in turn:
closed before HELLO, a HELLO that is garbage, a connection request of the
wrong protocol version, and an I/O queue of a session that does not exist.
Each of them used to cost a log line.

usage: attack-log-flood.py HOST PORT [--capsules N] [--drops N] [--seconds S] [--src ADDR]
--seconds bounds the run (whatever is left undone is reported).  Prints one
summary line; exits 1 if the target stopped answering the capsules."""
import argparse
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tcphost import (ACK, ACK_REQ, HDR, HELLO, HELLO_ACCEPT, HELLO_MAGIC, RB_MAGIC, SEND,  # noqa: E402
                     SGL_NONE, WRITE, Host, capsule, cm_req2)

# Sockets close with a reset: a TIME_WAIT left on SRC:port would keep other
# programs from binding the any address to that port.
LINGER0 = struct.pack("ii", 1, 0)
BAD_OPCODE = 0x7F
DEPTH = 16  # the admin queue's


def flood_capsules(a, deadline):
    """Send a.capsules rejected capsules, DEPTH at a time; (sent, answered)."""
    h = Host(a.port, addr=a.host, timeout=10, source=a.src)
    h.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER0)
    s, rx, tag, buf = h.s, 0, 1, b""
    sent = answered = 0
    caps = [capsule(BAD_OPCODE, cid, sgl=SGL_NONE) for cid in range(DEPTH)]
    try:
        while sent < a.capsules and time.monotonic() < deadline:
            n = min(DEPTH, a.capsules - sent)
            out = []
            for i in range(n):
                out.append(HDR.pack(SEND, 0, 0, len(caps[i]), rx, 0, tag, 0) + caps[i])
                tag += 1
            s.sendall(b"".join(out))
            sent += n
            got = 0
            while got < n:
                while len(buf) >= 32:
                    t, _, _, ln, _, _, _, _ = HDR.unpack_from(buf)
                    if len(buf) < 32 + ln:
                        break
                    if t in (SEND, WRITE):
                        rx += 1
                    if t == SEND:
                        status = struct.unpack_from("<H", buf, 32 + 2)[0]
                        if status == 0:
                            raise AssertionError("a bad opcode was accepted")
                        got += 1
                    elif t not in (ACK, ACK_REQ):
                        raise AssertionError("frame type %d" % t)
                    buf = buf[32 + ln:]
                if got >= n:
                    break
                c = s.recv(65536)
                if not c:
                    raise EOFError("the target closed the flooding connection")
                buf += c
            answered += got
        s.sendall(HDR.pack(ACK, 0, 0, 0, rx, 0, 0, 0))
    finally:
        h.close()
    return sent, answered


def hello(req):
    return HDR.pack(HELLO, 0, 0, len(req), 0, 0, 0, HELLO_MAGIC) + req


def drop_one(a, kind):
    """One connection the target drops or refuses; True once it did."""
    s = socket.create_connection((a.host, a.port), timeout=10,
                                 source_address=(a.src, 0) if a.src else None)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER0)
    try:
        if kind == 0:  # closed before HELLO
            return True
        if kind == 1:
            s.sendall(b"\xff" * 32)
        elif kind == 2:  # protocol version 1
            s.sendall(hello(struct.pack("<IHHHIQ32s", RB_MAGIC, 1, 0, 16, 0, 0, bytes(32))))
        else:  # I/O queue of no session
            s.sendall(hello(cm_req2(qid=1, session=0x5EED)))
        hdr = s.recv(32)
        return not hdr or hdr[0] != HELLO_ACCEPT
    except (ConnectionResetError, socket.timeout):
        return kind == 1
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--capsules", type=int, default=200000)
    ap.add_argument("--drops", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--src", default=None, help="source address to connect from")
    a = ap.parse_args()
    t0 = time.monotonic()
    deadline = t0 + a.seconds
    rc = 0
    try:
        sent, answered = flood_capsules(a, deadline)
    except (OSError, EOFError, AssertionError) as e:
        print("# capsule flood stopped: %s" % e, file=sys.stderr)
        sent = answered = -1
        rc = 1
    drops = [0, 0, 0, 0]
    for i in range(a.drops):
        if time.monotonic() >= deadline:
            break
        if drop_one(a, i % 4):
            drops[i % 4] += 1
    print("log-flood: %d rejected capsules sent, %d answered, on one connection; %d connections "
          "dropped or refused (%d before HELLO, %d bad HELLO, %d wrong version, %d unknown "
          "session) in %.1f s" % (sent, answered, sum(drops), drops[0], drops[1], drops[2],
                                  drops[3], time.monotonic() - t0))
    if a.drops and not sum(drops):
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
