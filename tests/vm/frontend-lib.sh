# SPDX-License-Identifier: MIT
#
# What the block device frontend libraries (nbd-lib.sh, ublk-lib.sh) share; each of them
# sources this after lib.sh and adds fe_setup, fe_attach and fe_detach for its device kind.
# A test sources lib.sh and one frontend library:
#
#     . "$(dirname "$0")/lib.sh"
#     . "$(dirname "$0")/nbd-lib.sh"        (or ublk-lib.sh)
#
# The transport comes from the test's name: t-NAME-rdma.sh runs over rdma on Soft-RoCE
# (setup_rxe: target on rxe0/$TGT_ADDR, initiator through rxe1), t-NAME-tcp.sh over tcp on the
# VM's loopback. Both daemons run in the initial network namespace: the kernel's "nbd" netlink
# family exists only there, and ublk needs /dev/ublk-control next to the target's files.
#
#   fe_start_target PATH [LINE...]   export PATH as "disk0" (extra [export] lines), wait ready
#   fe_kill_target            SIGKILL the target
#   fe_stop_target            SIGTERM the target and wait
#   fe_check_no_dstate        fail if a process stays in D state (sampled over ~3 s)
#   fe_fail MSG               print FAIL, exit 1 (the logs are dumped at exit)
#   fe_alive PID / fe_dead PID   a zombie counts as dead
#   FE_DEV, FE_NAME           the attached device (/dev/nbd0, nbd0) once fe_attach returns
#   FE_ATEXIT=CMD             run CMD at exit, after the daemons are stopped
#   fe_verify_start           fio writing with checksums through FE_DEV, in the background
#   fe_verify_wait WHAT       that fio ended without an error; commands were re-issued
# Logs in the scratch dir: target.log, ini.log (stderr), ini.out (stdout).

TGT_BIN=$top_builddir/target/rdmablk-target
INI_BIN=$top_builddir/initiator/rdmablk-initiator
FE_PORT=4520
TGT_PID=
INI_PID=
FE_ATEXIT=
FE_DEV=
FE_NAME=

case "$(basename "$0" .sh)" in
*-tcp) FE_TRANSPORT=tcp ;;
*) FE_TRANSPORT=rdma ;;
esac

# A child that exited stays a zombie until waited for, and kill -0 still finds it.
fe_alive() {
	[ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

fe_dead() { ! fe_alive "$1"; }

fe_fail() {
	echo "FAIL: $*"
	exit 1
}

_fe_dump_logs() {
	for _f in target.log ini.log ini.out; do
		[ -s "$_f" ] || continue
		echo "---- $_f (last 30 lines)"
		tail -n 30 "$_f"
	done
	if [ "$FE_TRANSPORT" = rdma ]; then _fe_dump_rdma; fi
}

# What a failed RDMA test needs to tell a lost packet from a refused one: neighbours, the
# rxe counters (send_err: a QP the kernel put in error) and the IB CM's message counters.
_fe_dump_rdma() {
	echo "---- rdma state"
	ip neigh show dev "$TGT_IF"
	ip neigh show dev "$INI_IF"
	tc qdisc show dev "$TGT_IF"
	tc qdisc show dev "$INI_IF"
	for _d in "$TGT_DEV" "$INI_DEV"; do
		echo "$_d: $(rdma statistic show link "$_d/1" 2>&1 | tr -s ' ' | cut -c1-400)"
		for _c in /sys/class/infiniband/"$_d"/ports/1/cm_*; do
			[ -d "$_c" ] || continue
			echo "$_d $(basename "$_c"): $(cd "$_c" && grep -H . -- * 2>/dev/null |
				grep -v ':0$' | tr '\n' ' ')"
		done
	done
}

# Stop what we started, whatever happened; the runner kills the rest.
_fe_cleanup() {
	_rc=$?
	[ "$_rc" = 0 ] || [ "$_rc" = 77 ] || _fe_dump_logs
	[ -z "$FE_DEV" ] || umount "$FE_DEV" 2>/dev/null
	if [ -n "$INI_PID" ] && fe_alive "$INI_PID"; then
		kill -TERM "$INI_PID" 2>/dev/null
		vm_wait_for 60 fe_dead "$INI_PID" || kill -KILL "$INI_PID" 2>/dev/null
	fi
	if [ -n "$TGT_PID" ] && fe_alive "$TGT_PID"; then
		kill -KILL "$TGT_PID" 2>/dev/null
		wait "$TGT_PID" 2>/dev/null
	fi
	[ -z "$FE_ATEXIT" ] || $FE_ATEXIT
	exit "$_rc"
}

_fe_rxe_stat() { rdma statistic show link "$1/1" | sed -n "s/.* $2 \([0-9]*\).*/\1/p"; }

# _fe_setup MODULE FLAG: binaries with the initiator option FLAG and the transport, MODULE
# loaded, traps set, network for $FE_TRANSPORT (FE_HOST; FE_SENT0 counts rxe1's packets).
_fe_setup() {
	[ -x "$TGT_BIN" ] || vm_skip "$TGT_BIN not built"
	[ -x "$INI_BIN" ] || vm_skip "$INI_BIN not built"
	"$INI_BIN" --help | grep -q -- "$2" || vm_fail "$INI_BIN has no $2 option"
	"$INI_BIN" --version | grep -qw "$FE_TRANSPORT" ||
		vm_fail "the build has no $FE_TRANSPORT transport ($("$INI_BIN" --version))"
	vm_modprobe "$1"
	trap _fe_cleanup EXIT
	trap 'exit 130' INT TERM
	case $FE_TRANSPORT in
	rdma)
		setup_rxe
		FE_HOST=$TGT_ADDR
		FE_SENT0=$(_fe_rxe_stat "$INI_DEV" sent_pkts)
		;;
	tcp) FE_HOST=127.0.0.1 ;;
	esac
	FE_URI=$FE_TRANSPORT://$FE_HOST:$FE_PORT/disk0
	echo "# transport $FE_TRANSPORT, target at $FE_HOST:$FE_PORT"
}

