#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest half of bench/vm-bench.sh: runs inside the test VM (tests/vm/run.sh starts it like a
# guest test). On one Soft-RoCE link (setup_rxe: rxe0/192.0.2.1 target side, rxe1/192.0.2.2
# initiator side) and one fully written 1 GiB backing store (BACKING=brd: a RAM block device,
# the default; BACKING=tmpfs: a file on a guest tmpfs), runs the same fio jobs against each
# block device:
#   k     the kernel's NVMe-oF: nvmet (that namespace) + nvmet-rdma, nvme connect -t rdma
#   r     rdmablk-initiator rdma://... --nbd-device auto  -> /dev/nbdN
#   t     rdmablk-initiator tcp://...  --nbd-device auto  -> /dev/nbdN
#   u     rdmablk-initiator rdma://... --ublk             -> /dev/ublkbN
#   rp up r and u again, against a second rdmablk-target, both daemons with poll-us = POLL_US
#         (r and u run with the default, hybrid polling at low depth; POLL_US=off leaves
#         these two out); with BASE_BUILD (a second build tree) they run that build's
#         daemons instead, with poll-us = POLL_US only when POLL_US is set: an A/B of two
#         builds in one boot
# A frontend the initiator does not offer (probed with --help) gets an "n/a" row; one that is
# offered and fails fails the run.
# All devices are attached first and stay attached (the idle ones only exchange keep-alives);
# then each job runs on each device in turn, the order rotated from job to job, so a change of
# the host's load during the run spreads over the columns instead of biasing one of them.
# The whole rotation runs ROUNDS times, so every cell is measured that often, at different
# moments of the run.
# Writes into the results share: vm-bench.tsv (one line per cell and round: CFG JOB IOPS MIBS
# LAT_US ROUND, or CFG - n/a REASON), vm-bench.info (settings, load); the host half prints the
# table.
# Environment (from vm-bench.env in the results share): RUNTIME, RAMP (seconds), ROUNDS, QUEUES,
# DEPTH, POLL_US, BASE_BUILD, BACKING (brd: a RAM block device, the default; tmpfs: a file on a
# guest tmpfs), MTU (of the veth pair; rxe's RoCE MTU follows: 1024 at 1500, 4096 at 9000).
# vm-timeout: 1500
. "$top_srcdir/tests/vm/lib.sh"

RES=$RDMABLK_VM_RESULTS
TSV=$RES/vm-bench.tsv
INFO=$RES/vm-bench.info
[ -r "$RES/vm-bench.env" ] && . "$RES/vm-bench.env"
RUNTIME=${RUNTIME:-6}
RAMP=${RAMP:-2}
ROUNDS=${ROUNDS:-3}
QUEUES=${QUEUES:-2}
DEPTH=${DEPTH:-128}
POLL_US=${POLL_US-0}
BACKING=${BACKING:-brd}
MTU=${MTU:-1500}
SIZE_MB=1024
TGT_BIN=$top_builddir/target/rdmablk-target
INI_BIN=$top_builddir/initiator/rdmablk-initiator
BASE_BUILD=${BASE_BUILD:-}
# The second pair of columns: another build (BASE_BUILD), or this one with poll-us = POLL_US.
if [ -n "$BASE_BUILD" ]; then
	TGTP_BIN=$BASE_BUILD/target/rdmablk-target INIP_BIN=$BASE_BUILD/initiator/rdmablk-initiator
	POLL_US=${POLL_US:-}
else
	TGTP_BIN=$TGT_BIN INIP_BIN=$INI_BIN
fi
NQN=nqn.2026-12.org.rdmablk:vm-bench
NVMET=/sys/kernel/config/nvmet
RB_RDMA_PORT=4520
RB_TCP_PORT=4521
RB_POLL_PORT=4522
TGT_PID=
TGTP_PID=
CFGS=
NVME_CONNECTED=
NVMET_UP=

# name:rw:bs:iodepth
JOBS="4k-randread-qd32:randread:4k:32 4k-randwrite-qd32:randwrite:4k:32
128k-seqread-qd8:read:128k:8 4k-randread-qd1:randread:4k:1"

info() { echo "$*" | tee -a "$INFO"; }

