# SPDX-License-Identifier: MIT
#
# Body of t-{nbd,ublk}-target-killed-{rdma,tcp}.sh, sourced after lib.sh and a frontend
# library (nbd-lib.sh or ublk-lib.sh): the target is SIGKILLed while fio runs on the device.
# The initiator completes the kernel's requests with errors (EIO from the session layer), so
# fio fails within a bounded time instead of hanging, a new request fails promptly too,
# nothing is left in D state, and SIGTERM still takes the device away cleanly.
# KILL_QD: fio's iodepth per job (default 4).

vm_requires fio dd timeout
fe_setup
truncate -s 64M disk.img
fe_start_target "$PWD/disk.img"
# Short command and keep-alive timeouts bound the wait however the death shows.
fe_attach --queues 2 --queue-depth 32 --timeout 5000 --keepalive 4000

timeout -k 5 120 fio --name=load --filename="$FE_DEV" --ioengine=libaio --direct=1 \
	--rw=randrw --bs=64k --iodepth="${KILL_QD:-4}" --numjobs=2 --time_based --runtime=100 \
	--size=64M --output=fio.log 2>fio.err &
fio_pid=$!
sleep 5
fe_alive "$fio_pid" || { cat fio.log fio.err; fe_fail "fio ended before the target was killed"; }
# Errors must come from the death only: every queue still up, the target content.
grep -E "lost|closing" ini.log target.log && fe_fail "a queue failed before the target was killed"
fe_kill_target
start=$(cut -d. -f1 /proc/uptime)
rc=0
wait "$fio_pid" || rc=$?
took=$(($(cut -d. -f1 /proc/uptime) - start))
echo "# fio exited $rc ${took}s after the target died"
grep -h "err=" fio.log | sed 's/^/# /'
echo "# fio reported $(grep -c 'io_u error' fio.err) I/O errors"
[ "$rc" != 124 ] && [ "$rc" != 137 ] || fe_fail "fio hung until timeout(1) killed it"
[ "$rc" != 0 ] || fe_fail "fio saw no error after the target died"
[ "$took" -le 40 ] || fe_fail "errors took ${took}s to reach fio"
fe_check_no_dstate

# A request issued after the death fails promptly as well.
start=$(cut -d. -f1 /proc/uptime)
rc=0
timeout -k 5 30 dd if="$FE_DEV" of=/dev/null bs=4k count=1 skip=123 iflag=direct \
	status=none 2>dd.err || rc=$?
took=$(($(cut -d. -f1 /proc/uptime) - start))
echo "# new read after the death: exit $rc in ${took}s: $(cat dd.err)"
[ "$rc" != 124 ] && [ "$rc" != 137 ] || fe_fail "a new read hung"
[ "$rc" != 0 ] || fe_fail "a new read succeeded with the target dead"

fe_detach
fe_check_no_dstate
exit 0
