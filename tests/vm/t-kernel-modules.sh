#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the VM kernel has the block drivers the initiator attaches to: nbd (netlink
# attach, /dev/nbdN) and ublk_drv (/dev/ublk-control).
# vm-timeout: 60
. "$(dirname "$0")/lib.sh"

vm_modprobe nbd ublk_drv
# devtmpfs creates the nodes as the drivers register; give it a moment under TCG.
vm_wait_for 60 test -b /dev/nbd0 || vm_fail "/dev/nbd0 did not appear"
vm_wait_for 60 test -c /dev/ublk-control || vm_fail "/dev/ublk-control did not appear"
grep -qw nbd /proc/devices || vm_fail "nbd not in /proc/devices"
[ -d /sys/module/ublk_drv ] || vm_fail "ublk_drv not in /sys/module"
ls -l /dev/nbd0 /dev/ublk-control
echo "# nbd: $(ls /dev/nbd* | wc -l) devices; ublk-control present"
exit 0
