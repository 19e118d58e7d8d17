# SPDX-License-Identifier: MIT
#
# Body of t-{nbd,ublk}-zero-tcp.sh (issue 28), sourced after lib.sh and a frontend library:
# zeroing through the block device on three backing stores, a file on tmpfs (no ZERO_RANGE),
# a brd RAM disk (a block device without write-zeroes: the kernel's fallback) and a file on
# vfat (neither ZERO_RANGE nor PUNCH_HOLE: the target writes the zeroes).  Over a pattern:
# blkdiscard -z (BLKZEROOUT), fallocate -z (ZERO_RANGE: REQ_NOUNMAP, NO_HOLE on the wire),
# fallocate -p (PUNCH_HOLE: may unmap), eight of them at once, and a discard; every call
# succeeds, the zeroed ranges read zeroes through the device and in the backing store, the
# rest keeps the pattern.  ZERO_FAST=1: FAST_ZERO through the initiator's NBD socket too,
# which succeeds on tmpfs and fails with ENOTSUP on brd and vfat.

vm_requires blkdiscard fallocate cmp dd losetup mkfs.vfat mount umount blockdev python3
ZERO_TOOL=$top_builddir/tests/nbd-zero
[ "${ZERO_FAST:-0}" = 0 ] || [ -x "$ZERO_TOOL" ] || vm_skip "tests/nbd-zero not built (libnbd)"
fe_setup
vm_modprobe loop

MiB=1048576
zb_loop=
zb_cleanup() {
	mountpoint -q vfat && umount vfat
	[ -z "$zb_loop" ] || losetup -d "$zb_loop"
	mountpoint -q tfs && umount tfs
	grep -q '^brd ' /proc/modules && rmmod brd
}
FE_ATEXIT=zb_cleanup

mkdir tfs vfat
mount -t tmpfs -o size=64m rdmablk-zero tfs || fe_fail "mount tmpfs"
truncate -s 40M tfs/disk.img
modprobe brd rd_nr=1 rd_size=40960 || vm_skip "no brd module"
[ "$(blockdev --getsize64 /dev/ram0)" -ge $((40 * MiB)) ] || fe_fail "/dev/ram0 is too small"
# Not on tfs: that one only has room for its own store.
truncate -s 64M vfat.img
zb_loop=$(losetup -f --show vfat.img) || fe_fail "losetup"
mkfs.vfat "$zb_loop" >/dev/null || fe_fail "mkfs.vfat"
mount -t vfat "$zb_loop" vfat || fe_fail "mount vfat"
# vfat has no sparse files: extending writes the zeroes.
truncate -s 40M vfat/disk.img || fe_fail "truncate on vfat"
dd if=/dev/urandom of=pat bs=1M count=16 status=none

# zb_zeroout DEV OFF LEN: the BLKZEROOUT ioctl (what blkdiscard -z does).
zb_zeroout() {
	python3 -c 'import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
fcntl.ioctl(fd, 0x127f, struct.pack("QQ", int(sys.argv[2]), int(sys.argv[3])))' "$@"
}

# zb_check WHAT FILE: FILE (16 MiB read from the device or the store) holds zeroes in
# 0..10 MiB and the pattern in 10..12 and 14..16 MiB (12..14 was discarded: either).
zb_check() {
	cmp -n $((10 * MiB)) "$2" /dev/zero || fe_fail "$1: a zeroed range is not zeroes"
	cmp -i $((10 * MiB)):$((10 * MiB)) -n $((2 * MiB)) "$2" pat ||
		fe_fail "$1: data next to the zeroed ranges changed"
	cmp -i $((14 * MiB)):$((14 * MiB)) -n $((2 * MiB)) "$2" pat ||
		fe_fail "$1: data after the discarded range changed"
}

