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
fe_setup
truncate -s 64M disk.img
fe_start_target "$PWD/disk.img"

# (1) busy
fe_attach --queues 2 --queue-depth 16
timeout -k 5 120 fio --name=busy --filename="$FE_DEV" --ioengine=libaio --direct=1 \
	--rw=randrw --bs=32k --iodepth=32 --numjobs=2 --time_based --runtime=100 \
	--output=fio.log 2>fio.err &
fio_pid=$!
sleep 4
fe_alive "$fio_pid" || { cat fio.log; fe_fail "fio ended before the SIGTERM"; }
fe_detach 30
fe_fio_erred "$fio_pid" "the device went away"
fe_check_no_dstate

# (2) mounted
fe_attach --queues 1 --queue-depth 16
mkfs.ext4 -q -F "$FE_DEV" || fe_fail "mkfs.ext4"
mkdir -p mnt
mount "$FE_DEV" mnt || fe_fail "mount"
echo hello >mnt/hello && sync
dev=$FE_DEV
kill -TERM "$INI_PID"
vm_wait_for 60 fe_dead "$INI_PID" ||
	fe_fail "initiator still running 30 s after SIGTERM with $dev mounted"
rc=0
wait "$INI_PID" || rc=$?
INI_PID=
echo "# initiator exited $rc with $dev mounted"
[ "$rc" = 0 ] || fe_fail "initiator exited $rc"
vm_wait_for 60 test ! -e "/sys/block/$FE_NAME" || fe_fail "$dev still present"
grep -E "DEL_DEV|deleted" ini.log | sed 's/^/# /'
timeout 30 umount mnt || timeout 30 umount -l mnt || fe_fail "umount of the dead filesystem hung"
vm_wait_for 60 ublk_gone || fe_fail "the ublk device was not freed after the unmount"
fe_check_no_dstate
exit 0
