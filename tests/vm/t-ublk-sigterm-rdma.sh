#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: SIGTERM with the device busy. (1) Under a fio load the initiator stops the
# device (the driver drains in-flight requests, then fails new ones), exits 0 within a bounded
# time, the device is gone and fio ends with errors instead of hanging. (2) With a mounted
# filesystem the initiator still exits promptly: the block device disappears at once, the
# kernel frees the rest at the unmount, and nothing is left in D state.
# Transport from the name (see ublk-lib.sh): t-ublk-sigterm-rdma.sh rdma, -tcp.sh tcp.
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ublk-lib.sh"

vm_requires fio mkfs.ext4 mount umount timeout
ublk_setup
truncate -s 64M disk.img
ublk_start_target "$PWD/disk.img"

# (1) busy
ublk_attach --queues 2 --queue-depth 16
timeout -k 5 120 fio --name=busy --filename="$UBLK_DEV" --ioengine=libaio --direct=1 \
	--rw=randrw --bs=32k --iodepth=32 --numjobs=2 --time_based --runtime=100 \
	--output=fio.log 2>fio.err &
fio_pid=$!
sleep 4
_ublk_alive "$fio_pid" || { cat fio.log; ublk_fail "fio ended before the SIGTERM"; }
ublk_detach 30
rc=0
wait "$fio_pid" || rc=$?
echo "# fio exited $rc after the detach: $(grep -h -m1 'err=' fio.log | sed 's/^ *//')"
[ "$rc" != 124 ] && [ "$rc" != 137 ] || ublk_fail "fio hung after the device went away"
[ "$rc" != 0 ] || ublk_fail "fio saw no error although the device went away under it"
ublk_check_no_dstate

# (2) mounted
ublk_attach --queues 1 --queue-depth 16
mkfs.ext4 -q -F "$UBLK_DEV" || ublk_fail "mkfs.ext4"
mkdir -p mnt
mount "$UBLK_DEV" mnt || ublk_fail "mount"
echo hello >mnt/hello && sync
dev=$UBLK_DEV
kill -TERM "$INI_PID"
vm_wait_for 30 _ublk_dead "$INI_PID" ||
	ublk_fail "initiator still running 30 s after SIGTERM with $dev mounted"
rc=0
wait "$INI_PID" || rc=$?
INI_PID=
echo "# initiator exited $rc with $dev mounted"
[ "$rc" = 0 ] || ublk_fail "initiator exited $rc"
vm_wait_for 5 test ! -e "/sys/block/$UBLK_NAME" || ublk_fail "$dev still present"
grep -E "DEL_DEV|deleted" ini.log | sed 's/^/# /'
timeout 30 umount mnt || timeout 30 umount -l mnt || ublk_fail "umount of the dead filesystem hung"
vm_wait_for 10 ublk_gone || ublk_fail "the ublk device was not freed after the unmount"
ublk_check_no_dstate
exit 0