# zb_store NAME PATH FAST: the whole sequence on one backing store.
zb_store() {
	_name=$1 _path=$2 _fast=$3
	echo "# ---- $_name: $_path"
	fe_start_target "$_path"
	fe_attach --queues 2 --queue-depth 32
	_q=/sys/block/$FE_NAME/queue
	[ "$(cat "$_q/write_zeroes_max_bytes")" -gt 0 ] ||
		fe_fail "$_name: $FE_DEV has no write-zeroes (the target must offer it)"
	dd if=pat of="$FE_DEV" bs=1M oflag=direct conv=fsync status=none ||
		fe_fail "$_name: writing the pattern"
	blkdiscard -z -o 0 -l $((2 * MiB)) "$FE_DEV" || fe_fail "$_name: blkdiscard -z"
	fallocate -z -o $((2 * MiB)) -l $((2 * MiB)) "$FE_DEV" || fe_fail "$_name: fallocate -z"
	fallocate -p -o $((4 * MiB)) -l $((2 * MiB)) "$FE_DEV" || fe_fail "$_name: fallocate -p"
	# Eight zeroing processes at once over 6..10 MiB (BLKZEROOUT without blkdiscard,
	# which opens the device exclusively).
	_pids=
	for _i in 0 1 2 3 4 5 6 7; do
		_off=$((6 * MiB + _i * MiB / 2))
		case $_i in
		0 | 3 | 6) zb_zeroout "$FE_DEV" $_off $((MiB / 2)) & ;;
		1 | 4 | 7) fallocate -z -o $_off -l $((MiB / 2)) "$FE_DEV" & ;;
		*) fallocate -p -o $_off -l $((MiB / 2)) "$FE_DEV" & ;;
		esac
		_pids="$_pids $!"
	done
	for _p in $_pids; do
		wait "$_p" || fe_fail "$_name: a concurrent zeroing process failed"
	done
	blkdiscard -o $((12 * MiB)) -l $((2 * MiB)) "$FE_DEV" || fe_fail "$_name: blkdiscard"
	dd if="$FE_DEV" of=back bs=1M count=16 iflag=direct status=none || fe_fail "$_name: read"
	zb_check "$_name through $FE_DEV" back
	fe_detach
	dd if="$_path" of=store bs=1M count=16 iflag=direct status=none 2>/dev/null ||
		dd if="$_path" of=store bs=1M count=16 status=none || fe_fail "$_name: read the store"
	zb_check "$_name in the backing store" store
	if [ "${ZERO_FAST:-0}" = 1 ]; then
		: >sock.log # no "ready:" of an earlier run counts
		rm -f nbd.sock
		"$INI_BIN" "$FE_URI" --nbd-socket "$PWD/nbd.sock" >sock.out 2>sock.log &
		INI_PID=$!
		vm_wait_for 60 grep -q "ready: export" sock.log || fe_fail "$_name: NBD socket"
		vm_wait_for 60 test -S nbd.sock || fe_fail "$_name: no NBD socket"
		"$ZERO_TOOL" "nbd+unix:///disk0?socket=$PWD/nbd.sock" fast "$_fast" ||
			fe_fail "$_name: FAST_ZERO did not give '$_fast'"
		kill -TERM "$INI_PID"
		wait "$INI_PID" || fe_fail "$_name: the NBD socket initiator exited $?"
		INI_PID=
	fi
	! grep '^<3>' target.log || fe_fail "$_name: the target logged errors"
	grep '^<4>' target.log | sed 's/^/# /'
	cp target.log "target-$_name.log"
	fe_stop_target
}

zb_store tmpfs "$PWD/tfs/disk.img" ok
# fallocate -z / BLKZEROOUT are REQ_NOUNMAP: NO_HOLE reached the target.
grep -q "write-zeroes with NO_HOLE uses fallocate PUNCH_HOLE then allocate" target-tmpfs.log ||
	fe_fail "tmpfs: no zeroing with NO_HOLE reached the target"
zb_store brd /dev/ram0 ENOTSUP
grep -q "no native write-zeroes" target-brd.log || fe_fail "brd: no FAST_ZERO note at open"
zb_store vfat "$PWD/vfat/disk.img" ENOTSUP
grep -q "uses writing zeroes from now on" target-vfat.log ||
	fe_fail "vfat: the target did not step down to writing zeroes"
grep -q "discard not supported" target-vfat.log || fe_fail "vfat: discard did not become a no-op"
fe_check_no_dstate
exit 0
