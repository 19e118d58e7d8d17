#!/bin/bash
# Each I/O queue keeps one in-capsule buffer per credit, from a pool of
# 4 x buffers per reactor.  A queue that finds too few left must still
# connect, without in-capsule writes (its writes go by RDMA READ), not be
# refused as "out of resources".  buffers = 4: 16 in-capsule buffers, all
# taken by the first initiator's depth-16 queue.
. "$top_srcdir/tests/helpers.sh"

port=$(free_port)
truncate -s 16M "$T/disk.img"
TARGET_THREADS=1 TARGET_EXTRA="buffers = 4" \
	write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"
url="$(target_url "$port")/disk0"

start_initiator a "$url" --queues 1 --queue-depth 16
grep -q "queue 1 connected .*in-capsule 8192" "$T/a.log" ||
	fail "the first queue should get in-capsule writes: $(grep 'queue 1' "$T/a.log")"
start_initiator b "$url" --queues 1 --queue-depth 16
grep -q "queue 1 connected .*in-capsule 0," "$T/b.log" ||
	fail "the second queue should connect without in-capsule writes: $(grep 'queue 1' "$T/b.log")"
grep -q "queue 1: 0 of the reactor's 16 in-capsule buffers free, 16 needed" "$T/target.log" ||
	fail "the target did not say why the queue got no in-capsule writes"
# Small writes through both: a by in-capsule data, b by RDMA READ.
"$top_builddir/tests/nbd-ops" "$(nbd_uri a disk0)" "write:0:4096:1" "read:0:4096:1" ||
	fail "I/O through the first initiator failed"
"$top_builddir/tests/nbd-ops" "$(nbd_uri b disk0)" "write:8192:4096:2" "read:8192:4096:2" \
	"read:0:4096:1" || fail "I/O through the second initiator failed"
echo "ok"
