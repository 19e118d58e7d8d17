# SPDX-License-Identifier: MIT
"""A host that speaks the tcp transport's framing (docs/transport-tcp.md)
by hand, so a test decides exactly which frames go out, and when, and what
they acknowledge.  Host memory is only pretended: the target names it by
address and key, and this side answers READ_REQs with whatever it likes."""
import socket
import struct

HELLO, HELLO_ACCEPT, HELLO_REJECT, SEND, WRITE, READ_REQ, READ_RESP, NAK, ACK, ACK_REQ = range(1, 11)
HELLO_MAGIC = 0x5242544350000001
RB_MAGIC = 0x4B4C4252
RB_VERSION = 2  # protocol version 2: authentication (docs/protocol.md)
HDR = struct.Struct("<BBHIIIQQ")
OP_READ, OP_WRITE, OP_FLUSH = 0x01, 0x02, 0x03
OP_CONNECT, OP_KEEPALIVE, OP_DISCONNECT, OP_LIST_EXPORTS = 0x80, 0x81, 0x82, 0x83
SGL_NONE, SGL_KEYED = 0, 1
KEY = 0x77  # any key: this side checks nothing


def capsule(op, cid, length=0, handle=0, offset=0, sgl=SGL_KEYED, addr=0x10000):
    keyed = sgl == SGL_KEYED
    return (struct.pack("<BBHIQII", op, 0, cid, handle, offset, length, 0) +
            struct.pack("<QIIB7x", addr if keyed else 0, length if keyed else 0,
                        KEY if keyed else 0, sgl) + bytes(16))


def connect_req(hostid, export="", nq=1, depth=8, kato_ms=0):
    r = struct.pack("<IHHHHIQ8x", RB_MAGIC, RB_VERSION, nq, depth, 0, kato_ms, 0)
    return (r + hostid.encode().ljust(224, b"\0") + export.encode().ljust(256, b"\0")).ljust(576, b"\0")


class Host:
    def __init__(self, port, qid=0, depth=16, session=0, addr="127.0.0.1", timeout=5,
                 nonce=bytes(32)):
        self.s = socket.create_connection((addr, port))
        self.s.settimeout(timeout)
        self.rx = 0  # SEND + WRITE frames received: our ack
        self.tag = 1
        # rb_cm_req2: magic, version, qid, depth, incapsule, session, host nonce
        cm = struct.pack("<IHHHIQ32s", RB_MAGIC, RB_VERSION, qid, depth, 0, session,
                         nonce)
        self.send_frame(HELLO, cm, addr=HELLO_MAGIC)
        t, _, _, _, payload = self.frame()
        if t != HELLO_ACCEPT:
            raise ConnectionRefusedError(payload)

    def recvn(self, n):
        b = b""
        while len(b) < n:
            c = self.s.recv(n - len(b))
            if not c:
                raise EOFError("connection closed by the target")
            b += c
        return b

    def frame(self, skip_acks=True):
        """Next frame (type, length, tag, addr, payload); ACK/ACK_REQ skipped."""
        while True:
            t, _, _, ln, _, _, tag, addr = HDR.unpack(self.recvn(32))
            payload = b"" if t == READ_REQ else self.recvn(ln)
            if t in (SEND, WRITE):
                self.rx += 1
            if not (skip_acks and t in (ACK, ACK_REQ)):
                return t, ln, tag, addr, payload

    def expect(self, want):
        f = self.frame()
        if f[0] != want:
            raise AssertionError("frame type %d, expected %d" % (f[0], want))
        return f

    def send_frame(self, t, payload=b"", tag=0, ack=None, addr=0, length=None):
        self.s.sendall(HDR.pack(t, 0, 0, len(payload) if length is None else length,
                                self.rx if ack is None else ack, 0, tag, addr) + payload)

    def send(self, payload, ack=None):
        self.send_frame(SEND, payload, tag=self.tag, ack=ack)
        self.tag += 1

    def response(self):
        """The next response capsule: (cid, status, result); WRITEs before it skipped."""
        while True:
            t, _, _, _, payload = self.frame()
            if t == SEND:
                cid, status, _, result = struct.unpack("<HHIQ", payload[:16])
                return cid, status, result
            if t != WRITE:
                raise AssertionError("frame type %d, expected WRITE or SEND" % t)

    def connect(self, hostid, export="", **kw):
        """CONNECT on this admin queue: (status, session id, connect response bytes)."""
        self.send(capsule(OP_CONNECT, 0xC0, 576))
        _, _, rtag, _, _ = self.expect(READ_REQ)
        self.send_frame(READ_RESP, connect_req(hostid, export, **kw), tag=rtag)
        rsp = b""
        while True:
            t, _, _, _, payload = self.frame()
            if t == WRITE:
                rsp = payload
            elif t == SEND:
                _, status, _, result = struct.unpack("<HHIQ", payload[:16])
                return status, result, rsp

    def ack(self):
        self.send_frame(ACK)

    def close(self):
        self.s.close()
