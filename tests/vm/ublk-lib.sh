# SPDX-License-Identifier: MIT
#
# Helpers for the ublk guest tests (t-ublk-*.sh), sourced after lib.sh; the shared part
# (target, logs, cleanup, FE_DEV, fe_fail, ...) is in frontend-lib.sh.
#
#   fe_setup                  ublk_drv, network for $FE_TRANSPORT, binaries; skips if absent
#   fe_attach [ARGS...]       rdmablk-initiator URI --ublk ARGS; sets FE_DEV (/dev/ublkbN),
#                             FE_NAME (ublkbN), UBLK_ID (N), INI_PID once "attached" is printed
#   ublk_attach_conf FILE NAME [ARGS...]   the same with --config FILE --attach NAME
#   fe_detach [SECS]          SIGTERM the initiator, which must exit 0 within SECS (60) and
#                             leave neither /dev/ublkbN nor /dev/ublkcN behind; over rdma, the
#                             I/O must have crossed the veth
#   ublk_gone                 true when the device's block and char nodes are gone

. "$top_srcdir/tests/vm/frontend-lib.sh"
UBLK_ID=

fe_setup() {
	_fe_setup ublk_drv --ublk
	[ -c /dev/ublk-control ] || vm_fail "ublk_drv loaded but /dev/ublk-control is missing"
}

fe_attach() { _ublk_launch "$FE_URI" --ublk "$@"; }

# The same from a config file (its [attach NAME] section sets ublk = yes).
ublk_attach_conf() {
	_conf=$1 _name=$2
	shift 2
	_ublk_launch --config "$_conf" --attach "$_name" "$@"
}

_ublk_launch() {
	_fe_launch ublkb "$@"
	UBLK_ID=${FE_NAME#ublkb}
	_q=/sys/block/$FE_NAME/queue
	echo "# attached $FE_DEV after $((FE_TOOK / 10)).$((FE_TOOK % 10)) s:" \
		"$(($(cat "/sys/block/$FE_NAME/size") / 2)) KiB," \
		"$(ls "/sys/block/$FE_NAME/mq" | wc -l) hw queues x $(cat "$_q/nr_requests")," \
		"max_sectors_kb $(cat "$_q/max_sectors_kb"), block $(cat "$_q/logical_block_size")" \
		"/$(cat "$_q/physical_block_size"), cache '$(cat "$_q/write_cache")'," \
		"fua $(cat "$_q/fua"), discard_max $(cat "$_q/discard_max_bytes")," \
		"write_zeroes_max $(cat "$_q/write_zeroes_max_bytes"), ro $(cat "/sys/block/$FE_NAME/ro")"
}

ublk_gone() {
	[ ! -e "/sys/block/$FE_NAME" ] && [ ! -e "/dev/$FE_NAME" ] &&
		[ ! -e "/dev/ublkc$UBLK_ID" ] && [ ! -e "/sys/class/ublk-char/ublkc$UBLK_ID" ]
}

fe_detach() {
	_fe_terminate "${1:-60}"
	# Node removal is asynchronous (devtmpfs): give it a moment.
	vm_wait_for 60 ublk_gone || fe_fail "$FE_DEV still present after the initiator exited" \
		"($(ls -d "/sys/block/$FE_NAME" "/dev/$FE_NAME" "/dev/ublkc$UBLK_ID" 2>&1 | tr '\n' ' '))"
	grep -q "deleted" ini.log || fe_fail "the initiator did not log DEL_DEV"
	fe_check_rxe 1000
	echo "# $FE_DEV detached in $((FE_TOOK / 10)).$((FE_TOOK % 10)) s; initiator log:"
	tail -n 40 ini.log | sed 's/^/#   /'
}