alive() {
	[ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}
dead() { ! alive "$1"; }

dump_logs() {
	for f in target.log target-p.log ini-*.log ini-*.out nvme.log fio.out; do
		[ -s "$f" ] || continue
		echo "---- $f (last 30 lines)"
		tail -n 30 "$f"
	done
}

nvmet_down() {
	[ -n "$NVME_CONNECTED" ] && nvme disconnect -n "$NQN" >>nvme.log 2>&1
	NVME_CONNECTED=
	[ -n "$NVMET_UP" ] || return 0
	rm -f "$NVMET/ports/1/subsystems/$NQN"
	rmdir "$NVMET/ports/1" 2>/dev/null
	echo 0 >"$NVMET/subsystems/$NQN/namespaces/1/enable" 2>/dev/null
	rmdir "$NVMET/subsystems/$NQN/namespaces/1" "$NVMET/subsystems/$NQN" 2>/dev/null
	NVMET_UP=
}

# Initiators before the target: an NBD device whose target is gone waits for it.
cleanup() {
	rc=$?
	[ "$rc" = 0 ] || dump_logs
	for c in $CFGS; do
		eval "pid=\${PID_$c:-}"
		[ -n "$pid" ] && alive "$pid" || continue
		kill -TERM "$pid" 2>/dev/null
		vm_wait_for 30 dead "$pid" || kill -KILL "$pid" 2>/dev/null
	done
	nvmet_down
	for pid in $TGT_PID $TGTP_PID; do
		alive "$pid" || continue
		kill -TERM "$pid" 2>/dev/null
		vm_wait_for 10 dead "$pid" || kill -KILL "$pid" 2>/dev/null
	done
	umount disk 2>/dev/null
	exit "$rc"
}

rxe_pkts() { rdma statistic show link "$1/1" | sed -n "s/.* $2 \([0-9]*\).*/\1/p"; }
veth_tx() { cat "/sys/class/net/$INI_IF/statistics/tx_packets"; }

# "busy total" jiffies of all guest CPUs (busy: not idle, not iowait).
cpu_all() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }

# run_job CFG DEV NAME RW BS QD: one fio job, its JSON in fio-CFG-NAME.rROUND.json (collect reads
# them all at the end: python's start-up costs seconds under TCG); the packets that crossed the
# veth meanwhile are added to PK_CFG (RoCE, sent by rxe1) and VP_CFG (all, sent by rb-ini), and
# the share of guest CPU time that was busy to BUSY_CFG (saturated, or waiting on wake-ups?).
run_job() {
	cfg=$1
	dev=$2
	name=$3
	p0=$(rxe_pkts "$INI_DEV" sent_pkts)
	v0=$(veth_tx)
	c0=$(cpu_all)
	fio --name="$name" --filename="$dev" --ioengine=io_uring --direct=1 --rw="$4" --bs="$5" \
		--iodepth="$6" --size=${SIZE_MB}M --time_based --runtime="$RUNTIME" \
		--ramp_time="$RAMP" --norandommap --randrepeat=0 --group_reporting \
		--output-format=json --output="fio-$cfg-$name.r$round.json" >fio.out 2>&1 ||
		{ cat "fio-$cfg-$name.r$round.json"; vm_fail "$cfg: fio $name on $dev"; }
	p1=$(rxe_pkts "$INI_DEV" sent_pkts)
	v1=$(veth_tx)
	busy=$(echo "$c0 $(cpu_all)" | awk '{ d = $4 - $2; printf "%.0f", d ? 100 * ($3 - $1) / d : 0 }')
	eval "BUSY_$cfg=\"\${BUSY_$cfg:+\$BUSY_$cfg }$busy%\""
	eval "PK_$cfg=\$((\${PK_$cfg:-0} + $p1 - $p0)) VP_$cfg=\$((\${VP_$cfg:-0} + $v1 - $v0))"
	echo "# $cfg $name round $round done (guest load $(cut -d' ' -f1 /proc/loadavg))"
}

