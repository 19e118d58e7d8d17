#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""NBD I/O for the hostile-target tests: N requests, READ and WRITE in turn,
one at a time, on the initiator's NBD socket; prints how they ended:
  evil-io: ok=N eio=N other=N closed=0 seconds=S
A reply that does not come within --reply-timeout is a failure (exit 1):
the initiator must fail or finish every request, never hang."""
import argparse
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbdraw import CMD_READ, CMD_WRITE, attach, recvall, reply, request  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("sock")
ap.add_argument("count", type=int)
ap.add_argument("--reply-timeout", type=float, default=90)
args = ap.parse_args()

s = attach(args.sock, timeout=args.reply_timeout)
res = dict(ok=0, eio=0, other=0)
start = time.monotonic()
try:
    for i in range(args.count):
        if i % 2:
            request(s, CMD_WRITE, i, 4096 * (i % 64), 4096)
            s.sendall(bytes(4096))
        else:
            request(s, CMD_READ, i, 4096 * (i % 64), 4096)
        err, h = reply(s)
        assert h == i, f"reply for handle {h}, expected {i}"
        if err == 0 and i % 2 == 0:
            recvall(s, 4096)
        res["ok" if err == 0 else "eio" if err == 5 else "other"] += 1
except socket.timeout:
    sys.exit(f"evil-io: request {i} not answered within {args.reply_timeout} s: {res}")
print("evil-io: " + " ".join(f"{k}={v}" for k, v in res.items()) +
      f" seconds={time.monotonic() - start:.1f}", flush=True)
