# SPDX-License-Identifier: MIT
"""A host that speaks the tcp transport's framing (docs/transport-tcp.md)
by hand, so a test decides exactly which frames go out, and when, and what
they acknowledge.  Host memory is only pretended: the target names it by
address and key, and this side answers READ_REQs with whatever it likes."""
import base64
import hashlib
import hmac
import socket
import struct

HELLO, HELLO_ACCEPT, HELLO_REJECT, SEND, WRITE, READ_REQ, READ_RESP, NAK, ACK, ACK_REQ = range(1, 11)
HELLO_MAGIC = 0x5242544350000001
RB_MAGIC = 0x4B4C4252
RB_VERSION = 2  # protocol version 2: authentication (docs/protocol.md)
HDR = struct.Struct("<BBHIIIQQ")
OP_READ, OP_WRITE, OP_FLUSH = 0x01, 0x02, 0x03
OP_QUEUE_AUTH = 0x06
OP_CONNECT, OP_KEEPALIVE, OP_DISCONNECT, OP_LIST_EXPORTS, OP_AUTH = 0x80, 0x81, 0x82, 0x83, 0x84
SGL_NONE, SGL_KEYED, SGL_INCAPSULE = 0, 1, 2
# Authentication (docs/protocol.md "Authentication (version 2)"): SHA-256,
# no DH; enough for a raw host to authenticate, or to try not to.
S_AUTH_REQUIRED, S_AUTH_FAILED, S_AUTH_OUT_OF_STATE = 18, 19, 22
AUTH_NEGOTIATE, AUTH_CHALLENGE, AUTH_REPLY, AUTH_SUCCESS = 1, 2, 3, 4
AUTH_BUF, AUTH_HOST_HALF = 2208, 1136
AUTH_BIDI = 1
HASH_SHA256 = 1
KEY = 0x77  # any key: this side checks nothing


def capsule(op, cid, length=0, handle=0, offset=0, sgl=SGL_KEYED, addr=0x10000):
    keyed = sgl == SGL_KEYED
    return (struct.pack("<BBHIQII", op, 0, cid, handle, offset, length, 0) +
            struct.pack("<QIIB7x", addr if keyed else 0, length if keyed else 0,
                        KEY if keyed else 0, sgl) + bytes(16))


def connect_req(hostid, export="", nq=1, depth=8, kato_ms=0, replaces=0):
    r = struct.pack("<IHHHHIQ8x", RB_MAGIC, RB_VERSION, nq, depth, 0, kato_ms, replaces)
    return (r + hostid.encode().ljust(224, b"\0") + export.encode().ljust(256, b"\0")).ljust(576, b"\0")


def cm_req2(qid=0, depth=16, session=0, nonce=bytes(32)):
    """rb_cm_req2: magic, version, qid, depth, incapsule, session, host nonce."""
    return struct.pack("<IHHHIQ32s", RB_MAGIC, RB_VERSION, qid, depth, 0, session, nonce)


def key_file(path):
    """The key of a DHHC-1 key file written with --hmac 0 (used as is)."""
    f = open(path).read().strip().split(":")
    assert f[0] == "DHHC-1" and f[1] == "00", "only DHHC-1:00 keys here"
    return base64.b64decode(f[2])[:-4]


def hm(key, *parts):
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def transcript(label, x):
    """T(label) of the admin exchange x (a dict), SHA-256 and no DH."""
    return (label.encode().ljust(16, b"\0") + struct.pack("<HBBBBBBQH", RB_VERSION, HASH_SHA256, 0,
                                                          x["hash_mask"], x["dh_mask"], x["flags"], 0,
                                                          x["session"], 0) +
            x["hostid"].encode().ljust(224, b"\0") + x["export"].encode().ljust(256, b"\0") +
            x["nt"] + x["nh"])


def proof(key, label, x):
    """Rh (label "host proof") or Rt ("target proof") with secret key."""
    return hm(hm(key, b"rdmablk auth key"), transcript(label, x))


def session_key(key, x):
    return hm(hm(key, b"rdmablk auth key"), transcript("session key", x))


def queue_proof(sk, label, session, qid, nh, nt):
    """Phq ("queue host") or Ptq ("queue target")."""
    return hm(sk, label.encode().ljust(16, b"\0") +
              struct.pack("<HBBQH", RB_VERSION, HASH_SHA256, 0, session, qid) + nh + nt)


def negotiate(flags=0, hash_mask=1 << HASH_SHA256, dh_mask=1):
    return struct.pack("<BBBB4xBB6x", AUTH_NEGOTIATE, 0, 0, flags, hash_mask, dh_mask)


