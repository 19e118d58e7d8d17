#!/bin/bash
# The polling modes: with poll-us (hybrid) and with busy-poll on both sides,
# fio verify and nbdcopy round trips are exact; a poll-us daemon goes back to
# sleep once idle (little CPU over an idle interval), a busy-poll one spins.
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

hz=$(getconf CLK_TCK)
truncate -s 32M "$T/disk.img"
for mode in poll-us busy-poll; do
	port=$(free_port)
	if [ $mode = poll-us ]; then
		tline="poll-us = 200" iflag=(--poll-us 200)
	else
		tline="busy-poll = yes" iflag=(--busy-poll)
	fi
	write_target_conf "$T/t-$mode.conf" "$port" disk0 "$T/disk.img"
	sed -i "/^\[target\]/a $tline" "$T/t-$mode.conf"
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
		# Spinning: a reactor thread is on a CPU most of the interval.
		[ "$tt" -gt $((hz / 2)) ] || fail "busy-poll target slept ($tt ticks in 2 s)"
		[ "$it" -gt $((hz / 2)) ] || fail "busy-poll initiator slept ($it ticks in 2 s)"
	fi
	stop_pidfile "$T/i-$mode.pid"
	stop_pidfile "$T/t-$mode.pid"
done
echo "ok"