# rdma: the I/O really crossed the veth (rxe1 sent at least MIN packets since _fe_setup).
fe_check_rxe() {
	[ "$FE_TRANSPORT" = rdma ] || return 0
	_sent=$(($(_fe_rxe_stat "$INI_DEV" sent_pkts) - ${FE_SENT0:-0}))
	[ "$_sent" -ge "$1" ] || fe_fail "only $_sent packets left $INI_DEV: the I/O did not use rdma"
	echo "# $INI_DEV sent $_sent packets, rdma_sends $(_fe_rxe_stat "$INI_DEV" rdma_sends)," \
		"rdma_recvs $(_fe_rxe_stat "$INI_DEV" rdma_recvs)"
}

fe_start_target() {
	_path=$1
	shift
	{
		echo "[target]"
		echo "listen = $FE_TRANSPORT://$FE_HOST:$FE_PORT"
		echo "threads = 2"
		# More [target] lines, newline separated ("min-keepalive = 0").
		[ -z "${FE_TARGET_EXTRA:-}" ] || printf '%s\n' "$FE_TARGET_EXTRA"
		echo "[export disk0]"
		echo "path = $_path"
		for _l in "$@"; do echo "$_l"; done
	} >target.conf
	# Emptied before the background start: its own redirection may come
	# after the wait below found "ready:" of an earlier target.
	: >target.log
	"$TGT_BIN" --config target.conf >target.log 2>&1 &
	TGT_PID=$!
	vm_wait_for 60 grep -q "ready:" target.log || fe_fail "target did not become ready"
}

fe_kill_target() {
	kill -KILL "$TGT_PID" || fe_fail "target not running"
	wait "$TGT_PID" 2>/dev/null
	TGT_PID=
}

fe_stop_target() {
	kill -TERM "$TGT_PID" || fe_fail "target not running"
	vm_wait_for 60 fe_dead "$TGT_PID" || fe_fail "target ignored SIGTERM"
	wait "$TGT_PID" 2>/dev/null
	TGT_PID=
}

# fe_fio_erred PID WHAT: fio (under timeout(1)) ended with an error after WHAT ("the device
# went away"), neither hung until timeout killed it nor finished clean.
fe_fio_erred() {
	_rc=0
	wait "$1" || _rc=$?
	echo "# fio exited $_rc after $2: $(grep -h -m1 'err=' fio.log | sed 's/^ *//')"
	[ "$_rc" != 124 ] && [ "$_rc" != 137 ] || fe_fail "fio hung after $2"
	[ "$_rc" != 0 ] || fe_fail "fio saw no error although $2"
}

# Processes stuck in D state fail the test (vm_no_dstate in lib.sh samples them).
fe_check_no_dstate() {
	vm_no_dstate || fe_fail "processes stuck in D state: $VM_DSTATE"
}

