# SPDX-License-Identifier: MIT
# Shared helpers for the shell tests: source it, then use the functions.
#   requires CMD...      skip (exit 77) with the reason when a tool is missing;
#                        under CI=true a missing tool is a failure instead
#   fail MSG / note MSG
#   start_target CONF    rdmablk-target in the background, pidfile, waits ready
#   start_disk_target    the same for a 16 MiB disk0 on a free port ($port)
#   start_initiator ...  rdmablk-initiator in the background, waits until ready
#   stop_pidfile F       SIGTERM, wait (bounded), SIGKILL if it will not die
# Every daemon started here is stopped by the EXIT trap.

set -eu

: "${top_srcdir:=$(cd "$(dirname "$0")/.." && pwd)}"
: "${top_builddir:=$top_srcdir}"
TARGET_BIN=${TARGET_BIN:-$top_builddir/target/rdmablk-target}
INITIATOR_BIN=${INITIATOR_BIN:-$top_builddir/initiator/rdmablk-initiator}
TEST_NAME=$(basename "$0" .sh)
# Transport and target address of the end-to-end tests: tcp on loopback on
# the host; the VM suite runs the same scripts over rdma (tests/vm/t-e2e-rdma-*.sh).
E2E_TRANSPORT=${E2E_TRANSPORT:-tcp}
E2E_ADDR=${E2E_ADDR:-127.0.0.1}

fail() {
	echo "FAIL: $TEST_NAME: $*" >&2
	exit 1
}

note() {
	echo "# $*"
}

skip() {
	if [ "${CI:-}" = true ]; then
		echo "FAIL (skip not allowed in CI): $TEST_NAME: $*" >&2
		exit 1
	fi
	echo "SKIP: $TEST_NAME: $*"
	exit 77
}

requires() {
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || skip "requires $c (not installed)"
	done
}

# Scratch directory; removed at exit unless KEEP_TEST_DIR=1.
T=$(mktemp -d "${TMPDIR:-/tmp}/rdmablk-$TEST_NAME.XXXXXX")
_pidfiles=""

