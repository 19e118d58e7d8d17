#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: a FLUSH from the kernel reaches a real block device. The target exports a loop
# device (over a file in the guest's tmpfs); writes to /dev/nbdN followed by fsync (dd
# conv=fsync, then fio --fsync) must raise the loop device's flush counter: field 16 of
# /sys/block/loopN/stat ("flush I/Os", Documentation/block/stat.rst), i.e. the datasync the
# target did on NBD_CMD_FLUSH became a flush request of the device below.
# Transport from the name (see nbd-lib.sh): t-nbd-flush-rdma.sh rdma, t-nbd-flush-tcp.sh tcp.
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd-lib.sh"

vm_requires losetup fio dd
vm_modprobe loop
fe_setup
truncate -s 64M lo.img
loopdev=$(losetup -f --show lo.img) || fe_fail "losetup"
FE_ATEXIT="losetup -d $loopdev"
loop=${loopdev#/dev/}
flushes() { awk '{ print $16 }' "/sys/block/$loop/stat"; }
echo "# $loopdev: write cache '$(cat /sys/block/$loop/queue/write_cache)'"
fe_start_target "$loopdev"
fe_attach --queues 2 --queue-depth 32
grep -q "write back" "/sys/block/$FE_NAME/queue/write_cache" ||
	fe_fail "$FE_DEV has no write cache ($(cat /sys/block/$FE_NAME/queue/write_cache)): the kernel will not send FLUSH"

f0=$(flushes)
dd if=/dev/urandom of="$FE_DEV" bs=64k count=16 conv=fsync status=none || fe_fail "dd conv=fsync"
f1=$(flushes)
echo "# loop flushes: $f0 before, $f1 after dd conv=fsync"
[ "$f1" -gt "$f0" ] || fe_fail "dd conv=fsync on $FE_DEV did not flush $loopdev"

fio --name=fsync --filename="$FE_DEV" --ioengine=psync --rw=randwrite --bs=4k --size=8M \
	--io_size=1M --fsync=16 --output=fio.log || { cat fio.log; fe_fail "fio --fsync"; }
f2=$(flushes)
echo "# loop flushes: $f2 after fio --fsync=16 (256 writes)"
[ "$f2" -ge $((f1 + 8)) ] || fe_fail "fio's fsyncs did not reach $loopdev ($f1 -> $f2)"

fe_detach
fe_check_no_dstate
fe_stop_target
grep "stats:" target.log | sed 's/^/# target: /'
exit 0
