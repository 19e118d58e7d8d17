# SPDX-License-Identifier: MIT
#
# Body of t-{nbd,ublk}-reconnect-{rdma,tcp}.sh, sourced after lib.sh and a frontend library: the
# target is frozen (commands pile up unanswered), killed and started again while fio
# writes with checksums through the block device.  The initiator (--ctrl-loss-tmo)
# reconnects and re-issues what was unanswered: fio ends without an error and every block
# verifies; nothing is left in D state; SIGTERM still detaches cleanly.  The target stays
# away for 12 s, longer than the kernel NBD driver would wait for a command timeout of 3 s
# alone: the device's own timeout must cover the reconnect window too.

vm_requires fio timeout
fe_setup
truncate -s 128M disk.img
fe_start_target "$PWD/disk.img"
fe_attach --queues 2 --queue-depth 32 --timeout 3000 --ctrl-loss-tmo 30000 \
	--reconnect-delay 500

fe_verify_start
kill -STOP "$TGT_PID"
sleep 1
fe_kill_target
sleep 12
start=$(cut -d. -f1 /proc/uptime)
fe_start_target "$PWD/disk.img"
vm_wait_for 60 grep -q "re-established" ini.log || fe_fail "the initiator did not reconnect"
echo "# reconnected $(($(cut -d. -f1 /proc/uptime) - start)) s after the target was back:"
grep -h "re-issued\|re-established" ini.log | sed 's/^/#   /'
fe_verify_wait restart
fe_check_no_dstate
fe_detach
fe_check_no_dstate
exit 0
