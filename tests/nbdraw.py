# A raw NBD client for the shell tests: fixed newstyle handshake over a
# Unix socket, then requests written by hand, so a test can misbehave at
# will (never read replies, stop in the middle of a payload, hang up).
import socket
import struct

CMD_READ, CMD_WRITE = 0, 1
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698


def recvall(s, n):
    b = b""
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            raise EOFError
        b += d
    return b


def attach(path, timeout=10):
    """Connect and NBD_OPT_GO to the default export; returns the socket."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.settimeout(timeout)
    return handshake(s)


def handshake(s):
    """The same on a socket already connected."""
    recvall(s, 18)
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
    s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 6) + struct.pack(">IH", 0, 0))
    while True:
        _, _, t, l = struct.unpack(">QIII", recvall(s, 20))
        recvall(s, l)
        if t == 1:  # NBD_REP_ACK
            return s
        assert not t & 0x80000000, hex(t)


def request(s, cmd, handle, off, length, flags=0):
    s.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, flags, cmd, handle, off, length))


def reply(s):
    """(error, handle) of the next simple reply; its data is the caller's."""
    magic, err, handle = struct.unpack(">IIQ", recvall(s, 16))
    assert magic == SIMPLE_REPLY_MAGIC, hex(magic)
    return err, handle
