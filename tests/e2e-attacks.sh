#!/bin/bash
# Issue 31: every attack, one after the other, against a target two honest
# hosts use.  During each, both hosts write and verify a round of data with
# fio (crc32c): the round must complete with no verify error while the
# attack is still going on.  At the end: the target is up, its peak RSS
# stayed within the memory bound it logs at start, and its log stayed
# within what the rate limits allow for the time the test took.
# The attacks are the programs the focused tests and bench/attack-bench.sh
# use (tests/attack-*.py); each has its own e2e test with finer checks.
. "$top_srcdir/tests/helpers.sh"
requires fio python3
[ "$E2E_TRANSPORT" = tcp ] || skip "the attacks speak the tcp framing: tcp transport only"

port=$(free_port)
truncate -s 64M "$T/disk.img"
# A small pool, so hoarding is felt; limits at their defaults otherwise.
TARGET_EXTRA="buffers = 64" write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"
tpid=$(cat "$T/target.pid")
url="$(target_url "$port")/disk0"
start_initiator h1 "$url" --host-id honest-1 --queues 1 --queue-depth 16 --nbd-max-clients 8
start_initiator h2 "$url" --host-id honest-2 --queues 1 --queue-depth 16
t0=$(date +%s)
rss_kib() { awk -v k="$2" '$1 == k":" { print $2 }' "/proc/$1/status"; }
base=$(rss_kib "$tpid" VmRSS)
bound=$(sed -n 's/.*memory bound: .* = \([0-9]*\) KiB, beyond.*/\1/p' "$T/target.log")
[ -n "$bound" ] || fail "the target did not log its memory bound"

t=$top_srcdir/tests
# A round: each host writes its own 8 MiB with verify headers and reads it back.
round() {
	local out=$1 rc=0 h
	for h in 1 2; do
		fio --name=h$h --ioengine=nbd --uri="$(nbd_uri h$h disk0)" --rw=randwrite \
			--bs=4k --iodepth=16 --offset=$(((h - 1) * 8))M --size=8M --verify=crc32c \
			--verify_fatal=1 --do_verify=1 --output="$out.h$h" &
		echo $! >"$T/fio$h.pid"
	done
	for h in 1 2; do
		wait "$(cat "$T/fio$h.pid")" || rc=1
	done
	return $rc
}
# phase NAME CMD...: the attack runs in the background while a round runs;
# with READY set, that function first waits until the attack took hold.
phase() {
	local name=$1 apid
	shift
	"$@" >"$T/attack-$name.out" 2>&1 &
	apid=$!
	[ -z "${READY:-}" ] || "$READY" "$name" || fail "$name: the attack did not take hold"
	round "$T/fio-$name" || { cat "$T/fio-$name".h*; fail "$name: a round failed"; }
	kill -0 "$apid" 2>/dev/null ||
		fail "$name: the attack ended before the round did: $(tail -3 "$T/attack-$name.out")"
	kill "$apid"
	wait "$apid" 2>/dev/null || true
	pid_alive "$T/target.pid" || fail "$name: the target died"
	note "$name: round verified during the attack"
}

round "$T/fio-first" || fail "the first round failed"
F=100000
# Conditions that an attack took hold before the round starts.
hoard_ready() { wait_until 60 grep -q "io queue 2 port" "$T/attack-$1.out"; }
fill_ready() { wait_until 60 grep -q "holding [0-9]* queues" "$T/attack-$1.out"; }
READY=hoard_ready phase hoard-writes python3 "$t/attack-pool-hoard.py" 127.0.0.1 "$port" disk0 --mode write \
	--queues 2 --depth 128 --seconds $F
READY=hoard_ready phase hoard-reads python3 "$t/attack-pool-hoard.py" 127.0.0.1 "$port" disk0 --mode read \
	--queues 2 --depth 128 --seconds $F
READY=fill_ready phase session-fill python3 "$t/attack-limits.py" 127.0.0.1 "$port" --mode fill --count 10000 \
	--nq 8 --depth 128 --source 127.0.0.2 --seconds $F
phase discovery python3 "$t/attack-limits.py" 127.0.0.1 "$port" --mode discovery \
	--distinct-hosts --count 1000 --keepalive-every 1 --source 127.0.0.3 --seconds $F
phase churn python3 "$t/attack-limits.py" 127.0.0.1 "$port" --mode churn --source 127.0.0.4 \
	--seconds $F
phase connect-flood python3 "$t/attack-connect-flood.py" 127.0.0.1 "$port" --mode mixed \
	--sockets 100 --sources 127.0.0.5,127.0.0.6,127.0.0.7,127.0.0.8 --seconds $F
phase log-flood python3 "$t/attack-log-flood.py" 127.0.0.1 "$port" --capsules 1000000000 \
	--drops 1000000 --src 127.0.0.9 --seconds $F
phase nbd-options python3 "$t/attack-nbd.py" options --unix "$T/h1.sock" --clients 3 --seconds $F
# Idle NBD clients take every place of h1 (nbd-max-clients 8); once they
# have idled long enough for one to give its place (a probe is served), the
# round's client gets one too.
nbd_idle_ready() {
	wait_until 60 grep -q "clients connected" "$T/attack-$1.out" &&
		wait_until 60 "$top_builddir/tests/nbd-ops" "$(nbd_uri h1 disk0)" size:67108864
}
READY=nbd_idle_ready phase nbd-idle python3 "$t/attack-nbd.py" idle --unix "$T/h1.sock" \
	--clients 20 --seconds $F
grep -qE "[1-8] clients connected, [1-9][0-9]* refused" "$T/attack-nbd-idle.out" ||
	fail "nbd-idle: the attacker did not fill h1's places: $(cat "$T/attack-nbd-idle.out")"

peak=$(rss_kib "$tpid" VmHWM)
note "target RSS: $base KiB at start, peak $peak KiB; bound $bound KiB beyond the base"
[ $((peak - base)) -le "$bound" ] || fail "peak RSS $peak KiB exceeds $base + $bound KiB"
# The log: per 10 s window, each kind of line prints at most 5 lines per peer
# (50 in all), and the per-connection info lines 200 per peer address
# (1000 in all).  Ceilings for the time this run took on this machine, per
# attacking address (3 info kinds + 20 kinds of warnings) and in all (40
# kinds): unlimited, the floods made 100k+ lines a second, the churn
# thousands.
windows=$((($(date +%s) - t0) / 10 + 2))
for a in 2 3 4 5 6 7 8 9; do
	n=$(grep -c "127\.0\.0\.$a[^0-9]" "$T/target.log" || true)
	[ "$n" -le $((windows * (3 * 200 + 20 * 5))) ] ||
		fail "127.0.0.$a caused $n log lines in $windows windows"
done
lines=$(wc -l <"$T/target.log")
max=$((windows * (3 * 1000 + 40 * 50)))
note "target log: $lines lines, $(wc -c <"$T/target.log") bytes in $windows windows (ceiling $max)"
[ "$lines" -le "$max" ] || fail "the target logged $lines lines (ceiling $max)"
grep -q "similar messages suppressed" "$T/target.log" || fail "no flood was summed up"
echo ok