# collect: one tsv line per fio-CFG-NAME.rROUND.json, in the order they ran.
collect() {
	# shellcheck disable=SC2046 # file names have no blanks
	python3 - "$TSV" $(ls -tr fio-*.json) <<'EOF' || vm_fail "fio results: see above"
import json, sys
out = open(sys.argv[1], "a")
for f in sys.argv[2:]:
    base, rnd = f[len("fio-"):-len(".json")].rsplit(".r", 1)
    cfg, name = base.split("-", 1)
    j = json.load(open(f))["jobs"][0]
    d = j["read"] if j["read"]["io_bytes"] else j["write"]
    if j["error"] or not d["io_bytes"]:
        sys.exit("%s: fio error %d, %d bytes done" % (f, j["error"], d["io_bytes"]))
    line = "%s\t%s\t%.0f\t%.2f\t%.1f\t%s" % (cfg, name, d["iops"], d["bw_bytes"] / 1048576.0,
                                          d["lat_ns"]["mean"] / 1000.0, rnd)
    out.write(line + "\n")
    print("# " + line.replace("\t", " "))
EOF
}

na() {
	printf '%s\t-\tn/a\t%s\n' "$1" "$2" >>"$TSV"
	echo "# $1: n/a ($2)"
}

# ---- kernel NVMe-oF over rdma ---------------------------------------------------------------

attach_kernel() {
	vm_modprobe nvmet nvmet_rdma nvme_rdma
	S=$NVMET/subsystems/$NQN
	mkdir "$S" && echo 1 >"$S/attr_allow_any_host" || vm_fail "nvmet: subsystem $NQN"
	NVMET_UP=1
	mkdir "$S/namespaces/1" && printf '%s' "$DISK" >"$S/namespaces/1/device_path" ||
		vm_fail "nvmet: namespace"
	# Same cache mode as the rdmablk export (tmpfs takes O_DIRECT since 6.6; it is the same
	# page cache either way).  A block device gets nvmet's bdev backend (bios, no cache).
	[ -b "$DISK" ] || echo "$KBUF" >"$S/namespaces/1/buffered_io" || vm_fail "nvmet: buffered_io"
	echo 1 >"$S/namespaces/1/enable" || vm_fail "nvmet: enable namespace (buffered_io=$KBUF)"
	P=$NVMET/ports/1
	mkdir "$P" && echo rdma >"$P/addr_trtype" && echo ipv4 >"$P/addr_adrfam" &&
		echo "$TGT_ADDR" >"$P/addr_traddr" && echo 4420 >"$P/addr_trsvcid" &&
		ln -s "$S" "$P/subsystems/$NQN" || vm_fail "nvmet: rdma port $TGT_ADDR:4420"
	hostnqn=nqn.2014-08.org.nvmexpress:uuid:$(cat /proc/sys/kernel/random/uuid)
	nvme connect -t rdma -n "$NQN" -a "$TGT_ADDR" -s 4420 -i "$QUEUES" -Q "$DEPTH" \
		--hostnqn="$hostnqn" >>nvme.log 2>&1 || { cat nvme.log; vm_fail "nvme connect"; }
	NVME_CONNECTED=1
	vm_wait_for 20 nvme_dev || vm_fail "no namespace block device for $NQN"
	DEV_k=/dev/$(nvme_dev)
	vm_wait_for 10 test -b "$DEV_k" || vm_fail "$DEV_k is no block device"
	name=${DEV_k#/dev/}
	ctrl=$(nvme_ctrl)
	info "k: nvme connect -t rdma -a $TGT_ADDR -s 4420 -i $QUEUES -Q $DEPTH -> $DEV_k ($ctrl:" \
		"queue_count $(cat /sys/class/nvme/$ctrl/queue_count) incl. admin," \
		"sqsize $(cat /sys/class/nvme/$ctrl/sqsize)), nvmet namespace $DISK ($NS_KIND)," \
		"max_sectors_kb $(cat /sys/block/$name/queue/max_sectors_kb)"
	CFGS="$CFGS k"
}

# The namespace's block device: the multipath head under the subsystem, else the controller's.
nvme_dev() {
	for d in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
		[ "$(cat "$d/subsysnqn" 2>/dev/null)" = "$NQN" ] || continue
		for n in "$d"/nvme*n*; do
			n=$(basename "$n")
			case $n in *c*n*) continue ;; esac
			[ -e "/sys/block/$n" ] && { echo "$n"; return 0; }
		done
	done
	return 1
}

nvme_ctrl() {
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat "$c/subsysnqn" 2>/dev/null)" = "$NQN" ] && { basename "$c"; return 0; }
	done
	return 1
}

# ---- rdmablk ---------------------------------------------------------------------------------

