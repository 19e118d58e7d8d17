#!/bin/bash
# One export over tcp on loopback: nbdinfo sees the right size and flags;
# reads, writes, FUA, flush, trim and write-zeroes behave and reach the
# backing file (the target's counters show the datasyncs it performed).
. "$top_srcdir/tests/helpers.sh"
requires nbdinfo python3

port=$(free_port)
truncate -s 64M "$T/disk.img"
write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/disk0" --queues 2
uri=$(nbd_uri ini disk0)

nbdinfo --json "$uri" >"$T/info.json"
python3 - "$T/info.json" <<'PY' || fail "nbdinfo output does not match the export"
import json, sys
info = json.load(open(sys.argv[1]))
e = info["exports"][0]
want = {"export-size": 64 << 20, "is_read_only": False, "can_flush": True, "can_fua": True,
        "can_trim": True, "can_zero": True, "can_multi_conn": True}
bad = {k: e.get(k) for k, v in want.items() if e.get(k) != v}
if bad:
    print("mismatch:", bad, file=sys.stderr)
    sys.exit(1)
if e.get("block_size_minimum") != 512:
    print("block_size_minimum", e.get("block_size_minimum"), file=sys.stderr)
    sys.exit(1)
PY

ops=$top_builddir/tests/nbd-ops
"$ops" "$uri" size:67108864 \
	write:0:65536:a5 read:0:65536:a5 \
	writefua:1048576:4096:5a read:1048576:4096:5a \
	flush \
	write:2097152:131072:77 trim:2097152:131072 read:2097152:131072:00 \
	write:4194304:1048576:33 zero:4194304:1048576 read:4194304:1048576:00 \
	write:8388608:8192:11 zerofua:8388608:8192 read:8388608:8192:00 \
	write:67104768:4096:ee read:67104768:4096:ee \
	nostrict fail:EINVAL:read:67108864:4096 fail:ENOSPC:write:67108864:4096:00 \
	fail:EINVAL:read:100:512 || fail "NBD operations misbehaved"

# The data reached the exported file itself.
python3 - "$T/disk.img" <<'PY' || fail "exported file content is wrong"
import sys
f = open(sys.argv[1], "rb")
def chk(off, n, byte):
    f.seek(off); d = f.read(n)
    assert d == bytes([byte]) * n, (off, n, byte)
chk(0, 65536, 0xa5); chk(1048576, 4096, 0x5a); chk(2097152, 131072, 0)
chk(4194304, 1048576, 0); chk(67104768, 4096, 0xee)
PY

# FLUSH and FUA reached the backing store as datasyncs.
kill -USR1 "$(cat "$T/target.pid")"
wait_until 60 grep -q "stats:" "$T/target.log" || fail "no stats line"
line=$(grep "export disk0 stats:" "$T/target.log" | tail -1)
note "$line"
flushes=$(echo "$line" | sed -n 's/.*flushes=\([0-9]*\).*/\1/p')
fua=$(echo "$line" | sed -n 's/.*fua_writes=\([0-9]*\).*/\1/p')
[ "$flushes" -ge 1 ] || fail "FLUSH did not reach the backend (flushes=$flushes)"
[ "$fua" -ge 1 ] || fail "FUA write did not reach the backend as RWF_DSYNC (fua_writes=$fua)"

# The smallest queues: 16-byte response arrays that are not a whole cache line
# on either side (the sanitizer build checks how they are allocated).
start_initiator tiny "$(target_url "$port")/disk0" --queues 1 --queue-depth 1
"$ops" "$(nbd_uri tiny disk0)" read:0:65536:a5 write:12288:4096:c3 read:12288:4096:c3 ||
	fail "NBD operations on a depth-1 queue misbehaved"
echo "ok"
