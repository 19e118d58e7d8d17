# SPDX-License-Identifier: MIT
#
# Helpers for the kernel NBD guest tests (t-nbd-*.sh), sourced after lib.sh; the shared part
# (target, logs, cleanup, FE_DEV, fe_fail, ...) is in frontend-lib.sh.
#
#   fe_setup                  nbd module, network for $FE_TRANSPORT, binaries; skips if absent
#   fe_attach [ARGS...]       rdmablk-initiator URI --nbd-device $NBD_WANT (auto) ARGS; sets
#                             FE_DEV (/dev/nbdN), FE_NAME (nbdN), INI_PID once "attached" is
#                             printed
#   fe_detach [SECS]          SIGTERM the initiator, which must exit 0 within SECS (60) and
#                             leave the device detached
#   nbd_detached              true when $FE_NAME has size 0 and no pid file

. "$top_srcdir/tests/vm/frontend-lib.sh"
NBD_WANT=auto

fe_setup() { _fe_setup nbd --nbd-device; }

fe_attach() {
	_fe_launch nbd "$FE_URI" --nbd-device "$NBD_WANT" "$@"
	echo "# attached $FE_DEV: $(($(cat "/sys/block/$FE_NAME/size") / 2)) KiB," \
		"$(ls "/sys/block/$FE_NAME/mq" | wc -l) hw queues," \
		"max_sectors_kb $(cat "/sys/block/$FE_NAME/queue/max_sectors_kb")," \
		"backend $(cat "/sys/block/$FE_NAME/backend" 2>/dev/null)"
}

nbd_detached() {
	[ "$(cat "/sys/block/$FE_NAME/size" 2>/dev/null || echo 0)" = 0 ] &&
		[ ! -e "/sys/block/$FE_NAME/pid" ]
}

fe_detach() {
	_fe_terminate "${1:-60}"
	nbd_detached || fe_fail "$FE_DEV still attached after the initiator exited" \
		"(size $(cat "/sys/block/$FE_NAME/size"), pid file $(ls "/sys/block/$FE_NAME/pid" 2>&1))"
	grep -q "detached" ini.log || fe_fail "the initiator did not log the detach"
	echo "# $FE_DEV detached in $((FE_TOOK / 10)).$((FE_TOOK % 10)) s"
}
