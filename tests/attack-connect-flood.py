#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Connect flood against a tcp target (issue 31): keeps SOCKETS connections
open from each source address and opens a new one as soon as the target
closes one.  Each connection, by --mode, sends nothing (silent), the first
PARTIAL bytes of a valid HELLO and then nothing (partial), or bytes that
are no HELLO (garbage); mixed cycles through the three.

usage: attack-connect-flood.py HOST PORT [--seconds N] [--sockets K]
       [--sources 127.0.0.2,127.0.0.3] [--mode silent|partial|garbage|mixed]
SIGTERM or SIGINT end it early.  Prints one summary line at the end; exits
0 unless no connection could be made at all."""
import argparse
import errno
import os
import resource
import selectors
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tcphost import HDR, HELLO, HELLO_MAGIC, cm_req2  # noqa: E402

HELLO_BYTES = HDR.pack(HELLO, 0, 0, len(cm_req2()), 0, 0, 0, HELLO_MAGIC) + cm_req2()
PARTIAL = 20  # bytes of a valid HELLO header: type, flags, length, ack, rkey
GARBAGE = b"GET / HTTP/1.0\r\n\r\n"
MODES = ("silent", "partial", "garbage")
LINGER0 = struct.pack("ii", 1, 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--sockets", type=int, default=200, help="open per source address")
    ap.add_argument("--sources", default="127.0.0.2", help="comma separated source addresses")
    ap.add_argument("--mode", choices=MODES + ("mixed",), default="mixed")
    a = ap.parse_args()
    sources = [s for s in a.sources.split(",") if s]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = len(sources) * a.sockets + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    sel = selectors.DefaultSelector()
    stats = {m: 0 for m in MODES}
    stats.update(closed=0, failed=0)
    nxt = 0
    open_by_src = {s: 0 for s in sources}

    def open_one(src):
        nonlocal nxt
        mode = a.mode if a.mode != "mixed" else MODES[nxt % 3]
        nxt += 1
        try:
            s = socket.socket(socket.AF_INET6 if ":" in a.host else socket.AF_INET)
        except OSError:  # out of descriptors: wait for the target to close some
            stats["failed"] += 1
            return False
        s.setblocking(False)
        # Close with a reset: a TIME_WAIT left on SRC:port would keep other
        # programs from binding the any address to that port.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER0)
        try:
            s.bind((src, 0))
            rc = s.connect_ex((a.host, a.port))
        except OSError:
            s.close()
            stats["failed"] += 1
            return False
        if rc not in (0, errno.EINPROGRESS):
            s.close()
            stats["failed"] += 1
            return False
        sel.register(s, selectors.EVENT_WRITE, (src, mode, "connecting"))
        open_by_src[src] += 1
        return True

    def drop(s, src):
        sel.unregister(s)
        s.close()
        open_by_src[src] -= 1

    end = time.monotonic() + a.seconds
    t0 = time.monotonic()

    def stop(*_):
        nonlocal end
        end = 0

    # SIGTERM/SIGINT end the flood early, with its summary.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while time.monotonic() < end:
        for src in sources:
            for _ in range(min(64, a.sockets - open_by_src[src])):
                if not open_one(src):
                    break
        for key, _ in sel.select(timeout=0.02):
            s = key.fileobj
            src, mode, state = key.data
            if state == "connecting":
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    stats["failed"] += 1
                    drop(s, src)
                    continue
                stats[mode] += 1
                try:
                    if mode == "partial":
                        s.send(HELLO_BYTES[:PARTIAL])
                    elif mode == "garbage":
                        s.send(GARBAGE)
                except OSError:
                    stats["closed"] += 1
                    drop(s, src)
                    continue
                sel.modify(s, selectors.EVENT_READ, (src, mode, "waiting"))
                continue
            # Readable while waiting: the target closed it (it sends nothing
            # before a complete HELLO).
            try:
                data = s.recv(64)
            except OSError:
                data = b""
            if not data:
                stats["closed"] += 1
                drop(s, src)
    left = len(sel.get_map())
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    total = sum(stats[m] for m in MODES)
    print("connect-flood: %d connections in %.1f s from %d source(s) (silent %d, partial %d, "
          "garbage %d), %d closed by the target, %d open at the end, %d failed" %
          (total, time.monotonic() - t0, len(sources), stats["silent"], stats["partial"], stats["garbage"],
           stats["closed"], left, stats["failed"]))
    return 0 if total else 1


if __name__ == "__main__":
    sys.exit(main())