def reply(rh, flags=0, nh=bytes(32)):
    return (struct.pack("<BBBB4x", AUTH_REPLY, HASH_SHA256, 0, flags) + nh +
            rh.ljust(64, b"\0") + bytes(8))


class Host:
    def __init__(self, port, qid=0, depth=16, session=0, addr="127.0.0.1", timeout=5,
                 nonce=bytes(32), src=None):
        self.s = socket.create_connection((addr, port), source_address=(src, 0) if src else None)
        self.s.settimeout(timeout)
        self.rx = 0  # SEND + WRITE frames received: our ack
        self.tag = 1
        self.send_frame(HELLO, cm_req2(qid, depth, session, nonce), addr=HELLO_MAGIC)
        t, _, _, _, payload = self.frame()
        if t != HELLO_ACCEPT:
            raise ConnectionRefusedError(payload)
        self.accept = payload  # rb_cm_rep2: nonce at 16, proof at 48

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

    def command(self, cap, buf, base=0x10000, data=b""):
        """Send capsule cap (+ in-capsule data); serve the target's READs
        from and WRITEs into buf (bytearray at base) until the response:
        (status, result), the response acknowledged."""
        self.send(cap + data)
        while True:
            t, ln, tag, addr, payload = self.frame()
            if t == READ_REQ:
                self.send_frame(READ_RESP, bytes(buf[addr - base:addr - base + ln]), tag=tag)
            elif t == WRITE:
                buf[addr - base:addr - base + len(payload)] = payload
            elif t == SEND:
                _, status, _, result = struct.unpack("<HHIQ", payload[:16])
                self.ack()
                return status, result
            else:
                raise AssertionError("frame type %d during a command" % t)

    def auth(self, msg, cid=0xA0):
        """One AUTH command with host message msg: (status, target half)."""
        buf = bytearray(AUTH_BUF)
        buf[:len(msg)] = msg
        st, _ = self.command(capsule(OP_AUTH, cid, AUTH_BUF), buf)
        return st, bytes(buf[AUTH_HOST_HALF:])

    def login(self, hostid, export, key, label="host proof", **kw):
        """CONNECT and the whole exchange, proving with secret key (the
        proof made with label): (status of REPLY, exchange dict with the
        session key "sk" and the grant "grant", raw REPLY message)."""
        st, sid, rsp = self.connect(hostid, export, **kw)
        assert st == 0, "CONNECT status %d" % st
        self.ack()
        assert struct.unpack_from("<I", rsp, 40)[0] == 1, "CONNECT did not ask for the exchange"
        x = dict(hostid=hostid, export=export, session=struct.unpack_from("<Q", rsp)[0],
                 hash_mask=1 << HASH_SHA256, dh_mask=1, flags=0, nh=bytes(32))
        st, t = self.auth(negotiate())
        assert st == 0 and t[0] == AUTH_CHALLENGE and t[1:3] == bytes([HASH_SHA256, 0]), \
            "NEGOTIATE: status %d, message %d" % (st, t[0])
        x["nt"] = t[8:40]
        msg = reply(proof(key, label, x))
        st, t = self.auth(msg, cid=0xA1)
        if st == 0:
            assert t[0] == AUTH_SUCCESS, "REPLY answered with message %d" % t[0]
            x["grant"] = t[72:136]
            x["sk"] = session_key(key, x)
        return st, x, msg

    def queue_auth(self, x, qid, nh, cid=1, proof_bytes=None, handle=None):
        """QUEUE_AUTH on this I/O queue (nh: the nonce of our cm_req2); with
        the session key x["sk"] the target's accept proof is checked first,
        and proof_bytes (else the right proof) is sent: the status."""
        nt, ptq = self.accept[16:48], self.accept[48:80]
        if "sk" in x:
            assert hmac.compare_digest(ptq[:32], queue_proof(
                x["sk"], "queue target", x["session"], qid, nh, nt)), "target queue proof wrong"
        p = proof_bytes if proof_bytes is not None else \
            queue_proof(x["sk"], "queue host", x["session"], qid, nh, nt)
        if handle is None:
            handle = struct.unpack_from("<I", x["grant"], 28)[0]
        cap = (struct.pack("<BBHIQII", OP_QUEUE_AUTH, 0, cid, handle, 0, 64, 0) +
               struct.pack("<QIIB7x", 0, 64, 0, SGL_INCAPSULE) + bytes(16))
        st, _ = self.command(cap, bytearray(0), data=p.ljust(64, b"\0"))
        return st

    def closed(self):
        """True once the target closes the connection (frames before it
        skipped and acknowledged)."""
        try:
            while True:
                self.frame()
                self.ack()
        except (EOFError, ConnectionResetError):
            return True
        except socket.timeout:
            return False

    def ack(self):
        self.send_frame(ACK)

    def close(self):
        self.s.close()
