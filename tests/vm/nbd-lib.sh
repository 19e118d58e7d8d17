# SPDX-License-Identifier: MIT
#
# Helpers for the kernel NBD guest tests (t-nbd-*.sh), sourced after lib.sh:
#
#     . "$(dirname "$0")/lib.sh"
#     . "$(dirname "$0")/nbd-lib.sh"
#
# The transport comes from the test's name: t-NAME-rdma.sh runs over rdma on Soft-RoCE
# (setup_rxe: target on rxe0/$TGT_ADDR, initiator through rxe1), t-NAME-tcp.sh over tcp on the
# VM's loopback. (The initiator must run in the initial network namespace: the kernel's "nbd"
# netlink family exists only there, so setup_netns is of no use here.)
#
#   nbd_setup                 modules, network for $NBD_TRANSPORT, binaries; skips if absent
#   nbd_start_target PATH [LINE...]   export PATH as "disk0" (extra [export] lines), wait ready
#   nbd_attach [ARGS...]      rdmablk-initiator URI --nbd-device $NBD_WANT (auto) ARGS; sets
#                             NBD_DEV (/dev/nbdN), NBD_NAME (nbdN), INI_PID once "attached" is
#                             printed
#   nbd_detach [SECS]         SIGTERM the initiator, which must exit 0 within SECS (60) and
#                             leave the device detached
#   nbd_detached              true when $NBD_NAME has size 0 and no pid file
#   nbd_check_no_dstate       fail if a process stays in D state (sampled over ~3 s)
#   nbd_kill_target           SIGKILL the target
#   nbd_stop_target           SIGTERM the target and wait
#   NBD_ATEXIT=CMD            run CMD at exit, after the daemons are stopped
# Logs in the scratch dir: target.log, ini.log (stderr), ini.out (stdout).

TGT_BIN=$top_builddir/target/rdmablk-target
INI_BIN=$top_builddir/initiator/rdmablk-initiator
NBD_PORT=4520
NBD_WANT=auto
TGT_PID=
INI_PID=
NBD_ATEXIT=
NBD_DEV=
NBD_NAME=

case "$(basename "$0" .sh)" in
*-tcp) NBD_TRANSPORT=tcp ;;
*) NBD_TRANSPORT=rdma ;;
esac

_nbd_dump_logs() {
	for _f in target.log ini.log ini.out; do
		[ -s "$_f" ] || continue
		echo "---- $_f (last 30 lines)"
		tail -n 30 "$_f"
	done
}

# Stop what we started, whatever happened; the runner kills the rest.
_nbd_dead() { ! _nbd_alive "$1"; }

_nbd_cleanup() {
	_rc=$?
	[ "$_rc" = 0 ] || [ "$_rc" = 77 ] || _nbd_dump_logs
	if [ -n "$INI_PID" ] && _nbd_alive "$INI_PID"; then
		kill -TERM "$INI_PID" 2>/dev/null
		vm_wait_for 30 _nbd_dead "$INI_PID" || kill -KILL "$INI_PID" 2>/dev/null
	fi
	if [ -n "$TGT_PID" ] && _nbd_alive "$TGT_PID"; then
		kill -KILL "$TGT_PID" 2>/dev/null
		wait "$TGT_PID" 2>/dev/null
	fi
	[ -z "$NBD_ATEXIT" ] || $NBD_ATEXIT
	exit "$_rc"
}

# A child that exited stays a zombie until waited for, and kill -0 still finds it.
_nbd_alive() {
	[ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

nbd_fail() {
	echo "FAIL: $*"
	exit 1
}

nbd_setup() {
	[ -x "$TGT_BIN" ] || vm_skip "$TGT_BIN not built"
	[ -x "$INI_BIN" ] || vm_skip "$INI_BIN not built"
	"$INI_BIN" --help | grep -q -- --nbd-device ||
		vm_fail "$INI_BIN has no --nbd-device option"
	"$INI_BIN" --version | grep -qw "$NBD_TRANSPORT" ||
		vm_fail "the build has no $NBD_TRANSPORT transport ($("$INI_BIN" --version))"
	vm_modprobe nbd
	trap _nbd_cleanup EXIT
	trap 'exit 130' INT TERM
	case $NBD_TRANSPORT in
	rdma)
		setup_rxe
		NBD_HOST=$TGT_ADDR
		;;
	tcp) NBD_HOST=127.0.0.1 ;;
	esac
	echo "# transport $NBD_TRANSPORT, target at $NBD_HOST:$NBD_PORT"
}

