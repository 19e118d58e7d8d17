#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: fio on /dev/ublkbN. Four jobs write disjoint 16 MiB regions at random with
# crc32c verify headers (direct I/O through io_uring, with fsyncs so FLUSH runs under load),
# then a separate verify-only read pass (libaio) checks every block. After the detach the
# exported file equals what the device returned (cmp).
# Transport from the name (see ublk-lib.sh): t-ublk-fio-rdma.sh rdma, -tcp.sh tcp.
# vm-timeout: 400
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ublk-lib.sh"

vm_requires fio dd cmp
fe_setup
truncate -s 64M disk.img
fe_start_target "$PWD/disk.img"
fe_attach --queues 3 --queue-depth 32
grep "granted" ini.log | sed 's/^/# /'

common="--filename=$FE_DEV --direct=1 --size=16M --bsrange=4k-128k --iodepth=16
	--verify=crc32c --verify_fatal=1 --rw=randwrite --randrepeat=1"
pids=
for j in 0 1 2 3; do
	fio --name=w$j $common --ioengine=io_uring --offset=$((j * 16))M --fsync=32 \
		--do_verify=0 --output=fio-w$j.log &
	pids="$pids $!"
done
j=0
for p in $pids; do
	wait "$p" || { cat fio-w$j.log; fe_fail "fio write job $j failed"; }
	j=$((j + 1))
done
for j in 0 1 2 3; do
	fio --name=w$j $common --ioengine=libaio --offset=$((j * 16))M --verify_only \
		--output=fio-v$j.log || { cat fio-v$j.log; fe_fail "fio verify of region $j failed"; }
done
for j in 0 1 2 3; do
	echo "# region $j: $(grep -h -m1 'write:' fio-w$j.log | sed 's/^ *//'); verify:" \
		"$(grep -h -m1 'read:' fio-v$j.log | sed 's/^ *//')"
done
grep -h "err=" fio-w*.log fio-v*.log | grep -v "err= 0" && fe_fail "fio reported errors"

dd if="$FE_DEV" of=dev.img bs=1M iflag=direct status=none || fe_fail "read the device back"
fe_detach
fe_check_no_dstate
cmp dev.img disk.img || fe_fail "the exported file differs from what $FE_DEV returned"
echo "# exported file == device contents ($(stat -c %s disk.img) bytes)"
exit 0
