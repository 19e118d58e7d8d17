#!/bin/bash
# SIGTERM to the target while I/O is in flight: it drains and exits 0; the
# initiator's SIGTERM also exits 0.  Both announce themselves to systemd.
. "$top_srcdir/tests/helpers.sh"
requires fio

port=$(free_port)
truncate -s 32M "$T/disk.img"
write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/disk0" --queues 2
uri=$(nbd_uri ini disk0)

# Initiator first: a clean detach while idle.
stop_and_status "$T/ini.pid"
[ "$stop_rc" -eq 0 ] || fail "initiator exited $stop_rc on SIGTERM"
grep -q "export disk0 (" "$T/target.log" || fail "no session logged"

start_initiator ini2 "$(target_url "$port")/disk0" --queues 2
uri=$(nbd_uri ini2 disk0)
fio --name=load --ioengine=nbd --uri="$uri" --rw=randwrite --bs=64k --iodepth=16 \
	--time_based --runtime=20 --size=32M --output="$T/fio.log" &
fio_pid=$!
sleep 2
stop_and_status "$T/target.pid"
[ "$stop_rc" -eq 0 ] || fail "target exited $stop_rc on SIGTERM"
grep -q "draining" "$T/target.log" || fail "target did not log draining"
grep -q "stopped" "$T/target.log" || fail "target did not finish stopping"
wait $fio_pid || true
echo "ok"
