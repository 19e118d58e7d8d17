#!/bin/bash
# With the smallest transfer-timeout (1 s), queues that sit idle for several
# seconds after I/O must stay up: their last answers may still be waiting for
# the host's acknowledgement (tcp's lazy acks; over rdma the SEND completions
# a quiet reactor does not poll), and the target must collect those, not
# blame the host.  Runs over rdma in the VM too (tests/rdma-e2e.sh).
. "$top_srcdir/tests/helpers.sh"

port=$(free_port)
truncate -s 16M "$T/disk.img"
TARGET_EXTRA="transfer-timeout = 1000" \
	write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
grep -q "^transfer-timeout = 1000" "$T/target.conf" || fail "could not set transfer-timeout"
start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/disk0" --queues 2
uri=$(nbd_uri ini disk0)
for round in 1 2 3; do
	"$top_builddir/tests/nbd-ops" "$uri" "write:$((round * 65536)):65536:$round" \
		"read:$((round * 65536)):65536:$round" "read:0:4096:0" ||
		fail "round $round: I/O failed"
	sleep 4
done
grep -q "transfer-timeout (" "$T/target.log" &&
	fail "an idle queue hit transfer-timeout: $(grep -m1 'transfer-timeout (' "$T/target.log")"
grep -q "closing" "$T/target.log" && fail "the target closed a queue: $(grep -m1 closing "$T/target.log")"
grep -q "lost\|reconnect" "$T/ini.log" && fail "the initiator lost a queue"
echo "ok"
