#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A hostile rdmablk target on the tcp transport, for the initiator's tests
and the bench.  It speaks the target side of docs/transport-tcp.md and
docs/protocol.md by hand (frame helpers from tests/tcphost.py): HELLO,
CONNECT (no authentication), keep-alive, I/O -- and then misbehaves.

  evil-target.py PORT MODE [--seconds S] [--size BYTES]

MODE (what it does to the I/O queues, unless said otherwise)
  normal        answers everything correctly (a baseline)
  unknown-cid   answers each command with a response for a command id that
                is not outstanding
  duplicate     answers each command, then sends the same response again
  resp-flood    answers each command, then floods responses for made-up ids
                (more SENDs than the initiator posted receives)
  write-flood   answers nothing; floods RDMA WRITEs into each READ's buffer
  bad-readreq   for each WRITE asks for data outside the buffer it was
                given (beyond its end, then with a wrong key), answers nothing
  readreq-flood for each WRITE floods READ_REQs for its buffer and stops
                reading the socket, so the initiator's READ responses pile up
  silent-hello  accepts TCP connections and never answers their HELLO
  silent-connect  accepts the admin queue and never answers CONNECT
  silent-reconnect  breaks the session at the first I/O command (a response
                for an unknown id), then never answers a reconnect's CONNECT
  silent-io     acknowledges I/O commands and never answers them
  silent-ka     answers I/O, never answers a keep-alive
  fail-io       answers every I/O command with IO_ERROR

It serves until killed, or --seconds.  The last line sums up what it did:
  evil-target MODE: connections=N commands=N responses=N bogus=N ...
