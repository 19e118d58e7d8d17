#!/bin/bash
# The target dies (SIGKILL) under I/O: pending and later NBD requests fail with
# an error within the command timeout instead of hanging.  A target that stops
# answering while an initiator attaches fails the attach, promptly and clearly.
. "$top_srcdir/tests/helpers.sh"
requires fio timeout

port=$(free_port)
truncate -s 64M "$T/disk.img"
write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/disk0" --queues 2 --timeout 3000
uri=$(nbd_uri ini disk0)

timeout 60 fio --name=load --ioengine=nbd --uri="$uri" --rw=randrw --bs=64k --iodepth=16 \
	--time_based --runtime=30 --size=64M --output="$T/fio.log" &
fio_pid=$!
sleep 2
kill -KILL "$(cat "$T/target.pid")"
start=$(date +%s)
rc=0
wait $fio_pid || rc=$?
took=$(($(date +%s) - start))
note "fio exited $rc after ${took}s"
[ "$rc" -ne 0 ] || fail "fio did not see an error after the target died"
[ "$rc" -ne 124 ] || fail "fio hung until timeout(1) killed it"
[ "$took" -le 20 ] || fail "errors took ${took}s to surface"

# A request issued after the death also fails promptly.
rc=0
timeout 20 "$top_builddir/tests/nbd-ops" "$uri" hang:read:0:4096 || rc=$?
[ "$rc" -eq 0 ] || fail "new request after target death did not fail cleanly (rc=$rc)"

# Frozen before the initiator comes: the kernel still completes the TCP
# handshake, nothing answers after it.
start_target "$T/target.conf" frozen
kill -STOP "$(cat "$T/frozen.pid")"
rc=0
timeout 60 "$INITIATOR_BIN" "$(target_url "$port")/disk0" --timeout 2000 --connect-timeout 2000 \
	--nbd-socket "$T/late.sock" >"$T/late.log" 2>&1 || rc=$?
kill -CONT "$(cat "$T/frozen.pid")"
note "attach to a frozen target: exit $rc; $(grep -v '^<6>' "$T/late.log" | tail -2)"
[ "$rc" -ne 0 ] || fail "the initiator attached to a frozen target"
[ "$rc" -ne 124 ] || fail "the attach to a frozen target hung"
grep -qE "timed out|no answer" "$T/late.log" || fail "the failed attach does not say why: $(cat "$T/late.log")"
grep -q "restart the initiator" "$T/late.log" &&
	fail "a failed attach talks of a lost session: $(cat "$T/late.log")"
echo "ok"
