#!/bin/bash
# A/B of two rdmablk builds over tcp loopback: CPU time per I/O of each
# daemon, and IOPS, for a fixed number of I/Os, the builds taking turns.
#
# On a shared 2-core host, throughput swings by 2-3x between runs, so a
# single bench/nbd-bench.sh run cannot show a 10% change.  CPU seconds per
# I/O (utime + stime of the target and the initiator, from /proc) move far
# less with the host's load, and alternating the builds spreads slow load
# changes over both.  Compare the pairs, not runs of different rounds.
#
#   bench/ab-cpu.sh BUILD_A BUILD_B       (configured and built trees)
#   RW=randread BS=4k QD=32 NIOS=300000 ROUNDS=4 SIZE=1G
#   BENCH_DIR=/var/tmp                     where the exported file lives
#   TARGET_CONF=, EXPORT_CONF=, INITIATOR_OPTS=   as for nbd-bench.sh
#   INLINE_WRITES=yes|no                   the export's inline-writes (unset: key left
#                                          out, as builds before it need)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 2 ] || { echo "usage: $0 BUILD_A BUILD_B" >&2; exit 2; }
RW=${RW:-randread}
BS=${BS:-4k}
QD=${QD:-32}
NIOS=${NIOS:-300000}
ROUNDS=${ROUNDS:-4}
SIZE=${SIZE:-1G}
builds=()
for b in "$1" "$2"; do
	b=$(cd "$b" && pwd)
	for x in target/rdmablk-target initiator/rdmablk-initiator; do
		[ -x "$b/$x" ] || { echo "ab-cpu: $b/$x missing (build it first)" >&2; exit 1; }
	done
	builds+=("$b")
done
BENCH_NAME=ab-cpu
. "$src/bench/host-lib.sh"
bench_need fio python3

cpu_ticks() { # utime + stime of PID, in clock ticks
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}

bench_setup
hz=$(getconf CLK_TCK)

# run BUILD NAME: "iops target_us initiator_us" into $W/result.  Not in a
# subshell, so pids[] and a failure reach the cleanup trap.
run() {
	local b=$1 name=$2 tp ip t1 i1 t2 i2

	start_rdmablk "$b" "$name" 0
	tp=${pids[-2]}
	ip=${pids[-1]}
	cat "$W/disk.img" >/dev/null # every run starts with the file cached
	t1=$(cpu_ticks $tp)
	i1=$(cpu_ticks $ip)
	fio --name=ab --ioengine=nbd --uri="nbd+unix:///bench?socket=$W/$name.sock" --rw="$RW" \
		--bs="$BS" --iodepth="$QD" --number_ios="$NIOS" --size="$SIZE" \
		--output-format=json --output="$W/fio.json" >/dev/null 2>&1 ||
		{ echo "ab-cpu: fio failed against $b" >&2; cat "$W/fio.json" >&2; exit 1; }
	t2=$(cpu_ticks $tp)
	i2=$(cpu_ticks $ip)
	kill $ip $tp
	wait $ip $tp 2>/dev/null || true
	python3 - "$W/fio.json" "$NIOS" "$hz" $((t2 - t1)) $((i2 - i1)) >"$W/result" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
d = j["read"] if j["read"]["io_bytes"] else j["write"]
n, hz, t, i = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
print("%.0f %.2f %.2f" % (d["iops"], t * 1e6 / hz / n, i * 1e6 / hz / n))
PY
}

echo "# A = ${builds[0]}"
echo "# B = ${builds[1]}"
echo "# $RW $BS QD$QD, $NIOS I/Os per run, $ROUNDS rounds; CPU = utime + stime per I/O"
printf '%-6s %10s %10s %12s %12s %12s %12s\n' round "A IOPS" "B IOPS" "A tgt us" "B tgt us" \
	"A ini us" "B ini us"
for r in $(seq 1 "$ROUNDS"); do
	run "${builds[0]}" "a$r"
	read -r ai at ain <"$W/result"
	run "${builds[1]}" "b$r"
	read -r bi bt bin <"$W/result"
	printf '%-6s %10s %10s %12s %12s %12s %12s\n' "$r" "$ai" "$bi" "$at" "$bt" "$ain" "$bin"
done
