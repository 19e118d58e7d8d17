#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the target's RDMA device is removed (rdma link delete) while a session is up.
#   - the removal completes within seconds: the target frees everything it held on the
#     device (the kernel waits for that), and nothing stays in D state; so does a second
#     target, on a wildcard address, whose only session ended before: no CM event tells it,
#     its once-a-second rescan must find the device gone;
#   - the target stays up and says what happened; the initiator's I/O fails with EIO
#     instead of hanging;
#   - once the device is back (rdma link add), the target listens again by itself and a new
#     initiator, attached as /dev/ublkbN, reads the data written before the removal; a third
#     initiator, with --ctrl-loss-tmo, reconnected by itself meanwhile and reads it too;
#   - then the initiators' device is removed: both initiators (the ublk one with a live
#     session, the NBD one whose session died in step 1) free what they hold on it, so that
#     removal completes too; I/O on /dev/ublkbN fails with EIO, and SIGTERM still ends both
#     cleanly, the ublk device gone.
# vm-timeout: 240
. "$(dirname "$0")/lib.sh"

TGT_BIN=$top_builddir/target/rdmablk-target
INI_BIN=$top_builddir/initiator/rdmablk-initiator
NBD_OPS=$top_builddir/tests/nbd-ops
TGT_PID= TGT2_PID= INI_PID= INI2_PID= RINI_PID= DEL_PID=

fail() {
	echo "FAIL: $*"
	for f in target.log target2.log ini.log ini2.log rini.log; do
		[ -s "$f" ] && { echo "---- $f"; tail -n 25 "$f"; }
	done
	[ -z "$DEL_PID" ] || sed 's/^/# stuck removal: /' "/proc/$DEL_PID/stack" 2>/dev/null
	exit 1
}

# The daemons go first, whatever happened: a removal stuck on them then completes.
cleanup() {
	rc=$?
	for p in $RINI_PID $INI2_PID $INI_PID $TGT2_PID $TGT_PID; do
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	[ -z "$DEL_PID" ] || wait "$DEL_PID" 2>/dev/null
	exit "$rc"
}
trap cleanup EXIT

alive() { kill -0 "$1" 2>/dev/null; }
gone() { ! kill -0 "$1" 2>/dev/null; }
log_has() { grep -q "$2" "$1"; }

setup_rxe
vm_modprobe ublk_drv
truncate -s 16M disk.img
cat >target.conf <<C
[target]
listen = rdma://$TGT_ADDR:4520
threads = 2
[export disk0]
path = $PWD/disk.img
C
$TGT_BIN --config target.conf >target.log 2>&1 &
TGT_PID=$!
vm_wait_for 60 log_has target.log "ready:" || fail "target not ready"

$INI_BIN "rdma://$TGT_ADDR:4520/disk0" --nbd-socket "$PWD/a.sock" --queues 2 --timeout 5000 \
	>ini.out 2>ini.log &
INI_PID=$!
vm_wait_for 60 test -S a.sock || fail "initiator not ready"
A="nbd+unix:///disk0?socket=$PWD/a.sock"
$NBD_OPS "$A" write:0:65536:5a write:1048576:4096:a5 flush read:0:65536:5a ||
	fail "I/O before the removal"
# The reconnecting one.
$INI_BIN "rdma://$TGT_ADDR:4520/disk0" --nbd-socket "$PWD/r.sock" --queues 2 \
	--ctrl-loss-tmo 90000 --reconnect-delay 1000 >rini.out 2>rini.log &
RINI_PID=$!
vm_wait_for 60 test -S r.sock || fail "reconnecting initiator not ready"
R="nbd+unix:///disk0?socket=$PWD/r.sock"
$NBD_OPS "$R" read:0:65536:5a || fail "I/O through the reconnecting initiator"

# The second target: one session over rxe0 that ends, leaving its reactor's CQ and buffer
# registrations on the device with no connection (and so no CM event) left to report.
truncate -s 1M disk2.img
cat >target2.conf <<C
[target]
listen = rdma://0.0.0.0:4521
threads = 1
[export disk1]
path = $PWD/disk2.img
C
$TGT_BIN --config target2.conf >target2.log 2>&1 &
TGT2_PID=$!
vm_wait_for 60 log_has target2.log "ready:" || fail "second target not ready"
$INI_BIN "rdma://$TGT_ADDR:4521/disk1" --nbd-socket "$PWD/c.sock" --queues 1 >ini3.out 2>ini3.log &
p=$!
vm_wait_for 60 test -S c.sock || fail "initiator of the second target not ready"
$NBD_OPS "nbd+unix:///disk1?socket=$PWD/c.sock" write:0:4096:11 read:0:4096:11 ||
	fail "I/O on the second target"
kill -TERM "$p" && wait "$p" || fail "initiator of the second target: SIGTERM"
closed2() { [ "$(grep -c 'closing' target2.log)" -ge 2 ]; }
vm_wait_for 60 closed2 || fail "the second target did not close the ended session's queues"

# 1. Remove the target's device: this must finish, with both daemons still up.
start=$(date +%s)
rdma link delete "$TGT_DEV" &
DEL_PID=$!
vm_wait_for 60 gone "$DEL_PID" ||
	fail "rdma link delete $TGT_DEV still blocked after 20 s: the target holds the device"
