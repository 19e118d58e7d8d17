#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hostile local NBD clients against rdmablk-initiator's NBD server.

  attack-nbd.py MODE (--unix PATH | HOST PORT) [--clients N] [--seconds S]
                [--until-closed K]

MODE
  options  each client sends its flags, then floods NBD_OPT_LIST options
           (up to --options, as far as the socket takes them) and never reads
           a reply: the handshake limit must close it all the same.
  idle     each client finishes the handshake and then sends nothing: at
           nbd-max-clients such clients must give their place to new ones.
  stuck    each client finishes the handshake, sends 8 READs of 512 KiB and
           never reads the replies: as good as idle at nbd-max-clients.

The clients are held for --seconds, or until --until-closed of them were
closed by the server; a hang-up is seen without reading (POLLRDHUP).  The
last line sums up what happened, for tests and the bench:
  attack-nbd options: clients=3 sent=... closed=3 open=0 closed_after=10.0,10.1,10.0
"""
import argparse
import os
import select
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbdraw import CMD_READ, handshake, recvall, request  # noqa: E402

IHAVEOPT = 0x49484156454F5054
OPT_LIST = 3


def connect(args):
    if args.unix:
        s = socket.socket(socket.AF_UNIX)
        s.connect(args.unix)
    else:
        s = socket.create_connection((args.host, args.port))
    s.settimeout(10)
    return s


def flood_options(s, count):
    """Flags, then as many options as the socket takes; returns how many."""
    recvall(s, 18)
    s.sendall(struct.pack(">I", 3))
    opt = struct.pack(">QII", IHAVEOPT, OPT_LIST, 0)
    s.setblocking(False)
    sent = 0
    buf = opt * 256
    while sent < count:
        try:
            n = s.send(buf[: len(opt) * min(256, count - sent)])
        except BlockingIOError:
            break
        sent += n // len(opt)
        if n % len(opt):
            # Finish the partial option so the stream stays well formed.
            s.setblocking(True)
            s.sendall(opt[n % len(opt):])
            s.setblocking(False)
            sent += 1
    return sent


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("options", "idle", "stuck"))
    ap.add_argument("host", nargs="?")
    ap.add_argument("port", nargs="?", type=int)
    ap.add_argument("--unix", help="the NBD server's Unix socket")
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--options", type=int, default=20000, help="per client (options mode)")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--until-closed", type=int, default=0, metavar="K",
                    help="stop once K clients were closed by the server")
    args = ap.parse_args()
    if not args.unix and (not args.host or not args.port):
        ap.error("need --unix PATH or HOST PORT")

    start = time.monotonic()
    socks, born, sent, refused = [], {}, 0, 0
    for _ in range(args.clients):
        try:
            s = connect(args)
            born[s.fileno()] = time.monotonic()
            if args.mode == "options":
                sent += flood_options(s, args.options)
            else:
                handshake(s)
                sent += 1
                if args.mode == "stuck":
                    for i in range(8):
                        request(s, CMD_READ, i, i << 19, 512 << 10)
                    sent += 8
        except (OSError, EOFError, ValueError):
            # Past nbd-max-clients the server closes new clients at once;
            # an attacker keeps the places it has.
            refused += 1
            continue
        socks.append(s)
    print(f"attack-nbd {args.mode}: {len(socks)} clients connected, {refused} refused", flush=True)

    p = select.poll()
    for s in socks:
        p.register(s, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
    closed = {}
    until = args.until_closed or len(socks)
    while len(closed) < until:
        left = args.seconds - (time.monotonic() - start)
        if left <= 0:
            break
        for fd, _ in p.poll(min(left, 1.0) * 1000):
            if fd not in closed:
                closed[fd] = time.monotonic() - born[fd]
                p.unregister(fd)
    after = ",".join(f"{closed[fd]:.1f}" for fd in sorted(closed, key=closed.get))
    print(f"attack-nbd {args.mode}: clients={len(socks)} sent={sent} closed={len(closed)} "
          f"open={len(socks) - len(closed)} closed_after={after or '-'}", flush=True)
    for s in socks:
        s.close()


if __name__ == "__main__":
    main()