"""
import argparse
import os
import signal
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tcphost import (ACK, ACK_REQ, HDR, HELLO, HELLO_ACCEPT, HELLO_MAGIC,  # noqa: E402
                     NAK, OP_CONNECT, OP_DISCONNECT, OP_KEEPALIVE, OP_READ, OP_WRITE,
                     RB_MAGIC, RB_VERSION, READ_REQ, READ_RESP, SEND, SGL_KEYED, WRITE)

CAP = struct.Struct("<BBHIQII")  # opcode, flags, cid, handle, offset, length, rsvd
SGL = struct.Struct("<QIIB7x")  # addr, length, key, type
RSP = struct.Struct("<HHIQ")
CM_REQ2 = struct.Struct("<IHHHIQ32s")
S_IO_ERROR = 6
BLOCK = 4096
MAX_TRANSFER = 128 << 10

stats = dict(connections=0, commands=0, responses=0, bogus=0, writes=0, read_reqs=0)
stats_lock = threading.Lock()


def count(key, n=1):
    with stats_lock:
        stats[key] += n


class Conn:
    def __init__(self, sock, args):
        self.s = sock
        self.args = args
        self.rx = 0  # SEND + WRITE frames received: our ack
        self.tag = 1
        self.reads = {}  # READ_REQ tag -> capsule fields
        self.qid = 0
        self.depth = 0

    def recvn(self, n):
        b = bytearray()
        while len(b) < n:
            c = self.s.recv(n - len(b))
            if not c:
                raise EOFError
            b += c
        return bytes(b)

    def send_frame(self, t, payload=b"", tag=0, addr=0, rkey=0, length=None):
        self.s.sendall(HDR.pack(t, 0, 0, len(payload) if length is None else length,
                                self.rx, rkey, tag, addr) + payload)

    def next_tag(self):
        self.tag += 1
        return self.tag

    def respond(self, cid, status=0, result=0):
        self.send_frame(SEND, RSP.pack(cid, status, 0, result), tag=self.next_tag())
        count("responses")

    def frame(self):
        t, _, _, ln, _, _, tag, addr = HDR.unpack(self.recvn(32))
        payload = b"" if t == READ_REQ else self.recvn(ln)
        if t in (SEND, WRITE):
            self.rx += 1
        if t == ACK_REQ:
            self.send_frame(ACK)
        if t == NAK:
            raise EOFError
        return t, ln, tag, addr, payload

    def run(self):
        h = HDR.unpack(self.recvn(32))
        if h[0] != HELLO or h[7] != HELLO_MAGIC:
            return
        magic, version, qid, depth, _, session, _ = CM_REQ2.unpack(self.recvn(h[3])[:54])
        if self.args.mode == "silent-hello":
            while self.recvn(1):
                pass
        self.qid, self.depth = qid, depth
        rep = struct.pack("<IHHII32s64s", RB_MAGIC, RB_VERSION, depth, 0, 0, bytes(32), bytes(64))
        self.s.sendall(HDR.pack(HELLO_ACCEPT, 0, 0, len(rep), 0, 0, 0, HELLO_MAGIC) + rep)
        count("connections")
        if qid == 0 and self.args.mode == "silent-connect":
            # Read (so the initiator's sends complete at the socket), never answer.
            while self.recvn(1):
                pass
        while True:
            t, ln, tag, addr, payload = self.frame()
            if t == SEND:
                self.command(payload)
            elif t == READ_RESP:
                self.read_resp(tag)

    # ---- admin -------------------------------------------------------------

    def admin(self, op, cid, sgl_addr, sgl_key):
        if op == OP_CONNECT:
            tag = self.next_tag()
            self.send_frame(READ_REQ, tag=tag, addr=sgl_addr, rkey=sgl_key, length=512)
            while True:
                t, ln, rtag, _, payload = self.frame()
                if t == READ_RESP and rtag == tag:
                    break
            nq, depth = struct.unpack_from("<HH", payload, 6)
            replaces = struct.unpack_from("<Q", payload, 16)[0]
            if replaces and self.args.mode == "silent-reconnect":
                return  # the reconnect's CONNECT: never answered
            sid = 0x5EED0000 + stats["connections"]
            rsp = struct.pack("<QQIIIIHHII20x", sid, self.args.size, BLOCK, MAX_TRANSFER,
                              0x02, 1, nq, depth, BLOCK, 0)
            self.send_frame(WRITE, rsp, tag=self.next_tag(), addr=sgl_addr + 512, rkey=sgl_key)
            self.respond(cid, 0, sid)
        elif op == OP_KEEPALIVE:
            if self.args.mode != "silent-ka":
                self.respond(cid)
        elif op == OP_DISCONNECT:
            self.respond(cid)
        else:
            self.respond(cid, 1)

    # ---- I/O ---------------------------------------------------------------

    def command(self, cap):
        op, _, cid, _, off, length, _ = CAP.unpack_from(cap)
        addr, _, key, sgl = SGL.unpack_from(cap, 24)
        count("commands")
        if self.qid == 0:
            self.admin(op, cid, addr, key)
            return
        mode = self.args.mode
        if mode == "silent-io":
            self.send_frame(ACK)
            return
        if mode == "fail-io":
            self.respond(cid, S_IO_ERROR)
            return
        if mode in ("unknown-cid", "silent-reconnect"):
            # Outstanding ids are below the depth: this one never is.
            self.respond((cid + self.depth) & 0xFFFF)
            count("bogus")
            return
        if mode == "write-flood" and op == OP_READ:
            end = time.monotonic() + self.args.seconds
            chunk = bytes(min(length, 64 << 10))
            while time.monotonic() < end:
                self.send_frame(WRITE, chunk, tag=self.next_tag(), addr=addr, rkey=key)
                count("writes")
            return
        if op == OP_WRITE and sgl == SGL_KEYED and mode == "bad-readreq":
            # Past the end of the buffer, then the right place with a wrong key.
            self.send_frame(READ_REQ, tag=self.next_tag(), addr=addr + (1 << 30), rkey=key,
                            length=length)
            self.send_frame(READ_REQ, tag=self.next_tag(), addr=addr, rkey=key ^ 0x5A5A0000,
                            length=length)
            count("bogus", 2)
            return
        if op == OP_WRITE and sgl == SGL_KEYED and mode == "readreq-flood":
            end = time.monotonic() + self.args.seconds
            self.s.settimeout(1)
            while time.monotonic() < end:
                try:
                    self.send_frame(READ_REQ, tag=self.next_tag(), addr=addr, rkey=key,
                                    length=length)
                except socket.timeout:
                    continue
                count("read_reqs")
            return
        if op == OP_WRITE and sgl == SGL_KEYED:
            tag = self.next_tag()
            self.reads[tag] = cid
            self.send_frame(READ_REQ, tag=tag, addr=addr, rkey=key, length=length)
            return
        if op == OP_READ:
            self.send_frame(WRITE, bytes(length), tag=self.next_tag(), addr=addr, rkey=key)
        self.answer(cid)

    def read_resp(self, tag):
        cid = self.reads.pop(tag, None)
        if cid is not None:
            self.answer(cid)

    def answer(self, cid):
        self.respond(cid)
        mode = self.args.mode
        if mode == "duplicate":
            self.respond(cid)
            count("bogus")
        elif mode == "resp-flood":
            for i in range(4 * max(self.depth, 1) + 64):
                self.respond((cid + 1 + i) & 0xFFFF)
                count("bogus")


def serve(c):
    try:
        c.run()
    except (EOFError, OSError):
        pass
    finally:
        c.s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("port", type=int)
    ap.add_argument("mode", choices=("normal", "unknown-cid", "duplicate", "resp-flood",
                                     "write-flood", "bad-readreq", "readreq-flood",
                                     "silent-hello", "silent-connect", "silent-reconnect",
                                     "silent-io",
                                     "silent-ka", "fail-io"))
    ap.add_argument("--seconds", type=float, default=3600)
    ap.add_argument("--size", type=int, default=16 << 20)
    ap.add_argument("--addr", default="127.0.0.1")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))

    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((args.addr, args.port))
    ls.listen(64)
    ls.settimeout(0.5)
    print(f"evil-target {args.mode}: listening on {args.addr}:{args.port}", flush=True)
    end = time.monotonic() + args.seconds
    try:
        while time.monotonic() < end:
            try:
                s, _ = ls.accept()
            except socket.timeout:
                continue
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=serve, args=(Conn(s, args),), daemon=True).start()
    except KeyboardInterrupt:
        pass
    finally:
        with stats_lock:
            print(f"evil-target {args.mode}: " + " ".join(f"{k}={v}" for k, v in stats.items()),
                  flush=True)


if __name__ == "__main__":
    main()
