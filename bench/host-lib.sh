# Shared by the host benchmarks (nbd-bench.sh, ab-cpu.sh); sourced, not run.
# The caller sets BENCH_NAME (for messages) and, for bench_setup, SIZE.
# TARGET_CONF, EXPORT_CONF and INITIATOR_OPTS add [target] / [export] lines
# and initiator flags to every rdmablk pair start_rdmablk starts.

bench_need() { # bench_need CMD...: exit with a message unless all exist
	for c in "$@"; do
		command -v "$c" >/dev/null ||
			{ echo "$BENCH_NAME: needs $c (scripts/deps.sh)" >&2; exit 1; }
	done
}

# A work directory under BENCH_DIR (default /var/tmp), removed at exit with
# every daemon whose pid is in pids[], and a fully written SIZE file
# $W/disk.img in it: reads must return real data, not holes.
bench_setup() {
	W=$(mktemp -d "${BENCH_DIR:-/var/tmp}/rdmablk-$BENCH_NAME.XXXXXX")
	pids=()
	trap bench_cleanup EXIT
	fallocate -l "$SIZE" "$W/disk.img"
	dd if=/dev/urandom of="$W/disk.img" bs=1M count=$(($(stat -c %s "$W/disk.img") >> 20)) \
		conv=notrunc status=none
}

bench_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$W"
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_for() { # wait_for SECONDS TEST-ARGS...
	local end=$(($(date +%s) + $1))
	shift
	until test "$@"; do
		[ "$(date +%s)" -lt "$end" ] ||
			{ echo "$BENCH_NAME: timed out waiting for $*" >&2; exit 1; }
		sleep 0.1
	done
}

# start_rdmablk BUILD NAME POLL_US [SIDE]: target + initiator of BUILD over tcp
# loopback, exporting $W/disk.img as "bench" on the Unix socket $W/NAME.sock;
# their pids are appended to pids[] (the target's, then the initiator's).
# POLL_US goes to both daemons, or with SIDE target / initiator to that one
# only; empty leaves poll-us at its default.
start_rdmablk() {
	local b=$1 name=$2 poll=$3 side=${4:-both} port tpoll ipoll
	tpoll=$poll ipoll=$poll
	[ "$side" != initiator ] || tpoll=
	[ "$side" != target ] || ipoll=
	port=$(free_port)
	cat >"$W/$name-target.conf" <<CONF
[target]
listen = tcp://127.0.0.1:$port
threads = 1
log-level = warning
${tpoll:+poll-us = $tpoll}
${TARGET_CONF:-}
[export bench]
path = $W/disk.img
direct = no
${INLINE_WRITES:+inline-writes = $INLINE_WRITES}
${EXPORT_CONF:-}
CONF
	"$b/target/rdmablk-target" --config "$W/$name-target.conf" >"$W/$name-target.log" 2>&1 &
	pids+=($!)
	sleep 0.5
	"$b/initiator/rdmablk-initiator" "tcp://127.0.0.1:$port/bench" --queues 1 \
		${ipoll:+--poll-us "$ipoll"} --nbd-socket "$W/$name.sock" --log-level warning \
		${INITIATOR_OPTS:-} >"$W/$name-initiator.log" 2>&1 &
	pids+=($!)
	wait_for 20 -S "$W/$name.sock"
}