# start_target BIN PIDVAR LOG LISTEN [EXTRA-TARGET-LINE]: rdmablk-target BIN exporting the file.
start_target() {
	bin=$1
	shift
	{
		echo "[target]"
		echo "listen = $3"
		echo "threads = 2"
		[ -n "${4:-}" ] && echo "$4"
		echo "[export bench]"
		echo "path = $DISK"
		echo "direct = $RB_DIRECT"
	} >"$2.conf"
	"$bin" --config "$2.conf" >"$2.log" 2>&1 &
	eval "$1=$!"
	vm_wait_for 30 grep -q "ready:" "$2.log" || vm_fail "rdmablk-target ($2) did not become ready"
	info "$bin ($2): threads 2, direct=$RB_DIRECT, ${4:-other settings default}" \
		"($(grep -h 'listening on\|ready:' "$2.log" | sed 's/.*: //' | tr '\n' ' '))"
}

# attach_rdmablk BIN CFG URI FLAG...: attach with rdmablk-initiator BIN and FLAG (e.g.
# --nbd-device auto); sets DEV_CFG and PID_CFG.
attach_rdmablk() {
	bin=$1
	cfg=$2
	uri=$3
	shift 3
	"$bin" "$uri" "$@" --queues "$QUEUES" --queue-depth "$DEPTH" --log-level warning \
		>"ini-$cfg.out" 2>"ini-$cfg.log" &
	pid=$!
	eval "PID_$cfg=$pid"
	CFGS="$CFGS $cfg"
	t=0
	while ! grep -q '^attached /dev/' "ini-$cfg.out" 2>/dev/null; do
		alive "$pid" || vm_fail "$cfg: rdmablk-initiator $* exited before attaching"
		[ $t -lt 600 ] || vm_fail "$cfg: rdmablk-initiator did not attach within 60 s"
		sleep 0.1
		t=$((t + 1))
	done
	dev=$(sed -n 's/^attached \(\/dev\/[a-z0-9]*\)$/\1/p' "ini-$cfg.out" | head -n 1)
	vm_wait_for 10 test -b "$dev" || vm_fail "$cfg: $dev is no block device"
	eval "DEV_$cfg=$dev"
	name=${dev#/dev/}
	info "$cfg: $bin $uri $* --queues $QUEUES --queue-depth $DEPTH -> $dev," \
		"$(ls "/sys/block/$name/mq" 2>/dev/null | wc -l) hw queues," \
		"nr_requests $(cat "/sys/block/$name/queue/nr_requests")," \
		"max_sectors_kb $(cat "/sys/block/$name/queue/max_sectors_kb")"
}

# detach_rdmablk CFG: SIGTERM, which must end the initiator with status 0.
detach_rdmablk() {
	eval "pid=\$PID_$1"
	kill -TERM "$pid" || vm_fail "$1: initiator not running at the end"
	vm_wait_for 60 dead "$pid" || vm_fail "$1: initiator still running 60 s after SIGTERM"
	rc=0
	wait "$pid" || rc=$?
	eval "PID_$1="
	[ "$rc" = 0 ] || vm_fail "$1: initiator exited $rc after SIGTERM"
}

# cpu_ticks PID: user+system clock ticks of the whole process (comm has no blanks here).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# cpu_report LABEL SECS: CPU share of the target and each initiator since cpu_mark.
cpu_mark() {
	CPU_T0=$(cpu_ticks "$TGT_PID")
	CPU_TP0=$([ -n "$TGTP_PID" ] && cpu_ticks "$TGTP_PID" || echo 0)
	for c in $CFGS; do
		[ "$c" = k ] && continue
		eval "CPU0_$c=\$(cpu_ticks \$PID_$c)"
	done
}
cpu_report() {
	hz=$(getconf CLK_TCK)
	out="target $(awk -v a="$CPU_T0" -v b="$(cpu_ticks "$TGT_PID")" -v hz="$hz" -v s="$2" \
		'BEGIN { printf "%.1f", (b - a) / hz }') s"
	[ -n "$TGTP_PID" ] && out="$out, second target $(awk -v a="$CPU_TP0" \
		-v b="$(cpu_ticks "$TGTP_PID")" -v hz="$hz" 'BEGIN { printf "%.1f", (b - a) / hz }') s"
	for c in $CFGS; do
		[ "$c" = k ] && continue
		eval "a=\$CPU0_$c b=\$(cpu_ticks \$PID_$c)"
		out="$out, initiator $c $(awk -v a="$a" -v b="$b" -v hz="$hz" \
			'BEGIN { printf "%.1f", (b - a) / hz }') s"
	done
	info "CPU time $1 (${2} s wall): $out"
}

# has FLAG: the initiator's --help lists FLAG.
has() { "$INI_BIN" --help 2>&1 | grep -q -- "$1"; }
has_transport() { "$INI_BIN" --version | grep -qw "$1"; }

# ---- main ------------------------------------------------------------------------------------

vm_requires fio nvme python3 rdma ip
[ -x "$TGT_BIN" ] || vm_fail "$TGT_BIN not built"
[ -x "$INI_BIN" ] || vm_fail "$INI_BIN not built"
[ -x "$TGTP_BIN" ] || vm_fail "$TGTP_BIN not built"
[ -x "$INIP_BIN" ] || vm_fail "$INIP_BIN not built"
rm -f "$TSV" "$INFO"
trap cleanup EXIT
trap 'exit 130' INT TERM

info "guest: kernel $(uname -r), $(nproc) vCPUs (qemu TCG)," \
	"$(($(sed -n 's/MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo) / 1024)) MiB," \
	"fio $(fio --version), $(nvme version | head -n 1), $("$INI_BIN" --version)"
[ -z "$BASE_BUILD" ] || info "base build $BASE_BUILD: $("$INIP_BIN" --version)"
info "fio: ioengine=io_uring direct=1 time_based runtime=${RUNTIME}s ramp_time=${RAMP}s" \
	"size=${SIZE_MB}M norandommap, one job each; lat = mean total latency (submit+complete);" \
	"all devices attached throughout, each job on each device in turn, order rotated per job;" \
	"$ROUNDS rounds of all that"
setup_rxe
# Before any connection: rxe takes the new MTU for QPs created after it.
ip link set "$TGT_IF" mtu "$MTU" && ip link set "$INI_IF" mtu "$MTU" ||
	vm_fail "veth MTU $MTU (veth takes 68..65535)"
info "link: $TGT_IF/$INI_IF mtu $MTU, $INI_DEV $(ibv_devinfo -d "$INI_DEV" |
	sed -n 's/.*active_mtu:[[:space:]]*\([0-9]*\).*/RoCE active_mtu \1/p')"
