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
fe_setup
truncate -s 32M disk.img
fe_start_target "$PWD/disk.img"
uri=tcp://$FE_HOST:$FE_PORT/disk0

# fails NAME PATTERN CMD...: CMD exits 1 within 60 s and says PATTERN on stderr.
fails() {
	_n=$1 _p=$2
	shift 2
	_rc=0
	timeout 60 "$@" >"$_n.out" 2>"$_n.err" || _rc=$?
	echo "# $_n: exit $_rc: $(grep -v '^<6>' "$_n.err" | tail -n 1)"
	[ "$_rc" = 1 ] || { cat "$_n.err"; fe_fail "$_n: exit $_rc, want 1"; }
	grep -q -- "$_p" "$_n.err" || { cat "$_n.err"; fe_fail "$_n: no '$_p' in the error"; }
	! grep -q '^attached' "$_n.out" || fe_fail "$_n: claimed to attach"
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
vm_wait_for 60 grep -q '^attached /dev/nbd3$' ini.out || fe_fail "config nbd-device = /dev/nbd3 did not attach"
FE_DEV=/dev/nbd3
FE_NAME=nbd3
echo "# config file: attached $FE_DEV, pid file $(cat /sys/block/nbd3/pid)"
[ "$(cat /sys/block/nbd3/pid)" = "$INI_PID" ] || fe_fail "/sys/block/nbd3/pid is not the initiator"

fails busy "busy" "$INI_BIN" "$uri" --nbd-device /dev/nbd3
fails badname "want /dev/nbdN or auto" "$INI_BIN" "$uri" --nbd-device /dev/sda
fails perm "CAP_SYS_ADMIN" setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$INI_BIN" "$uri" --nbd-device auto --host-id rdmablk:test:nobody
dd if=$FE_DEV of=/dev/null bs=64k count=16 iflag=direct status=none ||
	fe_fail "$FE_DEV broken by the failed attempts"
fe_detach
fe_check_no_dstate

# SIGTERM while mounted.
fe_attach --queues 2
mkfs.ext4 -q -F "$FE_DEV" || fe_fail "mkfs.ext4"
mkdir -p mnt
mount -t ext4 "$FE_DEV" mnt || fe_fail "mount"
head -c 1M /dev/urandom >mnt/unsynced
kill -TERM "$INI_PID"
vm_wait_for 60 fe_dead "$INI_PID" || fe_fail "initiator did not exit with $FE_DEV mounted"
rc=0
wait "$INI_PID" || rc=$?
INI_PID=
echo "# SIGTERM while mounted: initiator exit $rc; $(grep -o 'still configured.*' ini.log)"
[ "$rc" = 0 ] || fe_fail "initiator exit $rc"
grep -q "still configured" ini.log || fe_fail "no warning that $FE_DEV stays held by the mount"
rc=0
timeout 60 sync || rc=$?
[ "$rc" != 124 ] || fe_fail "sync hung on the detached device"
rc=0
timeout 60 umount mnt || rc=$?
[ "$rc" = 0 ] || fe_fail "umount after the detach: exit $rc"
vm_wait_for 60 nbd_detached || fe_fail "$FE_DEV still configured after umount"
fe_check_no_dstate
echo "# unmounted; $FE_DEV released"

# A read-only export becomes a read-only device.
fe_stop_target
fe_start_target "$PWD/disk.img" "read-only = yes"
fe_attach --queues 1
[ "$(cat "/sys/block/$FE_NAME/ro")" = 1 ] || fe_fail "read-only export attached writable"
dd if=/dev/zero of="$FE_DEV" bs=4k count=1 oflag=direct status=none 2>ro.err &&
	fe_fail "a write to the read-only $FE_DEV succeeded"
dd if="$FE_DEV" of=/dev/null bs=4k count=16 iflag=direct status=none ||
	fe_fail "read from the read-only $FE_DEV"
echo "# read-only export: $FE_DEV ro=1; write refused: $(cat ro.err)"
fe_detach

# The module absent and the kernel unable to load it on demand.
modprobe_path=$(cat /proc/sys/kernel/modprobe)
restore_modprobe() {
	echo "$modprobe_path" >/proc/sys/kernel/modprobe
	modprobe nbd
}
FE_ATEXIT=restore_modprobe
rmmod nbd || fe_fail "rmmod nbd"
echo /nonexistent/modprobe >/proc/sys/kernel/modprobe
fails nomodule "modprobe nbd" "$INI_BIN" "$uri" --nbd-device auto
grep -q "session" nomodule.err && fe_fail "the target was contacted although nbd is missing"
exit 0
