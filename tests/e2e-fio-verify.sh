#!/bin/bash
# fio through fio's nbd engine: random writes with crc32c verify headers from
# several jobs (one NBD connection each) over several queues, then a separate
# verify-only read pass; then the exported file matches the NBD view.
. "$top_srcdir/tests/helpers.sh"
requires fio nbdcopy

port=$(free_port)
truncate -s 64M "$T/disk.img"
write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/disk0" --queues 3 --queue-depth 32
uri=$(nbd_uri ini disk0)

# Each job owns a disjoint 16 MiB region so verify is exact.
common=(--ioengine=nbd --uri="$uri" --direct=1 --size=16M --numjobs=1
	--verify=crc32c --verify_fatal=1 --group_reporting)
for j in 0 1 2 3; do
	fio --name=w$j --rw=randwrite --bsrange=4k-64k --iodepth=16 --offset=$((j * 16))M \
		--do_verify=0 "${common[@]}" --output="$T/fio-w$j.log" &
	echo $! >"$T/fio$j.pid"
done
for j in 0 1 2 3; do
	wait "$(cat "$T/fio$j.pid")" || { cat "$T/fio-w$j.log"; fail "fio write job $j failed"; }
done
for j in 0 1 2 3; do
	fio --name=w$j --rw=randwrite --bsrange=4k-64k --iodepth=16 --offset=$((j * 16))M \
		--verify_only "${common[@]}" --output="$T/fio-v$j.log" ||
		{ cat "$T/fio-v$j.log"; fail "fio verify of region $j failed"; }
done
grep -h "err=" "$T"/fio-v*.log | head -4
nbdcopy "$uri" "$T/back.img" || fail "nbdcopy out failed"
cmp "$T/disk.img" "$T/back.img" || fail "exported file differs from the NBD view"
echo "ok"
