#!/bin/bash
# Side-by-side benchmark through fio's nbd engine, all peers in the same run
# on the same backing file:
#   a   rdmablk: fio -> initiator (NBD, Unix socket) -> tcp loopback -> target,
#       defaults (hybrid polling at low depth, poll-us 50)
#   ap  the same with poll-us = POLL_US (default 0: event driven, every hop
#       sleeps when it has nothing to do)
#   b   nbdkit nbd plugin (Unix socket) -> TCP loopback -> nbdkit file plugin
#   c   nbdkit file plugin directly (Unix socket)
# The file lives on BENCH_DIR (default /var/tmp) and is read through the page
# cache by everyone (nbdkit's file plugin does so by default; the rdmablk
# export sets direct = no, and inline-writes = yes: see rdmablk-target(8)),
# so the disk does not dominate.  tmpfs is a poor
# choice for rdmablk: it has no non-blocking reads, so io_uring hands every
# request to a worker thread (BENCH_DIR=/dev/shm shows that).
# Prints one line per job: IOPS or bandwidth and mean latency per peer, and
# the ratios a/b, a/c, ap/b, ap/c.  Under it, CPU time per I/O of each peer
# (its daemons plus fio, from /proc; I/Os counted as IOPS x (ramp + run
# time)) and how much of the host's CPU time was stolen (by the hypervisor)
# or idle during that peer's run: on a shared host the ratios swing with
# steal, CPU per I/O much less.  That line's ratios are the other peer's CPU
# per I/O over a's (ap's): above 1, rdmablk needs less CPU for each I/O.
#   bench/nbd-bench.sh [BUILD_DIR]      (default: build)
#   RUNTIME=10 SIZE=1G                   per-job seconds, file size
#   POLL_US=0                            poll-us for ap; "off" leaves ap out
#   POLL_SIDE=both                       ap's poll-us on both daemons, or only
#                                        on the target / the initiator (the
#                                        other keeps its default)
#   ONLY=qd1                             run only the jobs whose name has this
#   INLINE_WRITES=yes                    the export's inline-writes (empty:
#                                        leave the key out, for old builds)
#   TARGET_CONF=, EXPORT_CONF=, INITIATOR_OPTS=
#                                        extra [target] / [export] lines and
#                                        initiator flags for a and ap
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
build=$(cd "$build" && pwd)
RUNTIME=${RUNTIME:-10}
SIZE=${SIZE:-1G}
POLL_US=${POLL_US:-0}
POLL_SIDE=${POLL_SIDE:-both}
case $POLL_SIDE in both | target | initiator) ;; *)
	echo "nbd-bench: POLL_SIDE must be both, target or initiator, not '$POLL_SIDE'" >&2
	exit 2
	;;
esac
BENCH_NAME=bench
INLINE_WRITES=${INLINE_WRITES-yes}
. "$src/bench/host-lib.sh"
bench_need fio nbdkit python3
bench_setup

declare -A ppids # peer -> pids of its daemons
peers=(a)
start_rdmablk "$build" a ""
ppids[a]="${pids[-2]} ${pids[-1]}"
if [ "$POLL_US" != off ]; then
	start_rdmablk "$build" ap "$POLL_US" "$POLL_SIDE"
	ppids[ap]="${pids[-2]} ${pids[-1]}"
	peers+=(ap)
fi
# (b) nbdkit nbd plugin -> TCP -> nbdkit file plugin
bport=$(free_port)
nbdkit --exit-with-parent -f -i 127.0.0.1 -p "$bport" file "$W/disk.img" &
pids+=($!)
sleep 0.5
nbdkit --exit-with-parent -f -U "$W/b.sock" nbd hostname=127.0.0.1 port="$bport" &
pids+=($!)
ppids[b]="${pids[-2]} ${pids[-1]}"
# (c) nbdkit file plugin directly
nbdkit --exit-with-parent -f -U "$W/c.sock" file "$W/disk.img" &
pids+=($!)
ppids[c]=${pids[-1]}
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

run_fio() { # run_fio PEER rw bs qd -> "iops bw_MiBs lat_us cpu_us_per_io steal% idle%"
	local peer=$1 rw=$2 bs=$3 qd=$4 exp=""
	case $peer in a | ap) exp=bench ;; esac
	# Every peer starts with the whole file cached: hosts that reclaim cold
	# page cache proactively (DAMON) would otherwise make whichever peer
	# runs first after a pause read from the disk.  And with none of it
	# dirty: the writeback of one peer's randwrite would slow the next.
	sync "$W/disk.img"
	cat "$W/disk.img" >/dev/null
	python3 - "$W/fio.json" "$RUNTIME" ${ppids[$peer]} -- fio --name=b --ioengine=nbd \
		--uri="nbd+unix:///$exp?socket=$W/$peer.sock" --rw="$rw" --bs="$bs" --iodepth="$qd" \
		--time_based --runtime="$RUNTIME" --ramp_time=1 --size="$SIZE" --output-format=json \
		--output="$W/fio.json" <<'PY' || { echo "bench: fio failed against $peer" >&2; cat "$W/fio.json" >&2; exit 1; }
import json, os, resource, subprocess, sys
out, runtime = sys.argv[1], float(sys.argv[2])
sep = sys.argv.index("--")
daemons, cmd = sys.argv[3:sep], sys.argv[sep + 1:]
hz = os.sysconf("SC_CLK_TCK")
def ticks():  # utime + stime of the peer's daemons
    f = [open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split() for p in daemons]
    return sum(int(x[11]) + int(x[12]) for x in f)
def host():  # /proc/stat: total, idle (+iowait), steal
    f = list(map(int, open("/proc/stat").readline().split()[1:9]))
    return sum(f), f[3] + f[4], f[7]
t0, h0, c0 = ticks(), host(), resource.getrusage(resource.RUSAGE_CHILDREN)
if subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
    sys.exit(1)
t1, h1, c1 = ticks(), host(), resource.getrusage(resource.RUSAGE_CHILDREN)
j = json.load(open(out))["jobs"][0]
d = j["read"] if j["read"]["io_bytes"] else j["write"]
cpu = (t1 - t0) / hz + (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
ios = d["iops"] * (runtime + 1)
tot = max(h1[0] - h0[0], 1)
print("%.0f %.1f %.1f %.1f %.0f %.0f" % (d["iops"], d["bw"] / 1024.0, d["clat_ns"]["mean"] / 1000.0,
      cpu * 1e6 / ios if ios else 0, 100.0 * (h1[2] - h0[2]) / tot, 100.0 * (h1[1] - h0[1]) / tot))
PY
}

echo "# peers: ${peers[*]} (ap: poll-us $POLL_US on $POLL_SIDE); file on $(df --output=fstype "$W" | tail -1)" \
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
print("%-18s" % "  cpu/IO steal idle" + "".join(" %-20s" % ("%5.1fus %3.0f%% %3.0f%%" % tuple(r[p][3:6])) for p in r) +
      "".join(" %6.2f" % (r[o][3] / r[a][3]) for a, o in ratios))
PY
	first=0
done
