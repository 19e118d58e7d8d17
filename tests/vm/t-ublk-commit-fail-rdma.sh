#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the ublk driver refuses a COMMIT_AND_FETCH (tests/ublk-commit-fail.c gives it
# an impossible queue id), which would leave its request with the initiator for good.
# (1) Refused once: the initiator sends the commit again, the request completes and fio's
#     verified writes and reads see nothing of it; SIGTERM then detaches cleanly.
# (2) Refused twice: the queue cannot go on.  The initiator answers what it still holds,
#     closes that queue's ring (the driver fails the rest with EIO and stops the device),
#     says which queue failed, deletes the device and exits non-zero on its own; fio ends
#     with errors, nothing stays in D state.
# Transport from the name (see frontend-lib.sh): -rdma.sh or -tcp.sh.
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ublk-lib.sh"

vm_requires fio timeout
fe_setup
[ -r "$top_builddir/tests/ublk-commit-fail.so" ] || vm_fail "tests/ublk-commit-fail.so not built"
truncate -s 64M disk.img
fe_start_target "$PWD/disk.img"

# (1) one refusal: retried, nothing lost
FE_INI_PRELOAD=ublk-commit-fail.so UBLK_COMMIT_FAIL_AT=300 UBLK_COMMIT_FAIL_COUNT=1 \
	fe_attach --queues 2 --queue-depth 16
timeout -k 5 120 fio --name=verify --filename="$FE_DEV" --ioengine=libaio --direct=1 \
	--rw=randwrite --bs=4k --iodepth=16 --numjobs=2 --offset_increment=32M --size=8M \
	--verify=crc32c --verify_fatal=1 --do_verify=1 --output=fio.log 2>fio.err ||
	{ tail -n 20 fio.log fio.err; fe_fail "fio verify failed across a refused commit"; }
grep -h "err=" fio.log | sed 's/^/# /'
[ "$(grep -c 'err= 0' fio.log)" = 2 ] || fe_fail "fio reported errors"
grep "ublk-commit-fail\|refused" ini.log | sed 's/^/# /'
grep -q "^ublk-commit-fail: COMMIT_AND_FETCH of queue" ini.log ||
	fe_fail "the shim did not corrupt a commit (fewer than 300 commits?)"
grep -q "COMMIT_AND_FETCH_REQ refused: Invalid argument; sending it again" ini.log ||
	fe_fail "the refused commit was not logged and sent again"
fe_detach
mv ini.log ini-retry.log

# (2) refused twice: the device stops, the initiator goes with an error
FE_INI_PRELOAD=ublk-commit-fail.so UBLK_COMMIT_FAIL_AT=300 UBLK_COMMIT_FAIL_COUNT=2 \
	fe_attach --queues 2 --queue-depth 16
timeout -k 5 120 fio --name=load --filename="$FE_DEV" --ioengine=libaio --direct=1 \
	--rw=randrw --bs=4k --iodepth=16 --numjobs=2 --time_based --runtime=100 \
	--output=fio.log 2>fio.err &
fio_pid=$!
vm_wait_for 60 fe_dead "$INI_PID" || {
	tail -n 20 ini.log
	fe_fail "initiator still running 60 s after a commit was refused twice"
}
rc=0
wait "$INI_PID" || rc=$?
INI_PID=
echo "# initiator exited $rc; its log:"
sed 's/^/#   /' ini.log | tail -n 12
[ "$(grep -c "^ublk-commit-fail: COMMIT_AND_FETCH of queue" ini.log)" = 2 ] ||
	fe_fail "the shim did not corrupt a commit and its retry"
[ "$rc" != 0 ] || fe_fail "initiator exited 0 after the driver refused a commit twice"
grep -q "COMMIT_AND_FETCH_REQ refused again: Invalid argument; stopping the device" ini.log ||
	fe_fail "the second refusal was not logged"
grep -Eq "ublk queue [01] failed; the device stops" ini.log ||
	fe_fail "the initiator did not say which queue failed"
grep -q "STOP_DEV" ini.log && fe_fail "STOP_DEV had trouble (the driver kept a request?)"
grep -q "deleted" ini.log || fe_fail "the initiator did not delete the device"
vm_wait_for 60 ublk_gone || fe_fail "$FE_DEV still present after the initiator exited"

fe_fio_erred "$fio_pid" "the device stopped"
fe_check_no_dstate
exit 0
