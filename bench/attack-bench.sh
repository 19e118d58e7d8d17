#!/bin/bash
# What an attacker costs the legitimate hosts (issue 31): HOSTS initiators,
# each with its own host id, one I/O queue of depth QD and an NBD socket,
# run one fio job each (4K random 70% read / 30% write through fio's nbd
# engine) against one target over tcp loopback; each attack runs beside
# them in turn.  Every attack's run is paired with a run without it next to
# it, ROUNDS times, the order alternating, so a change of the host's load
# does not bias one attack: per attack the legitimate hosts' IOPS and p99
# latency (the worse of read and write), the ratios of each pair (median
# and range), and the CPU the attacker itself took.
# Goal (issue 31): >= 80% of the IOPS and <= 2x the p99 under every attack.
#
#   bench/attack-bench.sh [BUILD_DIR]        (default: build)
#   HOSTS=16 QD=32 RUNTIME=10 RAMP=2 SIZE=1G ROUNDS=3
#   ATTACKS="hoard-writes hoard-reads ..."   (default: all; `-l` lists them)
#   TARGET_CONF=                             extra [target] lines
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = -l ]; then
	sed -n 's/^attack_\([a-z0-9-]*\)() { # \(.*\)/\1\t\2/p' "$0"
	exit 0
fi
build=${1:-$src/build}
build=$(cd "$build" && pwd)
HOSTS=${HOSTS:-16}
QD=${QD:-32}
RUNTIME=${RUNTIME:-10}
RAMP=${RAMP:-2}
ROUNDS=${ROUNDS:-3}
SIZE=${SIZE:-1G}
BENCH_NAME=attack-bench
. "$src/bench/host-lib.sh"
bench_need fio python3
bench_setup

# ---- the attacks: attack_NAME PORT runs it in the foreground until killed.
# Each is one of the attack programs the tests use (tests/attack-*); the
# attacker connects from addresses of its own (127.0.0.N) where it can, as
# another machine would.
t=$src/tests
FOREVER=100000
attack_hoard-writes() { # keyed WRITEs whose data it never lets the target fetch, renewed
	exec python3 "$t/attack-pool-hoard.py" 127.0.0.1 "$1" bench --mode write --queues 2 --depth 128 \
		--seconds $FOREVER
}
attack_hoard-reads() { # READs whose data it never reads off its socket, renewed
	exec python3 "$t/attack-pool-hoard.py" 127.0.0.1 "$1" bench --mode read --queues 2 --depth 128 \
		--seconds $FOREVER
}
attack_session-fill() { # sessions with every I/O queue at depth 128, as many as granted
	exec python3 "$t/attack-limits.py" 127.0.0.1 "$1" --mode fill --export bench --count 10000 \
		--nq 8 --depth 128 --source 127.0.0.2 --seconds $FOREVER
}
attack_discovery() { # discovery sessions, each sending KEEPALIVE, as many as granted
	exec python3 "$t/attack-limits.py" 127.0.0.1 "$1" --mode discovery --distinct-hosts \
		--count 5000 --keepalive-every 1 --source 127.0.0.3 --seconds $FOREVER
}
attack_connect-flood() { # raw connects: silent, partial and garbage HELLOs, from 8 addresses
	exec python3 "$t/attack-connect-flood.py" 127.0.0.1 "$1" --mode mixed --sockets 200 \
		--sources 127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7,127.0.0.8,127.0.0.9,127.0.0.10,127.0.0.11 \
		--seconds $FOREVER
}
attack_log-flood() { # rejected capsules as fast as it can, and dropped connections
	exec python3 "$t/attack-log-flood.py" 127.0.0.1 "$1" --capsules 1000000000 --drops 1000000 \
		--src 127.0.0.12 --seconds $FOREVER
}
attack_nbd-options() { # NBD clients of host 1 sending options, never reading the replies
	exec python3 "$t/attack-nbd.py" options --unix "$W/h1.sock" --clients 3 --seconds $FOREVER
}
attack_nbd-idle() { # idle NBD clients of host 1, as many as it serves
	exec python3 "$t/attack-nbd.py" idle --unix "$W/h1.sock" --clients 300 --seconds $FOREVER
}
ATTACK_LIST=$(sed -n 's/^attack_\([a-z0-9-]*\)() {.*/\1/p' "$0")
ATTACKS=${ATTACKS:-$ATTACK_LIST}

# ---- the target and the legitimate hosts
port=$(free_port)
cat >"$W/target.conf" <<CONF
[target]
listen = tcp://127.0.0.1:$port
threads = 1
log-level = warning
${TARGET_CONF:-}
[export bench]
path = $W/disk.img
direct = no
inline-writes = yes
CONF
"$build/target/rdmablk-target" --config "$W/target.conf" >"$W/target.log" 2>&1 &
tpid=$!
pids+=($tpid)
for i in $(seq 1 60); do
	"$build/initiator/rdmablk-initiator" --list "tcp://127.0.0.1:$port" >/dev/null 2>&1 && break
	kill -0 "$tpid" || { cat "$W/target.log"; exit 1; }
	sleep 0.5
