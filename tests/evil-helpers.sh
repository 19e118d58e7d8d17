# SPDX-License-Identifier: MIT
# For the hostile-target tests (e2e-evil-target*.sh): source after helpers.sh.
#   evil_target MODE         tests/evil-target.py on a free port ($eport)
#   evil_io NAME COUNT       tests/evil-io.py on initiator NAME's socket; its
#                            summary line in $io ("evil-io: ok=N eio=N ...")
#   io_field KEY             a field of $io
#   check_bounds NAME LINES  initiator NAME is alive, its RSS under 64 MiB and
#                            its log under LINES lines
#   evil_stop MODE           stop the target; its summary line in $evil

evil_target() {
	local mode=$1
	shift
	eport=$(free_port)
	python3 "$top_srcdir/tests/evil-target.py" "$eport" "$mode" "$@" >"$T/evil-$mode.log" 2>&1 &
	echo $! >"$T/evil-$mode.pid"
	_pidfiles="$_pidfiles $T/evil-$mode.pid"
	wait_until 30 grep -q "listening on" "$T/evil-$mode.log" ||
		fail "evil target $mode did not start: $(cat "$T/evil-$mode.log")"
}

evil_io() {
	python3 "$top_srcdir/tests/evil-io.py" "$T/$1.sock" "$2" --reply-timeout "${IO_TIMEOUT:-60}" \
		>"$T/io-$1.out" 2>&1 || fail "$1: I/O hung or broke: $(cat "$T/io-$1.out")"
	io=$(tail -n 1 "$T/io-$1.out")
	note "$1: $io"
}

io_field() {
	echo "$io" | sed -n "s/.* $1=\([0-9]*\).*/\1/p"
}

check_bounds() {
	local name=$1 lines=$2 pid rss n
	pid_alive "$T/$name.pid" || fail "$name: the initiator died: $(tail -n 5 "$T/$name.log")"
	pid=$(cat "$T/$name.pid")
	rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
	n=$(wc -l <"$T/$name.log")
	note "$name: RSS $rss KiB, $n log lines"
	[ "$rss" -lt 65536 ] || fail "$name: RSS $rss KiB"
	[ "$n" -lt "$lines" ] || fail "$name: $n log lines (bound $lines)"
}

evil_stop() {
	stop_pidfile "$T/evil-$1.pid"
	evil=$(tail -n 1 "$T/evil-$1.log")
	note "$evil"
}
