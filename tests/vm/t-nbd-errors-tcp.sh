#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the kernel device attach through a config file and an explicit /dev/nbdN, and
# its clear failures: the device already connected (busy), no permission (not root), the nbd
# module absent and not loadable, a bad device name. Each failure exits 1 with its reason and
# leaves the attached device alone. Then SIGTERM with a file system still mounted on the
# device: the initiator exits anyway, the file system gets errors instead of hanging, and the
# device is released at umount. A read-only export gives a read-only device.
# Transport-independent: tcp only.
# vm-timeout: 240
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd-lib.sh"

vm_requires setpriv dd mkfs.ext4 mount umount
vm_modprobe ext4
nbd_setup
truncate -s 32M disk.img
nbd_start_target "$PWD/disk.img"
uri=tcp://$NBD_HOST:$NBD_PORT/disk0

# fails NAME PATTERN CMD...: CMD exits 1 within 60 s and says PATTERN on stderr.
fails() {
	_n=$1 _p=$2
	shift 2
	_rc=0
	timeout 60 "$@" >"$_n.out" 2>"$_n.err" || _rc=$?
	echo "# $_n: exit $_rc: $(grep -v '^<6>' "$_n.err" | tail -n 1)"
	[ "$_rc" = 1 ] || { cat "$_n.err"; nbd_fail "$_n: exit $_rc, want 1"; }
	grep -q -- "$_p" "$_n.err" || { cat "$_n.err"; nbd_fail "$_n: no '$_p' in the error"; }
	! grep -q '^attached' "$_n.out" || nbd_fail "$_n: claimed to attach"
}

# An explicit device, from the config file.
cat >ini.conf <<EOC
[initiator]
host-id = rdmablk:test:errors
[attach disk0]
uri = $uri
queues = 2
nbd-device = /dev/nbd3
EOC
"$INI_BIN" --config ini.conf --attach disk0 >ini.out 2>ini.log &
INI_PID=$!
vm_wait_for 60 grep -q '^attached /dev/nbd3$' ini.out || nbd_fail "config nbd-device = /dev/nbd3 did not attach"
NBD_DEV=/dev/nbd3
NBD_NAME=nbd3
echo "# config file: attached $NBD_DEV, pid file $(cat /sys/block/nbd3/pid)"
[ "$(cat /sys/block/nbd3/pid)" = "$INI_PID" ] || nbd_fail "/sys/block/nbd3/pid is not the initiator"

fails busy "busy" "$INI_BIN" "$uri" --nbd-device /dev/nbd3
fails badname "want /dev/nbdN or auto" "$INI_BIN" "$uri" --nbd-device /dev/sda
fails perm "CAP_SYS_ADMIN" setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$INI_BIN" "$uri" --nbd-device auto --host-id rdmablk:test:nobody
dd if=$NBD_DEV of=/dev/null bs=64k count=16 iflag=direct status=none ||
	nbd_fail "$NBD_DEV broken by the failed attempts"
nbd_detach
nbd_check_no_dstate

# SIGTERM while mounted.
nbd_attach --queues 2
mkfs.ext4 -q -F "$NBD_DEV" || nbd_fail "mkfs.ext4"
mkdir -p mnt
mount -t ext4 "$NBD_DEV" mnt || nbd_fail "mount"
head -c 1M /dev/urandom >mnt/unsynced
kill -TERM "$INI_PID"
vm_wait_for 60 _nbd_dead "$INI_PID" || nbd_fail "initiator did not exit with $NBD_DEV mounted"
rc=0
wait "$INI_PID" || rc=$?
INI_PID=
echo "# SIGTERM while mounted: initiator exit $rc; $(grep -o 'still configured.*' ini.log)"
[ "$rc" = 0 ] || nbd_fail "initiator exit $rc"
grep -q "still configured" ini.log || nbd_fail "no warning that $NBD_DEV stays held by the mount"
rc=0
timeout 60 sync || rc=$?
[ "$rc" != 124 ] || nbd_fail "sync hung on the detached device"
rc=0
timeout 60 umount mnt || rc=$?
[ "$rc" = 0 ] || nbd_fail "umount after the detach: exit $rc"
vm_wait_for 10 nbd_detached || nbd_fail "$NBD_DEV still configured after umount"
nbd_check_no_dstate
echo "# unmounted; $NBD_DEV released"

# A read-only export becomes a read-only device.
nbd_stop_target
nbd_start_target "$PWD/disk.img" "read-only = yes"
nbd_attach --queues 1
[ "$(cat "/sys/block/$NBD_NAME/ro")" = 1 ] || nbd_fail "read-only export attached writable"
dd if=/dev/zero of="$NBD_DEV" bs=4k count=1 oflag=direct status=none 2>ro.err &&
	nbd_fail "a write to the read-only $NBD_DEV succeeded"
dd if="$NBD_DEV" of=/dev/null bs=4k count=16 iflag=direct status=none ||
	nbd_fail "read from the read-only $NBD_DEV"
echo "# read-only export: $NBD_DEV ro=1; write refused: $(cat ro.err)"
nbd_detach

# The module absent and the kernel unable to load it on demand.
modprobe_path=$(cat /proc/sys/kernel/modprobe)
restore_modprobe() {
	echo "$modprobe_path" >/proc/sys/kernel/modprobe
	modprobe nbd
}
NBD_ATEXIT=restore_modprobe
rmmod nbd || nbd_fail "rmmod nbd"
echo /nonexistent/modprobe >/proc/sys/kernel/modprobe
fails nomodule "modprobe nbd" "$INI_BIN" "$uri" --nbd-device auto
grep -q "session" nomodule.err && nbd_fail "the target was contacted although nbd is missing"
exit 0
