#!/bin/bash
# A raw host sends malformed, truncated and oversized capsules and garbage
# bytes, while another host's fio verify workload keeps running correctly.
. "$top_srcdir/tests/helpers.sh"
requires fio python3

port=$(free_port)
truncate -s 64M "$T/disk.img" "$T/raw.img"
write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
cat >>"$T/target.conf" <<CONF

[export raw0]
path = $T/raw.img
CONF
start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/disk0" --queues 2
uri=$(nbd_uri ini disk0)

fio --name=good --ioengine=nbd --uri="$uri" --rw=randwrite --bs=4k --iodepth=8 --size=32M \
	--verify=crc32c --verify_fatal=1 --output="$T/fio.log" &
fio_pid=$!

"$top_builddir/tests/rawclient" "$E2E_TRANSPORT" "$E2E_ADDR" "$port" raw0 >"$T/rawclient.log" 2>&1 ||
	{ cat "$T/rawclient.log"; fail "raw client checks failed"; }
grep -c '^ok' "$T/rawclient.log" | sed 's/^/# raw client checks passed: /'

# Garbage that is not even transport framing, a silent peer, and a peer that
# sends half a frame header then vanishes (tcp: a byte stream anyone can open).
[ "$E2E_TRANSPORT" != tcp ] || python3 - "$port" <<'PY'
import os, socket, sys, time
port = int(sys.argv[1])
for payload in (os.urandom(4096), b"", b"\x01\x00\x00"):
    s = socket.create_connection(("127.0.0.1", port))
    if payload:
        s.sendall(payload)
    s.settimeout(5)
    try:
        while s.recv(4096):
            pass
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
PY

wait $fio_pid || { cat "$T/fio.log"; fail "the well-behaved host's I/O failed"; }
kill -0 "$(cat "$T/target.pid")" || fail "target died"
"$top_builddir/tests/nbd-ops" "$uri" write:0:4096:99 read:0:4096:99 || fail "target stopped serving"
grep -q "rejected" "$T/target.log" || fail "target logged no rejected capsules"
grep -E "rejected|closing" "$T/target.log" | head -5
echo "ok"
