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

# Small writes (in-capsule) in one half, large ones (target-pulled) in the other; --rate
# keeps them going for about 16 s.
timeout -k 5 240 fio --filename="$FE_DEV" --ioengine=libaio --direct=1 --rw=randwrite \
	--iodepth=8 --rate=1m --verify=crc32c --verify_fatal=1 --do_verify=1 --output=fio.log \
	--name=small --bs=4k --offset=0 --size=16M \
	--name=large --bs=64k --offset=64M --size=16M 2>fio.err &
fio_pid=$!
sleep 4
fe_alive "$fio_pid" || { cat fio.log fio.err; fe_fail "fio ended before the restart"; }
kill -STOP "$TGT_PID"
sleep 1
fe_kill_target
sleep 12
start=$(cut -d. -f1 /proc/uptime)
fe_start_target "$PWD/disk.img"
vm_wait_for 40 grep -q "re-established" ini.log || fe_fail "the initiator did not reconnect"
echo "# reconnected $(($(cut -d. -f1 /proc/uptime) - start)) s after the target was back:"
grep -h "re-issued\|re-established" ini.log | sed 's/^/#   /'
rc=0
wait "$fio_pid" || rc=$?
grep -h "err=" fio.log | sed 's/^/# /'
[ "$rc" = 0 ] || { tail -n 20 fio.err; fe_fail "fio failed across the restart (exit $rc)"; }
[ "$(grep -c 'err= 0' fio.log)" = 2 ] || fe_fail "fio reported errors"
reissued=$(sed -n 's/.*; \([0-9]*\) commands re-issued.*/\1/p' ini.log | paste -sd+ | bc)
[ "${reissued:-0}" -gt 0 ] || fe_fail "no command was re-issued: the restart came at a quiet time"
fe_check_no_dstate
fe_detach
fe_check_no_dstate
exit 0