nbd_start_target() {
	_path=$1
	shift
	{
		echo "[target]"
		echo "listen = $NBD_TRANSPORT://$NBD_HOST:$NBD_PORT"
		echo "threads = 2"
		echo "[export disk0]"
		echo "path = $_path"
		for _l in "$@"; do echo "$_l"; done
	} >target.conf
	"$TGT_BIN" --config target.conf >target.log 2>&1 &
	TGT_PID=$!
	vm_wait_for 30 grep -q "ready:" target.log || nbd_fail "target did not become ready"
}

nbd_attach() {
	_uri=$NBD_TRANSPORT://$NBD_HOST:$NBD_PORT/disk0
	echo "# rdmablk-initiator $_uri --nbd-device $NBD_WANT $*"
	"$INI_BIN" "$_uri" --nbd-device "$NBD_WANT" "$@" >ini.out 2>ini.log &
	INI_PID=$!
	_t=0
	while ! grep -q '^attached /dev/nbd[0-9]*$' ini.out 2>/dev/null; do
		_nbd_alive "$INI_PID" || nbd_fail "initiator exited before attaching"
		[ $_t -lt 600 ] || nbd_fail "initiator did not attach within 60 s"
		sleep 0.1
		_t=$((_t + 1))
	done
	NBD_DEV=$(sed -n 's/^attached \(\/dev\/nbd[0-9]*\)$/\1/p' ini.out | head -n 1)
	NBD_NAME=${NBD_DEV#/dev/}
	[ -b "$NBD_DEV" ] || vm_wait_for 10 test -b "$NBD_DEV" || nbd_fail "$NBD_DEV is no block device"
	_size=$(cat "/sys/block/$NBD_NAME/size")
	[ "$_size" -gt 0 ] || nbd_fail "$NBD_DEV attached with size 0"
	echo "# attached $NBD_DEV: $((_size / 2)) KiB, $(ls /sys/block/$NBD_NAME/mq | wc -l) hw queues," \
		"max_sectors_kb $(cat /sys/block/$NBD_NAME/queue/max_sectors_kb)," \
		"backend $(cat /sys/block/$NBD_NAME/backend 2>/dev/null)"
}

nbd_detached() {
	[ "$(cat "/sys/block/$NBD_NAME/size" 2>/dev/null || echo 0)" = 0 ] &&
		[ ! -e "/sys/block/$NBD_NAME/pid" ]
}

nbd_detach() {
	_limit=${1:-60}
	kill -TERM "$INI_PID" || nbd_fail "initiator not running at detach"
	_t=0
	while _nbd_alive "$INI_PID"; do
		if [ $_t -ge $((_limit * 10)) ]; then
			ps -eo pid,stat,wchan:32,comm | awk '$2 ~ /^D/' | sed 's/^/# D: /'
			nbd_fail "initiator still running ${_limit}s after SIGTERM"
		fi
		sleep 0.1
		_t=$((_t + 1))
	done
	_rc=0
	wait "$INI_PID" || _rc=$?
	INI_PID=
	[ "$_rc" = 0 ] || nbd_fail "initiator exited $_rc after SIGTERM"
	nbd_detached || nbd_fail "$NBD_DEV still attached after the initiator exited" \
		"(size $(cat /sys/block/$NBD_NAME/size), pid file $(ls /sys/block/$NBD_NAME/pid 2>&1))"
	grep -q "detached" ini.log || nbd_fail "the initiator did not log the detach"
	echo "# $NBD_DEV detached in $((_t / 10)).$((_t % 10)) s"
}

# Processes stuck in D state fail the test (vm_no_dstate in lib.sh samples them).
nbd_check_no_dstate() {
	vm_no_dstate || nbd_fail "processes stuck in D state: $VM_DSTATE"
}

nbd_kill_target() {
	kill -KILL "$TGT_PID" || nbd_fail "target not running"
	wait "$TGT_PID" 2>/dev/null
	TGT_PID=
}

nbd_stop_target() {
	kill -TERM "$TGT_PID" || nbd_fail "target not running"
	vm_wait_for 30 _nbd_dead "$TGT_PID" || nbd_fail "target ignored SIGTERM"
	wait "$TGT_PID" 2>/dev/null
	TGT_PID=
}
