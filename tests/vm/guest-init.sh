#!/bin/sh
# SPDX-License-Identifier: MIT
#
# PID 1 inside the VM, exec'ed by the initramfs after switch_root into the overlay of the host /.
# Mounts what a normal system has, the writable results share (tag "results") with the params
# file run.sh wrote, binds the cached kernel's modules onto /lib/modules, then runs the guest
# runner (or a shell with rdmablk.mode=shell) and powers off. It must never exit: PID 1 exiting
# panics the kernel.

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
RES=/run/rdmablk/results

log() { echo "rdmablk-vm: $*"; }

poweroff_now() {
	sync
	umount "$RES" 2>/dev/null
	# The power-off is asynchronous and takes the 9p root away first: start the sleep that
	# waits for it before, so nothing needs loading from the root afterwards.
	exec >/dev/null 2>&1
	sleep 60 &
	echo o >/proc/sysrq-trigger
	wait
}

fatal() {
	log "FATAL: $*"
	poweroff_now
}

mount -t proc proc /proc || fatal "mount /proc"
mount -t sysfs sysfs /sys || fatal "mount /sys"
# The initramfs moved its devtmpfs here; mount one if it could not.
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev || fatal "mount /dev"
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs -o mode=0755 tmpfs /run || fatal "mount /run"
mkdir -p "$RES"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 results "$RES" ||
	fatal "mount results share"
[ -r "$RES/params" ] || fatal "no $RES/params"
. "$RES/params"

# Before /tmp becomes a tmpfs: the modules dir may live under the host's /tmp.
mkdir -p /lib/modules
mount --bind "$RDMABLK_VM_MODDIR" /lib/modules || fatal "bind $RDMABLK_VM_MODDIR"
[ -d "/lib/modules/$(uname -r)" ] || fatal "no modules for $(uname -r) in $RDMABLK_VM_MODDIR"

# A tmpfs /tmp would hide a source or build tree that lives under the host's /tmp; the overlay
# upper layer is a tmpfs already, so /tmp stays writable either way.
case "$RDMABLK_SRCDIR/:$RDMABLK_BUILDDIR/" in
/tmp/* | */:/tmp/*) log "build tree under /tmp: not mounting a tmpfs on /tmp" ;;
*) mount -t tmpfs -o mode=1777 tmpfs /tmp || fatal "mount /tmp" ;;
esac

modprobe configfs 2>/dev/null
mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config ||
	log "warning: cannot mount configfs"
ip link set lo up || log "warning: cannot bring lo up"
hostname rdmablk-vm 2>/dev/null
export HOME=/root TERM=${TERM:-linux}
log "up after $(cut -d' ' -f1 /proc/uptime) s; kernel $(uname -r)"

if [ "${RDMABLK_VM_MODE:-run}" = shell ]; then
	log "shell: exit it to power off"
	cd "$RDMABLK_BUILDDIR" 2>/dev/null || cd /
	export RDMABLK_VM_GUEST=1 top_srcdir="$RDMABLK_SRCDIR" top_builddir="$RDMABLK_BUILDDIR"
	export RDMABLK_SRCDIR RDMABLK_BUILDDIR
	# /dev/console cannot be a controlling tty: give the shell the serial port itself, so ^C
	# and job control work.
	setsid -c /bin/bash -l </dev/ttyS0 >/dev/ttyS0 2>&1 || /bin/sh
else
	/bin/sh "$RDMABLK_SRCDIR/tests/vm/guest-runner.sh"
fi
poweroff_now
