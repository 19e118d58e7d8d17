#!/bin/bash
# --ublk on the host (no VM): the option is there, conflicting frontends are refused, and
# on a machine without the ublk driver (or not root) the initiator fails at once with the
# reason, before it connects to anything.  The device itself is tested in the VM
# (tests/vm/t-ublk-*.sh).
. "$top_srcdir/tests/helpers.sh"

"$INITIATOR_BIN" --help | grep -q -- "--ublk" || fail "--help does not mention --ublk"

# refused WHAT PATTERN ARGS...: the initiator must exit non-zero at once, saying PATTERN.
refused() {
	local what=$1 pattern=$2 rc=0
	shift 2
	"$INITIATOR_BIN" "$@" >"$T/refused.log" 2>&1 || rc=$?
	[ "$rc" -ne 0 ] || fail "$what accepted"
	grep -q -- "$pattern" "$T/refused.log" || { cat "$T/refused.log"; fail "$what: no reason given"; }
}

# Conflicts are argument errors: no target needed.
refused "--ublk --nbd-socket" "cannot be combined" tcp://127.0.0.1:1/disk0 --ublk \
	--nbd-socket "$T/x.sock"
refused "--ublk --nbd-listen" "cannot be combined" tcp://127.0.0.1:1/disk0 --ublk \
	--nbd-listen 127.0.0.1:1
printf '[attach a]\nuri = tcp://127.0.0.1:1/disk0\nublk = yes\nnbd-socket = %s\n' "$T/y.sock" \
	>"$T/ini.conf"
refused "ublk = yes with nbd-socket" "cannot be combined" --config "$T/ini.conf" --attach a

# A device id needs --ublk, and must be a ublk minor.
refused "--ublk-id without --ublk" "needs --ublk" tcp://127.0.0.1:1/disk0 \
	--nbd-socket "$T/z.sock" --ublk-id 5
refused "--ublk-id 1048576" "--ublk-id: '1048576' is not a number in 0..1048575" \
	tcp://127.0.0.1:1/disk0 --ublk --ublk-id 1048576
printf '[attach a]\nuri = tcp://127.0.0.1:1/disk0\nublk-id = 3\nnbd-socket = %s\n' "$T/w.sock" \
	>"$T/id.conf"
refused "ublk-id without ublk = yes" "needs --ublk" --config "$T/id.conf" --attach a

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