if [ "$BACKING" = brd ]; then
	# A RAM block device, as NVMe-oF transports are usually measured: O_DIRECT I/O goes to
	# the block layer without a page cache, for nvmet (bdev backend) and for rdmablk alike.
	modinfo brd >/dev/null 2>&1 || vm_fail "kernel $(uname -r) has no brd module (BACKING=tmpfs)"
	modprobe brd rd_nr=1 rd_size=$((SIZE_MB * 1024)) max_part=0 || vm_fail "modprobe brd"
	DISK=/dev/ram0
	NS_KIND="brd RAM block device"
else
	mkdir -p disk
	mount -t tmpfs -o size=$((SIZE_MB + 64))m tmpfs disk || vm_fail "tmpfs for the backing file"
	DISK=$PWD/disk/disk.img
	NS_KIND="file on a guest tmpfs"
fi
t0=$(cut -d' ' -f1 /proc/uptime)
# Every block written (no holes: reads must copy real pages); /dev/urandom for all of it takes
# over a minute under TCG, so a 16 MiB random chunk repeated.
dd if=/dev/urandom of=chunk bs=1M count=16 status=none || vm_fail "random chunk"
i=0
while [ $i -lt $((SIZE_MB / 16)) ]; do
	cat chunk || exit 1
	i=$((i + 1))
done >"$DISK" || vm_fail "fill $DISK"
rm -f chunk
[ "$(blockdev --getsize64 "$DISK" 2>/dev/null || stat -c %s "$DISK")" = $((SIZE_MB << 20)) ] ||
	vm_fail "$DISK has the wrong size"
info "backing store: ${SIZE_MB} MiB (a 16 MiB random chunk repeated), $NS_KIND, written in" \
	"$(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.0f", b - a }') s"

