#!/bin/bash
# --ublk on the host (no VM): the option is there, conflicting frontends are refused, and
# on a machine without the ublk driver (or not root) the initiator fails at once with the
# reason, before it connects to anything.  The device itself is tested in the VM
# (tests/vm/t-ublk-*.sh).
. "$top_srcdir/tests/helpers.sh"

"$INITIATOR_BIN" --help | grep -q -- "--ublk" || fail "--help does not mention --ublk"

# Conflicts are argument errors: no target needed.
for extra in "--nbd-socket $T/x.sock" "--nbd-listen 127.0.0.1:1"; do
	rc=0
	# shellcheck disable=SC2086
	"$INITIATOR_BIN" tcp://127.0.0.1:1/disk0 --ublk $extra >"$T/conflict.log" 2>&1 || rc=$?
	[ "$rc" -ne 0 ] || fail "--ublk $extra accepted"
	grep -q "cannot be combined" "$T/conflict.log" ||
		{ cat "$T/conflict.log"; fail "--ublk $extra: no reason given"; }
done
printf '[attach a]\nuri = tcp://127.0.0.1:1/disk0\nublk = yes\nnbd-socket = %s\n' "$T/y.sock" \
	>"$T/ini.conf"
rc=0
"$INITIATOR_BIN" --config "$T/ini.conf" --attach a >"$T/conf.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && grep -q "cannot be combined" "$T/conf.log" ||
	{ cat "$T/conf.log"; fail "ublk = yes with nbd-socket accepted"; }

# A device id needs --ublk, and must be a ublk minor.
rc=0
"$INITIATOR_BIN" tcp://127.0.0.1:1/disk0 --nbd-socket "$T/z.sock" --ublk-id 5 >"$T/id.log" 2>&1 ||
	rc=$?
[ "$rc" -ne 0 ] && grep -q "needs --ublk" "$T/id.log" ||
	{ cat "$T/id.log"; fail "--ublk-id without --ublk accepted"; }
rc=0
"$INITIATOR_BIN" tcp://127.0.0.1:1/disk0 --ublk --ublk-id 1048576 >"$T/id.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && grep -q -- "--ublk-id: '1048576' is not a number in 0..1048575" "$T/id.log" ||
	{ cat "$T/id.log"; fail "--ublk-id 1048576 accepted"; }
printf '[attach a]\nuri = tcp://127.0.0.1:1/disk0\nublk-id = 3\nnbd-socket = %s\n' "$T/w.sock" \
	>"$T/id.conf"
rc=0
"$INITIATOR_BIN" --config "$T/id.conf" --attach a >"$T/id.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && grep -q "needs --ublk" "$T/id.log" ||
	{ cat "$T/id.log"; fail "ublk-id without ublk = yes accepted"; }

# Without the driver: a clear error before any connection, and a clean exit.
if [ -c /dev/ublk-control ] && [ "$(id -u)" = 0 ]; then
	note "this machine has /dev/ublk-control: skipping the no-driver check"
	echo "ok"
	exit 0
fi
rc=0
timeout 30 "$INITIATOR_BIN" "tcp://127.0.0.1:$(free_port)/disk0" --ublk >"$T/ini.log" 2>&1 || rc=$?
cat "$T/ini.log"
[ "$rc" -ne 124 ] || fail "the initiator hung without a ublk driver"
[ "$rc" -ne 0 ] || fail "the initiator succeeded without a ublk driver"
grep -q "/dev/ublk-control" "$T/ini.log" || fail "the error does not name /dev/ublk-control"
grep -q "cannot reach\|connect" "$T/ini.log" && fail "it tried the target before checking for ublk"
echo "ok"
