#!/bin/bash
# Side-by-side benchmark through fio's nbd engine, all peers in the same run
# on the same backing file (on /dev/shm so the disk does not dominate):
#   a  rdmablk: fio -> initiator (NBD, Unix socket) -> tcp loopback -> target
#   b  nbdkit nbd plugin (Unix socket) -> TCP loopback -> nbdkit file plugin
#   c  nbdkit file plugin directly (Unix socket)
# Prints one table line per job with IOPS/bandwidth, mean latency and the
# ratios a/b and a/c.
#   bench/nbd-bench.sh [BUILD_DIR]      (default: build)
#   RUNTIME=10 SIZE=1G                   per-job seconds, file size
#   TARGET_CONF="poll-us = 50"           extra [target] lines for (a)
#   INITIATOR_OPTS="--poll-us 50"        extra initiator flags for (a)
#   ONLY=4k-randread-qd1                 run only the jobs whose name matches
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
build=$(cd "$build" && pwd)
RUNTIME=${RUNTIME:-10}
SIZE=${SIZE:-1G}
for c in fio nbdkit python3; do
	command -v $c >/dev/null || { echo "bench: needs $c (scripts/deps.sh)" >&2; exit 1; }
done

W=$(mktemp -d /dev/shm/rdmablk-bench.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_for() { # wait_for SECONDS TEST-ARGS...
	local end=$(($(date +%s) + $1))
	shift
	until test "$@"; do
		[ "$(date +%s)" -lt "$end" ] || { echo "bench: timed out waiting for $*" >&2; exit 1; }
		sleep 0.1
	done
}

# A fully written file: reads must return real data, not holes.
fallocate -l "$SIZE" "$W/disk.img"
dd if=/dev/urandom of="$W/disk.img" bs=1M count=$(($(stat -c %s "$W/disk.img") >> 20)) \
	conv=notrunc status=none

# (a) rdmablk over tcp
port=$(free_port)
cat >"$W/target.conf" <<EOF
[target]
listen = tcp://127.0.0.1:$port
threads = 1
log-level = warning
${TARGET_CONF:-}
[export bench]
path = $W/disk.img
EOF
"$build/target/rdmablk-target" --config "$W/target.conf" >"$W/target.log" 2>&1 &
pids+=($!)
sleep 0.5
"$build/initiator/rdmablk-initiator" "tcp://127.0.0.1:$port/bench" --queues 1 \
	--nbd-socket "$W/a.sock" --log-level warning ${INITIATOR_OPTS:-} >"$W/initiator.log" 2>&1 &
pids+=($!)
wait_for 20 -S "$W/a.sock"

# (b) nbdkit nbd plugin -> TCP -> nbdkit file plugin
bport=$(free_port)
nbdkit --exit-with-parent -f -i 127.0.0.1 -p "$bport" file "$W/disk.img" &
pids+=($!)
sleep 0.5
nbdkit --exit-with-parent -f -U "$W/b.sock" nbd hostname=127.0.0.1 port="$bport" &
pids+=($!)
# (c) nbdkit file plugin directly
nbdkit --exit-with-parent -f -U "$W/c.sock" file "$W/disk.img" &
pids+=($!)
wait_for 20 -S "$W/b.sock"
wait_for 20 -S "$W/c.sock"

# name rw bs iodepth
JOBS=(
	"4k-randread-qd32 randread 4k 32"
	"4k-randwrite-qd32 randwrite 4k 32"
	"128k-seqread-qd8 read 128k 8"
	"4k-randread-qd1 randread 4k 1"
)

run_fio() { # run_fio SOCKET EXPORT rw bs qd -> "iops bw_MiBs lat_us"
	local sock=$1 exp=$2 rw=$3 bs=$4 qd=$5
	fio --name=b --ioengine=nbd --uri="nbd+unix:///$exp?socket=$sock" --rw="$rw" --bs="$bs" \
		--iodepth="$qd" --time_based --runtime="$RUNTIME" --ramp_time=1 --size="$SIZE" \
		--output-format=json --output="$W/fio.json" >/dev/null 2>&1 ||
		{ echo "bench: fio failed against $sock" >&2; cat "$W/fio.json" >&2; exit 1; }
	python3 - "$W/fio.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
d = j["read"] if j["read"]["io_bytes"] else j["write"]
print("%.0f %.1f %.1f" % (d["iops"], d["bw"] / 1024.0, d["clat_ns"]["mean"] / 1000.0))
PY
}

printf "%-19s %-22s %-22s %-22s %6s %6s\n" job "a rdmablk/tcp" "b nbdkit nbd->file" \
	"c nbdkit file" "a/b" "a/c"
for j in "${JOBS[@]}"; do
	set -- $j
	name=$1 rw=$2 bs=$3 qd=$4
	[[ $name == *${ONLY:-}* ]] || continue
	ra=$(run_fio "$W/a.sock" bench "$rw" "$bs" "$qd")
	rb=$(run_fio "$W/b.sock" "" "$rw" "$bs" "$qd")
	rc=$(run_fio "$W/c.sock" "" "$rw" "$bs" "$qd")
	python3 - "$name" "$bs" "$ra" "$rb" "$rc" <<'PY'
import sys
name, bs = sys.argv[1], sys.argv[2]
a, b, c = (list(map(float, x.split())) for x in sys.argv[3:6])
big = bs.endswith("k") and int(bs[:-1]) >= 64
fmt = lambda r: ("%7.1f MiB/s %6.0fus" % (r[1], r[2])) if big else ("%7.0f IOPS %7.0fus" % (r[0], r[2]))
key = 1 if big else 0
print("%-19s %-22s %-22s %-22s %6.2f %6.2f" % (name, fmt(a), fmt(b), fmt(c), a[key] / b[key], a[key] / c[key]))
PY
done
