#!/bin/bash
# io_uring_submit may fail for a while (EAGAIN under memory pressure, EBUSY
# while the CQ overflows) and leave the SQEs in the ring.  The target must
# submit them again: at QD1 nothing else would push a stranded SQE out, and
# the command would hang until the initiator's timeout.  A shim fails every
# third submit.
. "$top_srcdir/tests/helpers.sh"

port=$(free_port)
truncate -s 16M "$T/disk.img"
write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
URING_FAIL_EVERY=3 TARGET_PRELOAD=uring-fail.so start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/disk0" --queues 1 --timeout 5000
ops=()
for i in 1 2 3 4 5 6; do
	ops+=("write:$((i * 65536)):16384:$((i + 16))")
done
for i in 1 2 3 4 5 6; do
	ops+=("read:$((i * 65536)):16384:$((i + 16))")
done
"$top_builddir/tests/nbd-ops" "$(nbd_uri ini disk0)" "${ops[@]}" ||
	fail "I/O failed while io_uring_submit failed now and then"
grep -q "io_uring_submit of .*: Resource temporarily unavailable; retrying" "$T/target.log" ||
	fail "the shim never made a submit fail"
echo "ok"