# _fe_launch KIND ARGS...: rdmablk-initiator ARGS in the background; once it prints
# "attached /dev/KINDn", FE_DEV and FE_NAME name that device (size > 0); FE_TOOK the tenths
# of a second it took.  FE_INI_PRELOAD=SHIM.so: a test shim built in tests/ is preloaded.
_fe_launch() {
	_kind=$1
	shift
	echo "# rdmablk-initiator $*${FE_INI_PRELOAD:+ (with $FE_INI_PRELOAD)}"
	env ${FE_INI_PRELOAD:+"LD_PRELOAD=$top_builddir/tests/$FE_INI_PRELOAD"} \
		"$INI_BIN" "$@" >ini.out 2>ini.log &
	INI_PID=$!
	_t=0
	while ! grep -q "^attached /dev/${_kind}[0-9]*\$" ini.out 2>/dev/null; do
		fe_alive "$INI_PID" || fe_fail "initiator exited before attaching"
		[ $_t -lt 600 ] || fe_fail "initiator did not attach within 60 s"
		sleep 0.1
		_t=$((_t + 1))
	done
	FE_TOOK=$_t
	FE_DEV=$(sed -n "s/^attached \\(\\/dev\\/${_kind}[0-9]*\\)\$/\\1/p" ini.out | head -n 1)
	FE_NAME=${FE_DEV#/dev/}
	[ -b "$FE_DEV" ] || vm_wait_for 60 test -b "$FE_DEV" || fe_fail "$FE_DEV is no block device"
	_size=$(cat "/sys/block/$FE_NAME/size")
	[ "$_size" -gt 0 ] || fe_fail "$FE_DEV attached with size 0"
}

# _fe_terminate [SECS]: SIGTERM the initiator, which must exit 0 within SECS (60); FE_TOOK
# the tenths of a second it took.
_fe_terminate() {
	_limit=${1:-60}
	kill -TERM "$INI_PID" || fe_fail "initiator not running at detach"
	_t=0
	while fe_alive "$INI_PID"; do
		if [ $_t -ge $((_limit * 10)) ]; then
			ps -eo pid,stat,wchan:32,comm | awk '$2 ~ /^D/' | sed 's/^/# D: /'
			fe_fail "initiator still running ${_limit}s after SIGTERM"
		fi
		sleep 0.1
		_t=$((_t + 1))
	done
	FE_TOOK=$_t
	_rc=0
	wait "$INI_PID" || _rc=$?
	INI_PID=
	[ "$_rc" = 0 ] || fe_fail "initiator exited $_rc after SIGTERM"
}

# fe_verify_start: fio writes with checksums through $FE_DEV in the background (FE_FIO_PID),
# then reads them back: in-capsule 4K writes in one half, target-pulled 64K ones in the
# other; --rate keeps them going for about 16 s.  Checked by fe_verify_wait after an
# event under load (target restart, link blip) that the initiator reconnects across.
fe_verify_start() {
	timeout -k 5 240 fio --filename="$FE_DEV" --ioengine=libaio --direct=1 --rw=randwrite \
		--iodepth=8 --rate=1m --verify=crc32c --verify_fatal=1 --do_verify=1 \
		--output=fio.log --name=small --bs=4k --offset=0 --size=16M \
		--name=large --bs=64k --offset=64M --size=16M 2>fio.err &
	FE_FIO_PID=$!
	sleep 4
	fe_alive "$FE_FIO_PID" || { cat fio.log fio.err; fe_fail "fio ended too early"; }
}

# fe_verify_wait WHAT: fio ended without an error and every block verified; the initiator
# re-issued some command (else the event came at a quiet time and tested nothing).
fe_verify_wait() {
	_rc=0
	wait "$FE_FIO_PID" || _rc=$?
	grep -h "err=" fio.log | sed 's/^/# /'
	[ "$_rc" = 0 ] || { tail -n 20 fio.err; fe_fail "fio failed across the $1 (exit $_rc)"; }
	[ "$(grep -c 'err= 0' fio.log)" = 2 ] || fe_fail "fio reported errors"
	_n=$(sed -n 's/.*; \([0-9]*\) commands re-issued.*/\1/p' ini.log | paste -sd+ | bc)
	[ "${_n:-0}" -gt 0 ] || fe_fail "no command was re-issued: the $1 came at a quiet time"
}
