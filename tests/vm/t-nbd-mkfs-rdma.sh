#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the initiator attaches the export as a kernel block device (--nbd-device auto,
# several queues). ext4 on it: mkfs, mount, random files, sync, checksums, unmount, a clean
# fsck; SIGTERM detaches the device without leaving anything in D state; then the exported
# backing file itself, loop-mounted read-only, holds the same files with the same checksums.
# Transport from the name (see nbd-lib.sh): t-nbd-mkfs-rdma.sh rdma, t-nbd-mkfs-tcp.sh tcp.
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd-lib.sh"

vm_requires mkfs.ext4 fsck.ext4 sha256sum mount umount losetup
vm_modprobe loop ext4
fe_setup
truncate -s 192M disk.img
fe_start_target "$PWD/disk.img"
fe_attach --queues 2 --queue-depth 64

mkfs.ext4 -q -F "$FE_DEV" || fe_fail "mkfs.ext4 $FE_DEV"
mkdir -p mnt
mount -t ext4 "$FE_DEV" mnt || fe_fail "mount $FE_DEV"
mkdir -p mnt/dir
# A few MiB in files of assorted sizes, plus many small ones (metadata traffic).
for i in 1 2 3 4; do
	head -c $((i * 1024 * 1024 + i * 4099)) /dev/urandom >"mnt/file$i" || fe_fail "write file$i"
done
for i in $(seq 1 100); do
	head -c $((i * 37)) /dev/urandom >"mnt/dir/small$i" || fe_fail "write small$i"
done
sync || fe_fail "sync"
(cd mnt && find . -type f | sort | xargs sha256sum) >sums || fe_fail "checksums"
echo "# $(wc -l <sums) files, $(du -sk mnt | cut -f1) KiB"
umount mnt || fe_fail "umount $FE_DEV"
fsck.ext4 -n -f "$FE_DEV" >fsck.log 2>&1 || { cat fsck.log; fe_fail "fsck.ext4 -n -f reports errors"; }
tail -n 1 fsck.log | sed 's/^/# fsck: /'

fe_detach
fe_check_no_dstate
fe_stop_target

# The backing file is the file system, byte for byte.
mount -o loop,ro -t ext4 disk.img mnt || fe_fail "loop mount of the exported file"
(cd mnt && sha256sum -c --quiet ../sums) || { umount mnt; fe_fail "checksums differ in the exported file"; }
umount mnt
echo "# the exported file holds the same $(wc -l <sums) files"
exit 0