# Cache mode for both: O_DIRECT when the tmpfs takes it (6.6+), else buffered.
if dd if="$DISK" of=/dev/null bs=4k count=1 iflag=direct status=none 2>/dev/null; then
	KBUF=0 RB_DIRECT=yes
else
	KBUF=1 RB_DIRECT=no
fi

attach_kernel
rb_na=
has_transport rdma || rb_na="not built: no rdma transport"
start_target "$TGT_BIN" TGT_PID target \
	"rdma://$TGT_ADDR:$RB_RDMA_PORT, tcp://$TGT_ADDR:$RB_TCP_PORT"
if [ "$POLL_US" != off ] && [ -z "$rb_na" ]; then
	start_target "$TGTP_BIN" TGTP_PID target-p "rdma://$TGT_ADDR:$RB_POLL_PORT" \
		"${POLL_US:+poll-us = $POLL_US}"
fi
if ! has --nbd-device; then
	na r "not built: --nbd-device missing"
	na t "not built: --nbd-device missing"
else
	vm_modprobe nbd
	if [ -n "$rb_na" ]; then
		na r "$rb_na"
	else
		attach_rdmablk "$INI_BIN" r "rdma://$TGT_ADDR:$RB_RDMA_PORT/bench" --nbd-device auto
	fi
	attach_rdmablk "$INI_BIN" t "tcp://$TGT_ADDR:$RB_TCP_PORT/bench" --nbd-device auto
fi
if ! has --ublk; then
	na u "not built: --ublk missing"
elif [ -n "$rb_na" ]; then
	na u "$rb_na"
else
	vm_modprobe ublk_drv
	attach_rdmablk "$INI_BIN" u "rdma://$TGT_ADDR:$RB_RDMA_PORT/bench" --ublk
fi
if [ -n "$TGTP_PID" ]; then
	has --nbd-device && attach_rdmablk "$INIP_BIN" rp "rdma://$TGT_ADDR:$RB_POLL_PORT/bench" \
		--nbd-device auto ${POLL_US:+--poll-us "$POLL_US"}
	has --ublk && attach_rdmablk "$INIP_BIN" up "rdma://$TGT_ADDR:$RB_POLL_PORT/bench" \
		--ublk ${POLL_US:+--poll-us "$POLL_US"}
fi

# Attached but idle, the daemons must not eat the CPU the measured one needs.
cpu_mark
sleep 5
cpu_report "while all are idle" 5
info "load at start: $(cat /proc/loadavg)"
cpu_mark
t0=$(cut -d. -f1 /proc/uptime)
rot=0
round=1
while [ $round -le "$ROUNDS" ]; do
	for job in $JOBS; do
		name=${job%%:*} rest=${job#*:}
		rw=${rest%%:*} rest=${rest#*:}
		bs=${rest%%:*} qd=${rest#*:}
		# This job's order: CFGS rotated left by rot.
		set -- $CFGS
		i=0
		while [ $i -lt $((rot % $#)) ]; do
			c=$1
			shift
			set -- "$@" "$c"
			i=$((i + 1))
		done
		for c in "$@"; do
			eval "dev=\$DEV_$c"
			run_job "$c" "$dev" "$name" "$rw" "$bs" "$qd"
		done
		rot=$((rot + 1))
	done
	round=$((round + 1))
done
collect
cpu_report "during the jobs" $(($(cut -d. -f1 /proc/uptime) - t0))
info "load at end: $(cat /proc/loadavg)"

info "guest CPU busy during each job ($(echo $JOBS | sed 's/:[^ ]*//g'), round after round):"
for c in $CFGS; do
	eval "info \"  $c: \$BUSY_$c\""
done
# Every configuration's traffic crossed the link: the initiator side's counters say so.
for c in $CFGS; do
	eval "p=\${PK_$c:-0} v=\${VP_$c:-0}"
	info "$c: $INI_DEV sent $p RoCE packets, $INI_IF sent $v packets during its jobs"
	case $c in
	t) [ "$v" -gt 1000 ] || vm_fail "$c: the jobs' traffic did not cross $INI_IF" ;;
	*) [ "$p" -gt 1000 ] || vm_fail "$c: the jobs' traffic did not cross $INI_DEV" ;;
	esac
done
for c in $CFGS; do
	[ "$c" = k ] || detach_rdmablk "$c"
done
nvmet_down
exit 0
