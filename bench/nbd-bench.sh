#!/bin/bash
# Side-by-side benchmark through fio's nbd engine, all peers in the same run
# on the same backing file:
#   a   rdmablk: fio -> initiator (NBD, Unix socket) -> tcp loopback -> target,
#       defaults (event driven: every hop sleeps when it has nothing to do)
#   ap  the same with hybrid polling, poll-us = POLL_US on both daemons
#   b   nbdkit nbd plugin (Unix socket) -> TCP loopback -> nbdkit file plugin
#   c   nbdkit file plugin directly (Unix socket)
# The file lives on BENCH_DIR (default /var/tmp) and is read through the page
# cache by everyone (nbdkit's file plugin does so by default; the rdmablk
# export sets direct = no), so the disk does not dominate.  tmpfs is a poor
# choice for rdmablk: it has no non-blocking reads, so io_uring hands every
# request to a worker thread (BENCH_DIR=/dev/shm shows that).
# Prints one line per job: IOPS or bandwidth and mean latency per peer, and
# the ratios a/b, a/c, ap/b, ap/c.
#   bench/nbd-bench.sh [BUILD_DIR]      (default: build)
#   RUNTIME=10 SIZE=1G                   per-job seconds, file size
#   POLL_US=50                           poll-us for ap; 0 leaves ap out
#   ONLY=qd1                             run only the jobs whose name has this
#   TARGET_CONF=, EXPORT_CONF=, INITIATOR_OPTS=
#                                        extra [target] / [export] lines and
#                                        initiator flags for a and ap
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
build=$(cd "$build" && pwd)
RUNTIME=${RUNTIME:-10}
SIZE=${SIZE:-1G}
POLL_US=${POLL_US:-50}
BENCH_NAME=bench
. "$src/bench/host-lib.sh"
bench_need fio nbdkit python3
bench_setup

peers=(a)
start_rdmablk "$build" a 0
if [ "$POLL_US" != 0 ]; then
	start_rdmablk "$build" ap "$POLL_US"
	peers+=(ap)
fi
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
peers+=(b c)

# name rw bs iodepth
JOBS=(
	"4k-randread-qd32 randread 4k 32"
	"4k-randwrite-qd32 randwrite 4k 32"
	"128k-seqread-qd8 read 128k 8"
	"4k-randread-qd1 randread 4k 1"
)

run_fio() { # run_fio PEER rw bs qd -> "iops bw_MiBs lat_us"
	local peer=$1 rw=$2 bs=$3 qd=$4 exp=""
	case $peer in a | ap) exp=bench ;; esac
	# Every peer starts with the whole file cached: hosts that reclaim cold
	# page cache proactively (DAMON) would otherwise make whichever peer
	# runs first after a pause read from the disk.
	cat "$W/disk.img" >/dev/null
	fio --name=b --ioengine=nbd --uri="nbd+unix:///$exp?socket=$W/$peer.sock" --rw="$rw" \
		--bs="$bs" --iodepth="$qd" --time_based --runtime="$RUNTIME" --ramp_time=1 \
		--size="$SIZE" --output-format=json --output="$W/fio.json" >/dev/null 2>&1 ||
		{ echo "bench: fio failed against $peer" >&2; cat "$W/fio.json" >&2; exit 1; }
	python3 - "$W/fio.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
d = j["read"] if j["read"]["io_bytes"] else j["write"]
print("%.0f %.1f %.1f" % (d["iops"], d["bw"] / 1024.0, d["clat_ns"]["mean"] / 1000.0))
PY
}

echo "# peers: ${peers[*]} (ap: poll-us $POLL_US); file on $(df --output=fstype "$W" | tail -1)" \
	"$W; RUNTIME=$RUNTIME SIZE=$SIZE"
first=1
for j in "${JOBS[@]}"; do
	set -- $j
	name=$1 rw=$2 bs=$3 qd=$4
	[[ $name == *${ONLY:-}* ]] || continue
	res=()
	for p in "${peers[@]}"; do
		res+=("$p=$(run_fio "$p" "$rw" "$bs" "$qd")")
	done
	python3 - "$first" "$name" "$bs" "${res[@]}" <<'PY'
import sys
first, name, bs = sys.argv[1] == "1", sys.argv[2], sys.argv[3]
r = {}
for kv in sys.argv[4:]:
    k, v = kv.split("=")
    r[k] = list(map(float, v.split()))
big = bs.endswith("k") and int(bs[:-1]) >= 64
key = 1 if big else 0
fmt = lambda x: ("%7.1f MiB/s %5.0fus" % (x[1], x[2])) if big else ("%7.0f IOPS %6.0fus" % (x[0], x[2]))
ratios = [(a, o) for a in ("a", "ap") if a in r for o in ("b", "c")]
if first:
    print("%-18s" % "job" + "".join(" %-20s" % p for p in r) +
          "".join(" %6s" % ("%s/%s" % q) for q in ratios))
print("%-18s" % name + "".join(" %-20s" % fmt(r[p]) for p in r) +
      "".join(" %6.2f" % (r[a][key] / r[o][key]) for a, o in ratios))
PY
	first=0
done