wait "$DEL_PID" || fail "rdma link delete $TGT_DEV failed"
DEL_PID=
echo "# rdma link delete $TGT_DEV took $(($(date +%s) - start)) s"
alive "$TGT_PID" || fail "target died when its device was removed"
alive "$INI_PID" || fail "initiator died when the target's device was removed"
log_has target.log "device $TGT_DEV was removed" || fail "target did not log the removal"
vm_wait_for 60 log_has target.log "released everything held on removed device $TGT_DEV" ||
	fail "target did not release the device"
log_has target.log "listener $TGT_ADDR:4520: its RDMA device was removed" ||
	fail "target did not log that its listener lost the device"
alive "$TGT2_PID" || fail "the second target died when the device was removed"
log_has target2.log "device $TGT_DEV was removed (no longer listed)" ||
	fail "the second target's rescan did not notice the removal"
log_has target2.log "released everything held on removed device $TGT_DEV" ||
	fail "the second target did not release the device"
vm_no_dstate || fail "a process is in D state after the removal"

# 2. The old session's I/O fails, promptly.
timeout 30 $NBD_OPS "$A" fail:EIO:read:0:4096 || fail "I/O on the lost session did not fail with EIO"

# 3. The device comes back: the target listens again, and the data is there.
rdma link add "$TGT_DEV" type rxe netdev "$TGT_IF" || fail "rdma link add $TGT_DEV again"
vm_wait_for 60 _vm_rdma_ready || fail "$TGT_DEV not active again"
vm_wait_for 60 log_has target.log "listening again on $TGT_ADDR:4520" ||
	fail "target did not listen again once $TGT_DEV was back"
vm_wait_for 60 log_has rini.log "re-established" ||
	fail "the initiator with --ctrl-loss-tmo did not reconnect once the target listened again"
$NBD_OPS "$R" read:0:65536:5a read:1048576:4096:a5 write:3145728:4096:3c read:3145728:4096:3c ||
	fail "I/O through the reconnected session"
$INI_BIN "rdma://$TGT_ADDR:4520/disk0" --ublk --queues 2 >ini2.out 2>ini2.log &
INI2_PID=$!
vm_wait_for 60 grep -q "^attached /dev/ublkb" ini2.out ||
	fail "a new initiator could not attach after the device came back"
UDEV=$(sed -n 's/^attached //p' ini2.out)
# only_byte DEV OFF LEN HEX: the LEN bytes at OFF read with O_DIRECT are all HEX.
only_byte() {
	n=$(dd if="$1" bs=4096 skip=$(($2 / 4096)) count=$(($3 / 4096)) iflag=direct 2>/dev/null |
		od -An -v -tx1 | tr -s ' \n' '\n\n' | grep -v -e '^$' -e "^$4\$" | wc -l)
	[ "$n" = 0 ] && [ "$(dd if="$1" bs=4096 skip=$(($2 / 4096)) count=$(($3 / 4096)) \
		iflag=direct 2>/dev/null | wc -c)" = "$3" ]
}
only_byte "$UDEV" 0 65536 5a && only_byte "$UDEV" 1048576 4096 a5 ||
	fail "$UDEV does not read back the data written before the removal"
printf '\303%.0s' $(seq 4096) | dd of="$UDEV" bs=4096 seek=512 oflag=direct 2>/dev/null &&
	only_byte "$UDEV" 2097152 4096 c3 || fail "write and read back on $UDEV"
alive "$TGT_PID" || fail "target died"

# 4. Remove the initiators' device.
start=$(date +%s)
rdma link delete "$INI_DEV" &
DEL_PID=$!
vm_wait_for 60 gone "$DEL_PID" ||
	fail "rdma link delete $INI_DEV still blocked after 20 s: an initiator holds the device"
wait "$DEL_PID" || fail "rdma link delete $INI_DEV failed"
DEL_PID=
echo "# rdma link delete $INI_DEV took $(($(date +%s) - start)) s"
for p in "$INI_PID" "$INI2_PID" "$RINI_PID"; do
	alive "$p" || fail "an initiator died when its device was removed"
done
for f in ini.log ini2.log; do
	log_has "$f" "device $INI_DEV was removed" || fail "$f: the removal is not logged"
	log_has "$f" "released the rdma completion queue and registrations on a removed device" ||
		fail "$f: the initiator did not say it released the device"
done
vm_no_dstate || fail "a process is in D state after the initiators' device was removed"
timeout 30 dd if="$UDEV" of=/dev/null bs=4096 count=1 iflag=direct 2>dd.err
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "Input/output error" dd.err ||
	fail "a read of $UDEV whose device is gone did not fail with EIO (dd exit $rc: $(cat dd.err))"
# The reconnecting initiator freed the device too, and keeps trying.
log_has rini.log "given up" && fail "the reconnecting initiator gave up early"
for p in "$INI2_PID" "$INI_PID" "$RINI_PID"; do
	kill -TERM "$p"
	vm_wait_for 60 gone "$p" || fail "initiator $p did not exit on SIGTERM after the removal"
	wait "$p" || fail "initiator $p exited with status $? after SIGTERM"
done
INI_PID= INI2_PID= RINI_PID=
vm_wait_for 60 test ! -e "$UDEV" || fail "$UDEV still present after its initiator exited"
alive "$TGT_PID" || fail "target died"
echo "PASS: both removals completed; the daemons released the devices, kept running and stopped cleanly"
