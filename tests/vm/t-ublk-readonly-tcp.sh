#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: a read-only export attached from a config file ([attach] ublk = yes) becomes a
# read-only /dev/ublkbN without discard: reads work, writes fail, the exported file is left
# untouched. Over tcp only (the export flags do not depend on the transport).
# vm-timeout: 200
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ublk-lib.sh"

vm_requires dd cmp sha256sum
fe_setup
dd if=/dev/urandom of=disk.img bs=1M count=16 status=none
sum0=$(sha256sum <disk.img)
fe_start_target "$PWD/disk.img" "read-only = yes"
cat >ini.conf <<EOC
[attach ro0]
uri = $FE_TRANSPORT://$FE_HOST:$FE_PORT/disk0
queues = 1
queue-depth = 8
ublk = yes
EOC
ublk_attach_conf ini.conf ro0

[ "$(cat "/sys/block/$FE_NAME/ro")" = 1 ] || fe_fail "device not read-only"
[ "$(cat "/sys/block/$FE_NAME/queue/discard_max_bytes")" = 0 ] ||
	fe_fail "discard advertised on a read-only device"
dd if="$FE_DEV" of=back bs=64k iflag=direct status=none || fe_fail "read"
cmp back disk.img || fe_fail "read data differs from the export"
if dd if=/dev/zero of="$FE_DEV" bs=4k count=1 oflag=direct status=none 2>dd.err; then
	fe_fail "a write to the read-only device succeeded"
fi
echo "# write refused: $(cat dd.err)"
fe_detach
[ "$(sha256sum <disk.img)" = "$sum0" ] || fe_fail "the read-only export changed"
exit 0