cleanup() {
	local rc=$?
	for p in $_pidfiles; do
		stop_pidfile "$p" || true
	done
	if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
		for l in "$T"/*.log; do
			[ -f "$l" ] || continue
			echo "---- $l (last 40 lines)"
			tail -n 40 "$l"
		done
	fi
	[ "${KEEP_TEST_DIR:-0}" = 1 ] || rm -rf "$T"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A TCP port on 127.0.0.1 that is free right now.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# target_url PORT: where the initiator finds the target ("tcp://127.0.0.1:PORT").
target_url() {
	echo "$E2E_TRANSPORT://$E2E_ADDR:$1"
}

# wait_until SECONDS CMD...: poll CMD every 0.1 s.
wait_until() {
	local limit=$1
	shift
	local end=$(($(date +%s) + limit))
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.1
	done
}

pid_alive() {
	[ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

# wait_child_ok PID SECONDS WHAT [OUTPUT]: the background child PID must end
# within SECONDS and exit 0; otherwise fail naming WHAT (and showing OUTPUT).
wait_child_ok() {
	local pid=$1 limit=$2 what=$3 out=${4:-/dev/null} rc=0
	timeout "$limit" tail --pid="$pid" -f /dev/null ||
		fail "$what did not complete within ${limit}s"
	wait "$pid" || rc=$?
	[ "$rc" -eq 0 ] || fail "$what failed (exit $rc): $(cat "$out")"
}

# stop_pidfile FILE [SECONDS]: SIGTERM, then SIGKILL after the grace time.
stop_pidfile() {
	local f=$1 grace=${2:-10} pid
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		if ! wait_until "$grace" sh -c "! kill -0 $pid 2>/dev/null"; then
			echo "# $f: pid $pid ignored SIGTERM for ${grace}s; killing" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	wait "$pid" 2>/dev/null || true
	rm -f "$f"
}

# stop_and_status FILE: SIGTERM the daemon and wait for it; its exit code is
# left in $stop_rc (not echoed: wait only works in the shell that started it).
stop_and_status() {
	local f=$1 pid
	pid=$(cat "$f")
	stop_rc=0
	kill -TERM "$pid"
	wait "$pid" || stop_rc=$?
	rm -f "$f"
}

# write_target_conf FILE PORT EXPORT PATH [extra export lines...]
# TARGET_EXTRA: more [target] lines, newline separated ("buffers = 4").
write_target_conf() {
	local f=$1 port=$2 name=$3 path=$4
	shift 4
	{
		echo "[target]"
		echo "listen = $(target_url "$port")"
		echo "threads = ${TARGET_THREADS:-2}"
		echo "log-level = ${TARGET_LOG_LEVEL:-info}"
		[ -z "${TARGET_EXTRA:-}" ] || printf '%s\n' "$TARGET_EXTRA"
		echo
		echo "[export $name]"
		echo "path = $path"
		for l in "$@"; do echo "$l"; done
	} >"$f"
}

# shim_preload NAME.so: LD_PRELOAD for a test shim built in tests/; in a
# sanitizer build the ASan runtime has to come first.
shim_preload() {
	local shim="$top_builddir/tests/$1" asan
	[ -f "$shim" ] || fail "test shim $shim was not built"
	asan=$(ldd "$TARGET_BIN" | awk '/libasan/ { print $3 }')
	echo "${asan:+$asan }$shim"
}

# start_target CONF [NAME]: pidfile $T/NAME.pid, log $T/NAME.log.
# TARGET_PRELOAD=SHIM.so: the target runs with that test shim preloaded.
start_target() {
	local conf=$1 name=${2:-target}
	# Emptied here, not by the background job's redirection: that may run
	# after the wait below has found "ready:" of this name's previous run.
	: >"$T/$name.log"
	env ${TARGET_PRELOAD:+"LD_PRELOAD=$(shim_preload "$TARGET_PRELOAD")"} \
		"$TARGET_BIN" --config "$conf" --pidfile "$T/$name.pid" >"$T/$name.log" 2>&1 &
	echo $! >"$T/$name.pid.launch"
	_pidfiles="$_pidfiles $T/$name.pid"
	if ! wait_until 60 grep -q "ready:" "$T/$name.log"; then
		cat "$T/$name.log" >&2
		fail "target $name did not become ready"
	fi
}

# start_disk_target: the common case, a target exporting a sparse 16 MiB
# $T/disk.img as disk0 on a free port (or TEST_PORT), left in $port.
start_disk_target() {
	port=${TEST_PORT:-$(free_port)}
	truncate -s 16M "$T/disk.img"
	write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
	start_target "$T/target.conf"
}

# start_initiator NAME ARGS...: runs in the background; waits until it logs
# "ready:" (all queues connected) and its NBD Unix socket $T/NAME.sock is there.
# INITIATOR_PRELOAD=SHIM.so: the initiator runs with that test shim preloaded.
start_initiator() {
	local name=$1
	shift
	# As in start_target: no "ready:" or socket of an earlier run counts.
	: >"$T/$name.log"
	rm -f "$T/$name.sock"
	env ${INITIATOR_PRELOAD:+"LD_PRELOAD=$(shim_preload "$INITIATOR_PRELOAD")"} \
		"$INITIATOR_BIN" "$@" --nbd-socket "$T/$name.sock" >"$T/$name.log" 2>&1 &
	echo $! >"$T/$name.pid"
	_pidfiles="$_pidfiles $T/$name.pid"
	# The socket exists before the session is up; "ready:" follows CONNECT
	# of every queue, so a test may break the target right after this.
	if ! wait_until 60 grep -q "ready: export" "$T/$name.log" ||
		! test -S "$T/$name.sock"; then
		cat "$T/$name.log" >&2
		fail "initiator $name did not start serving NBD"
	fi
}

nbd_uri() {
	echo "nbd+unix:///$2?socket=$T/$1.sock"
}
