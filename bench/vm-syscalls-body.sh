# SPDX-License-Identifier: MIT
#
# Body of bench/vm-syscalls-{ublk,nbd}-*.sh (guest scripts, sourced after the frontend's lib):
# the system calls rdmablk's two daemons make per I/O, counted by perf on the kernel's
# syscall tracepoints while fio runs on the attached device. Unlike IOPS under TCG, counts
# do not move with the host's load: they say how well the daemons batch. One line per job
# and daemon into $RDMABLK_VM_RESULTS/vm-syscalls.tsv: FRONTEND/TRANSPORT JOB DAEMON IOS
# TOTAL then NAME=COUNT for each call counted.
SYSC_CALLS="write read epoll_wait io_uring_enter ioctl sendmsg recvfrom readv"
SYSC_JOBS="4k-randread-qd32:randread:32 4k-randwrite-qd32:randwrite:32 4k-randread-qd1:randread:1"
[ -r "$RDMABLK_VM_RESULTS/vm-syscalls.env" ] && . "$RDMABLK_VM_RESULTS/vm-syscalls.env"
SYSC_RUNTIME=${SYSC_RUNTIME:-6}

vm_requires fio perf
fe_setup
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing ||
	vm_fail "cannot mount tracefs"
modprobe brd rd_nr=1 rd_size=262144 max_part=0 || vm_fail "modprobe brd"
fe_start_target /dev/ram0 "direct = yes"
fe_attach --queues 2 --queue-depth 128
ev=raw_syscalls:sys_enter
for s in $SYSC_CALLS; do
	[ -d "/sys/kernel/tracing/events/syscalls/sys_enter_$s" ] && ev="$ev,syscalls:sys_enter_$s"
done
tsv=$RDMABLK_VM_RESULTS/vm-syscalls.tsv
cfg=$SYSC_FRONTEND/$FE_TRANSPORT
for job in $SYSC_JOBS; do
	name=${job%%:*} rest=${job#*:}
	rw=${rest%%:*} qd=${rest#*:}
	# perf outlives fio by its sleep; the counts cover the whole fio run.
	perf stat -x, -e "$ev" -p "$TGT_PID" -o perf-t.csv -- sleep $((SYSC_RUNTIME + 4)) &
	perf_t=$!
	perf stat -x, -e "$ev" -p "$INI_PID" -o perf-i.csv -- sleep $((SYSC_RUNTIME + 4)) &
	perf_i=$!
	sleep 0.5
	fio --name="$name" --filename="$FE_DEV" --ioengine=io_uring --direct=1 --rw="$rw" \
		--bs=4k --iodepth="$qd" --runtime="$SYSC_RUNTIME" --time_based --size=256M \
		--norandommap --randrepeat=0 --output-format=terse --terse-version=3 >fio.terse ||
		fe_fail "fio $name on $FE_DEV"
	wait "$perf_t" "$perf_i" || fe_fail "perf stat"
	# terse v3: fields 6 and 47 are the KiB read and written.
	ios=$(awk -F';' '{ print int(($6 + $47) / 4) }' fio.terse)
	[ "$ios" -gt 0 ] || fe_fail "fio $name did no I/O"
	for d in t i; do
		[ $d = t ] && who=target || who=initiator
		awk -F, -v c="$cfg" -v j="$name" -v w="$who" -v n="$ios" '
			/sys_enter/ { e = $3; sub(/.*sys_enter_?/, "", e); v[++k] = (e == "" ? "total" : e) "=" $1 }
			END { printf "%s\t%s\t%s\t%d", c, j, w, n; for (i = 1; i <= k; i++) printf "\t%s", v[i]; print "" }
		' "perf-$d.csv" >>"$tsv"
	done
	echo "# $name: $ios I/Os; $(tail -n 2 "$tsv" | cut -f 3,5 | tr '\t\n' ' ')"
done
fe_detach
exit 0
