#!/bin/bash
# A read-only export refuses writes, trims and zeroes with EPERM and leaves the
# file untouched; reads work.
. "$top_srcdir/tests/helpers.sh"
requires nbdinfo sha256sum

port=$(free_port)
head -c 8M /dev/zero | tr '\0' k >"$T/disk.img" # every byte 0x6b
before=$(sha256sum <"$T/disk.img")
write_target_conf "$T/target.conf" "$port" ro0 "$T/disk.img" "read-only = yes"
start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/ro0"
uri=$(nbd_uri ini ro0)

nbdinfo "$uri" | grep -q "is_read_only: true" || fail "export not shown read-only"
"$top_builddir/tests/nbd-ops" "$uri" flag:is_read_only:1 read:0:65536:6b ||
	fail "read from read-only export failed"
# libnbd refuses writes to a read-only export itself; nostrict makes it send them.
"$top_builddir/tests/nbd-ops" "$uri" nostrict fail:EPERM:write:0:4096:ff \
	fail:EPERM:trim:0:4096 fail:EPERM:zero:0:4096 read:0:65536:6b ||
	fail "writes not refused with EPERM"
after=$(sha256sum <"$T/disk.img")
[ "$before" = "$after" ] || fail "read-only export was modified"
echo "ok"
