# SPDX-License-Identifier: MIT
#
# Helpers for the ublk guest tests (t-ublk-*.sh), sourced after lib.sh:
#
#     . "$(dirname "$0")/lib.sh"
#     . "$(dirname "$0")/ublk-lib.sh"
#
# The transport comes from the test's name: t-NAME-rdma.sh runs over rdma on Soft-RoCE
# (setup_rxe: target on rxe0/$TGT_ADDR, initiator through rxe1), t-NAME-tcp.sh over tcp on the
# VM's loopback (the initiator needs /dev/ublk-control and the target the same files: one
# namespace is simplest).
#
#   ublk_setup                modules, network for $UBLK_TRANSPORT, binaries; skips if absent
#   ublk_start_target PATH [LINE...]   export PATH as "disk0" (extra [export] lines), wait ready
#   ublk_attach [ARGS...]     rdmablk-initiator URI --ublk ARGS; sets UBLK_DEV (/dev/ublkbN),
#                             UBLK_NAME (ublkbN), UBLK_ID (N), INI_PID once "attached" is printed
#   ublk_attach_conf FILE NAME [ARGS...]   the same with --config FILE --attach NAME
#   ublk_detach [SECS]        SIGTERM the initiator, which must exit 0 within SECS (60) and
#                             leave neither /dev/ublkbN nor /dev/ublkcN behind
#   ublk_gone                 true when the device's block and char nodes are gone
#   ublk_check_no_dstate      fail if a process stays in D state (sampled over ~3 s)
#   ublk_kill_target          SIGKILL the target
#   ublk_fail MSG             print FAIL, exit 1 (logs are dumped at exit)
#   UBLK_ATEXIT=CMD           run CMD at exit, after the daemons are stopped
# Logs in the scratch dir: target.log, ini.log (stderr), ini.out (stdout).

TGT_BIN=$top_builddir/target/rdmablk-target
INI_BIN=$top_builddir/initiator/rdmablk-initiator
UBLK_PORT=4520
TGT_PID=
INI_PID=
UBLK_ATEXIT=
UBLK_DEV=
UBLK_NAME=
UBLK_ID=

case "$(basename "$0" .sh)" in
*-tcp) UBLK_TRANSPORT=tcp ;;
*) UBLK_TRANSPORT=rdma ;;
esac

_ublk_dump_logs() {
	for _f in target.log ini.log ini.out; do
		[ -s "$_f" ] || continue
		echo "---- $_f (last 30 lines)"
		tail -n 30 "$_f"
	done
}

# A child that exited stays a zombie until waited for, and kill -0 still finds it.
_ublk_alive() {
	[ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

_ublk_dead() { ! _ublk_alive "$1"; }

# Stop what we started, whatever happened; the runner kills the rest.
_ublk_cleanup() {
	_rc=$?
	[ "$_rc" = 0 ] || [ "$_rc" = 77 ] || _ublk_dump_logs
	[ -z "$UBLK_DEV" ] || umount "$UBLK_DEV" 2>/dev/null
	if [ -n "$INI_PID" ] && _ublk_alive "$INI_PID"; then
		kill -TERM "$INI_PID" 2>/dev/null
		vm_wait_for 30 _ublk_dead "$INI_PID" || kill -KILL "$INI_PID" 2>/dev/null
	fi
	if [ -n "$TGT_PID" ] && _ublk_alive "$TGT_PID"; then
		kill -KILL "$TGT_PID" 2>/dev/null
		wait "$TGT_PID" 2>/dev/null
	fi
	[ -z "$UBLK_ATEXIT" ] || $UBLK_ATEXIT
	exit "$_rc"
}

ublk_fail() {
	echo "FAIL: $*"
	exit 1
}

_ublk_rxe_stat() { rdma statistic show link "$1/1" | sed -n "s/.* $2 \([0-9]*\).*/\1/p"; }

# rdma: the I/O really crossed the veth (rxe1 sent, rxe0 received).
_ublk_check_rxe() {
	[ "$UBLK_TRANSPORT" = rdma ] || return 0
	_sent=$(($(_ublk_rxe_stat "$INI_DEV" sent_pkts) - ${UBLK_SENT0:-0}))
	[ "$_sent" -gt 1000 ] || ublk_fail "only $_sent packets left $INI_DEV: the I/O did not use rdma"
	echo "# $INI_DEV sent $_sent packets, rdma_sends $(_ublk_rxe_stat "$INI_DEV" rdma_sends)," \
		"rdma_recvs $(_ublk_rxe_stat "$INI_DEV" rdma_recvs)"
}

ublk_setup() {
	[ -x "$TGT_BIN" ] || vm_skip "$TGT_BIN not built"
	[ -x "$INI_BIN" ] || vm_skip "$INI_BIN not built"
	"$INI_BIN" --help | grep -q -- --ublk || vm_fail "$INI_BIN has no --ublk option"
	"$INI_BIN" --version | grep -qw "$UBLK_TRANSPORT" ||
		vm_fail "the build has no $UBLK_TRANSPORT transport ($("$INI_BIN" --version))"
	vm_modprobe ublk_drv
	[ -c /dev/ublk-control ] || vm_fail "ublk_drv loaded but /dev/ublk-control is missing"
	trap _ublk_cleanup EXIT
	trap 'exit 130' INT TERM
	case $UBLK_TRANSPORT in
	rdma)
		setup_rxe
		UBLK_HOST=$TGT_ADDR
		UBLK_SENT0=$(_ublk_rxe_stat "$INI_DEV" sent_pkts)
		;;
	tcp) UBLK_HOST=127.0.0.1 ;;
	esac
	echo "# transport $UBLK_TRANSPORT, target at $UBLK_HOST:$UBLK_PORT"
}

