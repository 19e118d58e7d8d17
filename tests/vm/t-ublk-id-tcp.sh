#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: --ublk-id N gives /dev/ublkbN; a second initiator asking for the same id is
# refused with the reason (exit 1) and the first device keeps working; after a detach the id
# is free again. Over tcp only (the device id does not depend on the transport).
# vm-timeout: 200
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ublk-lib.sh"

vm_requires dd cmp timeout
fe_setup
dd if=/dev/urandom of=disk.img bs=1M count=8 status=none
fe_start_target "$PWD/disk.img"
fe_attach --queues 1 --queue-depth 8 --ublk-id 7
[ "$FE_DEV" = /dev/ublkb7 ] || fe_fail "--ublk-id 7 attached $FE_DEV"

rc=0
timeout 60 "$INI_BIN" "$FE_URI" --ublk --ublk-id 7 --queues 1 --queue-depth 8 \
	>second.out 2>second.log || rc=$?
sed 's/^/# second: /' second.log
[ "$rc" = 1 ] || fe_fail "a second initiator asking for id 7 exited $rc (want 1)"
grep -q "ublk device id 7 is taken" second.log || fe_fail "the refusal does not say why"
grep -q "^attached" second.out && fe_fail "the second initiator printed attached"
dd if="$FE_DEV" of=back bs=64k iflag=direct status=none || fe_fail "read after the refusal"
cmp back disk.img || fe_fail "/dev/ublkb7 data differs from the export"
fe_detach

fe_attach --queues 1 --queue-depth 8 --ublk-id 7
[ "$FE_DEV" = /dev/ublkb7 ] || fe_fail "id 7 not free again after detach ($FE_DEV)"
fe_detach
exit 0
