#!/bin/bash
# incapsule = 0 ("never", conf/target.conf): the target starts, grants no
# in-capsule data, and small writes go by RDMA READ instead.
. "$top_srcdir/tests/helpers.sh"

port=$(free_port)
truncate -s 16M "$T/disk.img"
TARGET_EXTRA="incapsule = 0" write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/disk0" --queues 2
grep -q "queue 1 connected (.*in-capsule 0," "$T/target.log" || fail "in-capsule data granted"
"$top_builddir/tests/nbd-ops" "$(nbd_uri ini disk0)" write:0:512:a5 write:4096:4096:5a \
	read:0:512:a5 read:4096:4096:5a || fail "I/O without in-capsule data failed"
echo "ok"