done
fio_jobs="$W/hosts.fio"
printf '[global]\nioengine=nbd\nrw=randrw\nrwmixread=70\nbs=4k\niodepth=%s\n' "$QD" >"$fio_jobs"
printf 'time_based\nruntime=%s\nramp_time=%s\nnorandommap\ngroup_reporting\n' \
	"$RUNTIME" "$RAMP" >>"$fio_jobs"
for h in $(seq 1 "$HOSTS"); do
	"$build/initiator/rdmablk-initiator" "tcp://127.0.0.1:$port/bench" --queues 1 \
		--queue-depth "$QD" --host-id "bench-host-$h" --nbd-socket "$W/h$h.sock" \
		--log-level warning >"$W/h$h.log" 2>&1 &
	pids+=($!)
	printf '[h%s]\nuri=nbd+unix:///?socket=%s\n' "$h" "$W/h$h.sock" >>"$fio_jobs"
done
for h in $(seq 1 "$HOSTS"); do wait_for 60 -S "$W/h$h.sock"; done

# run_fio OUT: the legitimate hosts' job; prints "IOPS P99_US".
run_fio() {
	fio --output-format=json --output="$1" "$fio_jobs" >/dev/null 2>&1 ||
		{ echo "$BENCH_NAME: fio failed (see $1)" >&2; return 1; }
	python3 - "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
iops = j["read"]["iops"] + j["write"]["iops"]
p99 = max(j[d]["clat_ns"]["percentile"].get("99.000000", 0) for d in ("read", "write"))
print("%.0f %.0f" % (iops, p99 / 1000))
PY
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# measure A OUT: one fio run, with attack A beside it ("" for none); prints
# "IOPS P99_US ATTACKER_CPU%".
measure() {
	local a=$1 out=$2 apid= c0 t0 c1 t1 r
	if [ -n "$a" ]; then
		"attack_$a" "$port" >>"$W/attack-$a.log" 2>&1 &
		apid=$!
		pids+=($apid)
		c0=$(cpu_ticks "$apid") t0=$(date +%s%N)
	fi
	r=$(run_fio "$out")
	if [ -n "$apid" ]; then
		c1=$(cpu_ticks "$apid") t1=$(date +%s%N)
		kill "$apid" 2>/dev/null || true
		wait "$apid" 2>/dev/null || true
		kill -0 "$tpid" || { echo "$BENCH_NAME: the target died during $a" >&2; exit 1; }
		echo "$r $(((c1 - c0) * 1000000000 / $(getconf CLK_TCK) * 100 / (t1 - t0)))"
	else
		echo "$r 0"
	fi
}

printf 'each attack: %s rounds of a run without it and a run with it, the order alternating;\n' "$ROUNDS"
printf 'ratios per round (with / without), median [lowest, highest]; attacker CPU in %% of one core\n'
printf '%-15s %9s %9s %22s %9s %9s %22s %6s\n' attack "IOPS w/o" "IOPS w/" "kept" "p99 w/o" "p99 w/" \
	"p99 x" "cpu"
for a in $ATTACKS; do
	declare -F "attack_$a" >/dev/null || { echo "$BENCH_NAME: no attack '$a' (-l lists them)" >&2; exit 2; }
	: >"$W/rounds-$a"
	for r in $(seq 1 "$ROUNDS"); do
		if [ $((r % 2)) = 1 ]; then
			read -r bi bp _ < <(measure "" "$W/base-$a-$r.json")
			read -r ai ap cpu < <(measure "$a" "$W/attack-$a-$r.json")
		else
			read -r ai ap cpu < <(measure "$a" "$W/attack-$a-$r.json")
			read -r bi bp _ < <(measure "" "$W/base-$a-$r.json")
		fi
		echo "$bi $ai $bp $ap $cpu" >>"$W/rounds-$a"
	done
	python3 - "$a" "$W/rounds-$a" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[2]) if l.strip()]
med = lambda i: statistics.median(r[i] for r in rows)
def ratio(i, j, pct):
    v = [r[j] / r[i] if r[i] else 0 for r in rows]
    f = (lambda x: "%.0f%%" % (100 * x)) if pct else (lambda x: "%.2f" % x)
    return "%s [%s, %s]" % (f(statistics.median(v)), f(min(v)), f(max(v)))
print("%-15s %9.0f %9.0f %22s %9.0f %9.0f %22s %5.0f%%" % (sys.argv[1], med(0), med(1),
      ratio(0, 1, True), med(2), med(3), ratio(2, 3, False), med(4)))
PY
done
echo "target log: $(wc -l <"$W/target.log") lines, $(wc -c <"$W/target.log") bytes"
