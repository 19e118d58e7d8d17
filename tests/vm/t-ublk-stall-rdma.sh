#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the target stops answering (SIGSTOP) without dropping its connections, so
# commands time out while the session lives on (keep-alive off). The kernel gets EIO in
# bounded time; each timed-out tag gives its slot back to the session (the target may still
# RDMA into it) and parks a bounce buffer with the driver. After SIGCONT the late answers
# release those slots and a fio write + verify pass over the whole queue depth must succeed:
# every tag is back on a slot and no late transfer corrupted anything.
# Transport from the name (see ublk-lib.sh): t-ublk-stall-rdma.sh rdma, -tcp.sh tcp.
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ublk-lib.sh"

vm_requires fio dd timeout
fe_setup
truncate -s 32M disk.img
# Keep-alive off needs the target's consent (min-keepalive, issue 31).
FE_TARGET_EXTRA="min-keepalive = 0" fe_start_target "$PWD/disk.img"
fe_attach --queues 1 --queue-depth 8 --timeout 2000 --keepalive 0

kill -STOP "$TGT_PID"
FE_ATEXIT="kill -CONT $TGT_PID"
pids=
for i in 0 1 2 3; do
	timeout -k 5 60 dd if=/dev/urandom of="$FE_DEV" bs=64k count=4 seek=$((i * 4)) \
		oflag=direct status=none 2>"stall-w$i.err" &
	pids="$pids $!"
	timeout -k 5 60 dd if="$FE_DEV" of=/dev/null bs=64k count=4 skip=$((64 + i * 4)) \
		iflag=direct status=none 2>"stall-r$i.err" &
	pids="$pids $!"
done
start=$(cut -d. -f1 /proc/uptime)
nerr=0
for p in $pids; do
	rc=0
	wait "$p" || rc=$?
	[ "$rc" != 124 ] && [ "$rc" != 137 ] || fe_fail "I/O hung with the target stopped"
	[ "$rc" = 0 ] || nerr=$((nerr + 1))
done
took=$(($(cut -d. -f1 /proc/uptime) - start))
echo "# target stopped: $nerr of 8 requests failed, after ${took}s: $(cat stall-w0.err)"
[ "$nerr" -gt 0 ] || fe_fail "no request failed while the target was stopped"
[ "$took" -le 20 ] || fe_fail "the failures took ${took}s"
grep -c "not answered in time" ini.log | sed 's/^/# timed-out commands: /'

kill -CONT "$TGT_PID"
FE_ATEXIT=
vm_wait_for 60 grep -q "late answer" ini.log || fe_fail "no late answer logged after SIGCONT"
sleep 2
echo "# late answers: $(grep -c 'late answer' ini.log)"

# Every tag must work again, with data intact (depth 8 > 8 in flight from the jobs).
fio --name=after --filename="$FE_DEV" --ioengine=libaio --direct=1 --offset=8M --size=16M \
	--rw=randwrite --bsrange=4k-128k --iodepth=16 --verify=crc32c --verify_fatal=1 \
	--output=fio.log || { cat fio.log; fe_fail "fio write+verify after the stall failed"; }
echo "# after the stall: $(grep -h -m1 'write:' fio.log | sed 's/^ *//')"
fe_detach
fe_check_no_dstate
exit 0