ublk_start_target() {
	_path=$1
	shift
	{
		echo "[target]"
		echo "listen = $UBLK_TRANSPORT://$UBLK_HOST:$UBLK_PORT"
		echo "threads = 2"
		echo "[export disk0]"
		echo "path = $_path"
		for _l in "$@"; do echo "$_l"; done
	} >target.conf
	"$TGT_BIN" --config target.conf >target.log 2>&1 &
	TGT_PID=$!
	vm_wait_for 30 grep -q "ready:" target.log || ublk_fail "target did not become ready"
}

ublk_attach() {
	_ublk_launch "$UBLK_TRANSPORT://$UBLK_HOST:$UBLK_PORT/disk0" --ublk "$@"
}

# The same from a config file (its [attach NAME] section sets ublk = yes).
ublk_attach_conf() {
	_conf=$1 _name=$2
	shift 2
	_ublk_launch --config "$_conf" --attach "$_name" "$@"
}

_ublk_launch() {
	echo "# rdmablk-initiator $*"
	"$INI_BIN" "$@" >ini.out 2>ini.log &
	INI_PID=$!
	_t=0
	while ! grep -q '^attached /dev/ublkb[0-9]*$' ini.out 2>/dev/null; do
		_ublk_alive "$INI_PID" || ublk_fail "initiator exited before attaching"
		[ $_t -lt 600 ] || ublk_fail "initiator did not attach within 60 s"
		sleep 0.1
		_t=$((_t + 1))
	done
	UBLK_DEV=$(sed -n 's/^attached \(\/dev\/ublkb[0-9]*\)$/\1/p' ini.out | head -n 1)
	UBLK_NAME=${UBLK_DEV#/dev/}
	UBLK_ID=${UBLK_NAME#ublkb}
	[ -b "$UBLK_DEV" ] || vm_wait_for 10 test -b "$UBLK_DEV" ||
		ublk_fail "$UBLK_DEV is no block device"
	_q=/sys/block/$UBLK_NAME/queue
	_size=$(cat "/sys/block/$UBLK_NAME/size")
	[ "$_size" -gt 0 ] || ublk_fail "$UBLK_DEV attached with size 0"
	echo "# attached $UBLK_DEV after $((_t / 10)).$((_t % 10)) s: $((_size / 2)) KiB," \
		"$(ls "/sys/block/$UBLK_NAME/mq" | wc -l) hw queues x $(cat "$_q/nr_requests")," \
		"max_sectors_kb $(cat "$_q/max_sectors_kb"), block $(cat "$_q/logical_block_size")" \
		"/$(cat "$_q/physical_block_size"), cache '$(cat "$_q/write_cache")'," \
		"fua $(cat "$_q/fua"), discard_max $(cat "$_q/discard_max_bytes")," \
		"write_zeroes_max $(cat "$_q/write_zeroes_max_bytes"), ro $(cat "/sys/block/$UBLK_NAME/ro")"
}

ublk_gone() {
	[ ! -e "/sys/block/$UBLK_NAME" ] && [ ! -e "/dev/$UBLK_NAME" ] &&
		[ ! -e "/dev/ublkc$UBLK_ID" ] && [ ! -e "/sys/class/ublk-char/ublkc$UBLK_ID" ]
}

ublk_detach() {
	_limit=${1:-60}
	kill -TERM "$INI_PID" || ublk_fail "initiator not running at detach"
	_t=0
	while _ublk_alive "$INI_PID"; do
		if [ $_t -ge $((_limit * 10)) ]; then
			ps -eo pid,stat,wchan:32,comm | awk '$2 ~ /^D/' | sed 's/^/# D: /'
			ublk_fail "initiator still running ${_limit}s after SIGTERM"
		fi
		sleep 0.1
		_t=$((_t + 1))
	done
	_rc=0
	wait "$INI_PID" || _rc=$?
	INI_PID=
	[ "$_rc" = 0 ] || ublk_fail "initiator exited $_rc after SIGTERM"
	# Node removal is asynchronous (devtmpfs): give it a moment.
	vm_wait_for 5 ublk_gone || ublk_fail "$UBLK_DEV still present after the initiator exited" \
		"($(ls -d /sys/block/$UBLK_NAME /dev/$UBLK_NAME /dev/ublkc$UBLK_ID 2>&1 | tr '\n' ' '))"
	grep -q "deleted" ini.log || ublk_fail "the initiator did not log DEL_DEV"
	_ublk_check_rxe
	echo "# $UBLK_DEV detached in $((_t / 10)).$((_t % 10)) s; initiator log:"
	tail -n 40 ini.log | sed 's/^/#   /'
}

# Processes stuck in D state fail the test (vm_no_dstate in lib.sh samples them).
ublk_check_no_dstate() {
	vm_no_dstate || ublk_fail "processes stuck in D state: $VM_DSTATE"
}

ublk_kill_target() {
	kill -KILL "$TGT_PID" || ublk_fail "target not running"
	wait "$TGT_PID" 2>/dev/null
	TGT_PID=
}
