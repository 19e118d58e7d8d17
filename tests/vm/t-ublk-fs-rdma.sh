#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: a filesystem on /dev/ublkbN. Checks the block device the initiator created
# (size, block sizes, write cache + FUA, discard / write-zeroes limits), exercises
# WRITE_ZEROES and DISCARD directly, then mkfs.ext4 + mount + write files + unmount +
# fsck -n; after the detach the exported file is a clean filesystem holding the same files.
# Transport from the name (see ublk-lib.sh): t-ublk-fs-rdma.sh rdma, -tcp.sh tcp.
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ublk-lib.sh"

vm_requires mkfs.ext4 e2fsck debugfs blkdiscard cmp dd mount umount sha256sum
fe_setup
truncate -s 128M disk.img
fe_start_target "$PWD/disk.img"
fe_attach --queues 2 --queue-depth 32

q=/sys/block/$FE_NAME/queue
[ "$(cat "/sys/block/$FE_NAME/size")" = $((128 * 2048)) ] ||
	fe_fail "size $(cat "/sys/block/$FE_NAME/size") sectors, want $((128 * 2048))"
[ "$(cat "$q/logical_block_size")" = 512 ] ||
	fe_fail "logical block size $(cat "$q/logical_block_size")"
[ "$(cat "$q/write_cache")" = "write back" ] ||
	fe_fail "write cache '$(cat "$q/write_cache")': flushes would not reach the target"
[ "$(cat "$q/fua")" = 1 ] || fe_fail "fua $(cat "$q/fua")"
[ "$(cat "$q/discard_max_bytes")" -gt 0 ] || fe_fail "no discard"
[ "$(cat "$q/write_zeroes_max_bytes")" -gt 0 ] || fe_fail "no write-zeroes"
[ "$(cat "/sys/block/$FE_NAME/ro")" = 0 ] || fe_fail "device is read-only"
nq=$(ls "/sys/block/$FE_NAME/mq" | wc -l)
[ "$nq" -ge 1 ] && [ "$nq" -le 2 ] || fe_fail "$nq hardware queues for 2 I/O queues"

# WRITE_ZEROES and DISCARD reach the file: a pattern, zeroed / punched, reads back as zeros.
dd if=/dev/urandom of=pat bs=1M count=4 status=none
dd if=pat of="$FE_DEV" bs=1M oflag=direct status=none || fe_fail "write pattern"
blkdiscard -z -o 0 -l 1M "$FE_DEV" || fe_fail "blkdiscard -z (write zeroes)"
blkdiscard -o 1M -l 1M "$FE_DEV" || fe_fail "blkdiscard (discard)"
dd if="$FE_DEV" of=back bs=1M count=4 iflag=direct status=none || fe_fail "read back"
cmp -n 2097152 back /dev/zero || fe_fail "zeroed/discarded range does not read back as zeros"
cmp -i 2097152:2097152 -n 2097152 back pat || fe_fail "untouched range changed"
cmp -n 2097152 disk.img /dev/zero || fe_fail "exported file not zeroed"
echo "# write-zeroes and discard reached the export"

mkfs.ext4 -q -F "$FE_DEV" || fe_fail "mkfs.ext4"
mkdir -p mnt
mount "$FE_DEV" mnt || fe_fail "mount"
dd if=/dev/urandom of=f1 bs=1M count=8 status=none
dd if=/dev/urandom of=f2 bs=4k count=77 status=none
cp f1 mnt/f1 && cp f2 mnt/f2 && mkdir mnt/dir && cp f2 mnt/dir/f3 || fe_fail "write files"
sync || fe_fail "sync"
cmp f1 mnt/f1 || fe_fail "f1 differs on the mounted fs"
fstrim -v mnt | sed 's/^/# /' || echo "# fstrim failed (not fatal)"
umount mnt || fe_fail "umount"
e2fsck -n -f "$FE_DEV" >fsck.log 2>&1 || { cat fsck.log; fe_fail "fsck -n on $FE_DEV"; }
echo "# fsck on $FE_DEV clean: $(tail -n 1 fsck.log)"

fe_detach
fe_check_no_dstate
e2fsck -n -f disk.img >fsck2.log 2>&1 ||
	{ cat fsck2.log; fe_fail "fsck -n on the exported file"; }
for f in f1 f2 dir/f3; do
	debugfs -R "dump /$f out" disk.img 2>/dev/null
	cmp out "$(basename "$f" | sed 's/f3/f2/')" || fe_fail "/$f in the exported file differs"
done
echo "# exported file: clean ext4 with the files written through $FE_DEV"
exit 0
