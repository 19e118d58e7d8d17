#!/bin/bash
# nbdcopy random data in through the NBD export and back out again: identical,
# and identical to the exported file byte for byte.
. "$top_srcdir/tests/helpers.sh"
requires nbdcopy

port=$(free_port)
truncate -s 48M "$T/disk.img"
head -c 48M /dev/urandom >"$T/random.img"
write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/disk0" --queues 2
uri=$(nbd_uri ini disk0)

nbdcopy --connections=2 --requests=16 "$T/random.img" "$uri" || fail "nbdcopy in failed"
nbdcopy --connections=2 "$uri" "$T/back.img" || fail "nbdcopy out failed"
cmp "$T/random.img" "$T/back.img" || fail "data read back differs"
cmp "$T/random.img" "$T/disk.img" || fail "exported file differs"
echo "ok"
