#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: fio on the kernel block device (/dev/nbdN from --nbd-device auto): direct
# libaio random writes with crc32c verify headers from two jobs (disjoint halves, so each
# kernel hardware queue and socket gets traffic), then a separate verify-only read pass.
# The small queue depth caps an NBD request at 512 KiB (4 slots of 128 KiB): the initiator must
# lower the device's max_sectors_kb so the kernel splits fio's blocks of up to 1 MiB, and
# fio's iodepth exceeds the queue depth (backpressure).
# The device is read back whole before the detach and must equal the exported file after it.
# Transport from the name (see nbd-lib.sh): t-nbd-fio-rdma.sh rdma, t-nbd-fio-tcp.sh tcp.
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd-lib.sh"

vm_requires fio cmp dd
fe_setup
truncate -s 64M disk.img
fe_start_target "$PWD/disk.img"
fe_attach --queues 2 --queue-depth 8
[ "$(cat /sys/block/$FE_NAME/queue/max_sectors_kb)" -le 512 ] ||
	fe_fail "max_sectors_kb not lowered to what one request can carry"

# Same job twice: fio's default seeds make the verify pass see the same offsets and blocks.
job() {
	fio --name=nbd --filename="$FE_DEV" --ioengine=libaio --direct=1 --rw=randwrite \
		--bsrange=4k-1M --iodepth=16 --numjobs=2 --size=32M --offset_increment=32M \
		--verify=crc32c --verify_fatal=1 --group_reporting "$@"
}
job --do_verify=0 --output=fio-write.log || { cat fio-write.log; fe_fail "fio write pass"; }
job --verify_only --output=fio-verify.log || { cat fio-verify.log; fe_fail "fio verify pass"; }
grep -h -E "^ *(write|read):|err=" fio-write.log fio-verify.log | sed 's/^/# /'

dd if="$FE_DEV" of=device.img bs=1M iflag=direct status=none || fe_fail "read back $FE_DEV"
fe_detach
fe_check_no_dstate
fe_stop_target
cmp device.img disk.img || fe_fail "the device and the exported file differ"
echo "# device and exported file are identical ($(stat -c %s disk.img) bytes)"
exit 0
