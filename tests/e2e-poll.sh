#!/bin/bash
# The polling modes: with poll-us (hybrid) and with busy-poll on both sides,
# fio verify and nbdcopy round trips are exact; a poll-us daemon goes back to
# sleep once idle (little CPU over an idle interval), a busy-poll one spins
# (its reactor threads are never asleep).
. "$top_srcdir/tests/helpers.sh"
requires fio nbdcopy

# cpu_ticks PID: user+system clock ticks the process has used so far.
cpu_ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}
# idle_ticks PID SECONDS: ticks used while nothing talks to it.
idle_ticks() {
	local a b
	a=$(cpu_ticks "$1")
	sleep "$2"
	b=$(cpu_ticks "$1")
	echo $((b - a))
}

# reactor_states PID: one letter per reactor thread (rb-reactor-N) per sample,
# 20 samples 0.1 s apart: R running or runnable, S asleep, ...  Unlike CPU
# time, the state does not depend on what else the machine runs: a spinning
# thread that yields to a CPU hog is runnable, not asleep.
reactor_states() {
	local i t
	for i in $(seq 1 20); do
		for t in /proc/"$1"/task/*; do
			case "$(cat "$t/comm" 2>/dev/null)" in
			rb-reactor-*) awk '{ printf "%s", $3 }' "$t/stat" 2>/dev/null ;;
			esac
		done
		sleep 0.1
	done
	echo
}

hz=$(getconf CLK_TCK)
truncate -s 32M "$T/disk.img"
for mode in poll-us busy-poll; do
	port=$(free_port)
	if [ $mode = poll-us ]; then
		tline="poll-us = 200" iflag=(--poll-us 200)
	else
		tline="busy-poll = yes" iflag=(--busy-poll)
	fi
	TARGET_EXTRA=$tline write_target_conf "$T/t-$mode.conf" "$port" disk0 "$T/disk.img"
	start_target "$T/t-$mode.conf" "t-$mode"
	start_initiator "i-$mode" "$(target_url "$port")/disk0" --queues 2 "${iflag[@]}"
	uri=$(nbd_uri "i-$mode" disk0)

	# QD1 and QD16 both: the first exercises the spin between requests.
	for qd in 1 16; do
		fio --name=v --ioengine=nbd --uri="$uri" --rw=randwrite --bsrange=4k-64k \
			--iodepth=$qd --size=8M --offset=$((qd == 1 ? 0 : 8))M --verify=crc32c \
			--verify_fatal=1 --output="$T/fio-$mode-$qd.log" ||
			{ cat "$T/fio-$mode-$qd.log"; fail "$mode: fio verify at QD$qd failed"; }
	done
	nbdcopy "$uri" "$T/back.img" || fail "$mode: nbdcopy out failed"
	cmp "$T/disk.img" "$T/back.img" || fail "$mode: exported file differs from the NBD view"

	tp=$(cat "$T/t-$mode.pid") ip=$(cat "$T/i-$mode.pid")
	tt=$(idle_ticks "$tp" 2) it=$(idle_ticks "$ip" 2)
	note "$mode: idle CPU over 2 s: target $tt ticks, initiator $it ticks (HZ $hz)"
	if [ $mode = poll-us ]; then
		# Asleep when idle: well under a tenth of the interval.
		[ "$tt" -lt $((hz / 5)) ] || fail "poll-us target kept spinning when idle ($tt ticks)"
		[ "$it" -lt $((hz / 5)) ] || fail "poll-us initiator kept spinning when idle ($it ticks)"
	else
		# Spinning: no reactor thread is ever seen asleep.  (Its CPU time
		# is no measure: an idle spin yields to whatever else is runnable.)
		for who in "target:$tp" "initiator:$ip"; do
			st=$(reactor_states "${who#*:}")
			note "busy-poll: ${who%%:*} reactor thread states: $st"
			[ -n "$st" ] || fail "busy-poll ${who%%:*}: no rb-reactor thread found"
			case "$st" in *[!R]*) fail "busy-poll ${who%%:*} reactor slept: states $st" ;; esac
		done
	fi
	stop_pidfile "$T/i-$mode.pid"
	stop_pidfile "$T/t-$mode.pid"
done
echo "ok"
