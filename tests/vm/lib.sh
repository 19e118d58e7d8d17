# SPDX-License-Identifier: MIT
#
# Sourced by every guest test (tests/vm/t-*.sh) as its first command:
#
#     . "$(dirname "$0")/lib.sh"
#
# Two modes:
#  - in the VM (RDMABLK_VM_GUEST=1, set by guest-runner.sh): defines the helpers below and
#    returns; the test then runs for real.
#  - on the host (make check runs t-NAME.sh there too): the test body never runs. lib.sh
#    reports the result the VM suite (vm-suite.sh, run once before) left for t-NAME in
#    $top_builddir/tests/vm/results: prints the guest log, and exits 0 / 77 / 1. Under CI=true a
#    skip is a failure.
#
# Guest helpers:
#   vm_skip REASON          print "SKIP: REASON", exit 77
#   vm_fail MSG             print "FAIL: MSG", exit 1
#   vm_requires CMD...      skip unless every command exists
#   vm_modprobe MOD...      load modules or skip (the kernel has them: failure is worth a skip
#                           only when the module is absent, otherwise fail)
#   vm_wait_for SECS CMD... retry CMD once a second until it succeeds or SECS pass
#   setup_rxe               two Soft-RoCE devices joined by a veth pair (see below)
#   setup_netns             two network namespaces joined by a veth pair (TCP only)
#   on_tgt CMD... / on_ini CMD...   run CMD on the target / initiator side of the last setup
#   ns_exec NS CMD...       run CMD in network namespace NS
#   vm_reset                undo setup_rxe / setup_netns (the runner calls it after each test)
#
# Addresses (documentation range, exist only inside the VM):
#   TGT_ADDR=192.0.2.1 on TGT_IF=rb-tgt, RDMA device TGT_DEV=rxe0
#   INI_ADDR=192.0.2.2 on INI_IF=rb-ini, RDMA device INI_DEV=rxe1
#
# Why RDMA does not use network namespaces (checked in this VM, kernel 6.12):
#   rdma_rxe in 6.12 creates its UDP (4791) socket and does its route lookups in the initial
#   network namespace only. With rb-tgt and rb-ini in namespaces "tgt" and "ini" (rdma system
#   netns shared, rxe0/rxe1 added from inside each namespace) ibv_devices lists both devices
#   but rping's client hangs: nothing reaches the peer. A VRF per side (l3mdev) fails too: rxe
#   finds its device by the receiving skb->dev, which the VRF rewrites to the master, so rxe0
#   receives nothing. Both veth ends in the initial namespace with plain routing works but is
#   loopback: both addresses are local, so rdma_cm picks rxe0 for both ends and nothing crosses
#   the veth.
#   What works, and what setup_rxe does: both ends in the initial namespace, plus policy
#   routing so that traffic to the peer's address leaves by the local veth end instead of the
#   "local" table: packets *to* 192.0.2.1 go out rb-ini from 192.0.2.2, packets to 192.0.2.2
#   go out rb-tgt from 192.0.2.1, packets arriving on either veth end are delivered locally
#   (accept_local=1, rp_filter=0). Any client connecting to TGT_ADDR, bound to a source
#   address or not, then uses rxe1 and its packets really cross the veth to rxe0 (rping:
#   rxe1 sent_pkts == rxe0 rcvd_pkts), so qdiscs (netem) on rb-ini/rb-tgt apply. on_tgt and
#   on_ini then run the command as it is, in the initial namespace.
#   setup_netns gives real isolation for TCP-only tests; on_tgt/on_ini then use ip netns exec.

if [ "${RDMABLK_VM_GUEST:-}" != 1 ]; then
	# ---- host side: report what the VM run left for this test ---------------------------
	_vm_name=$(basename "$0" .sh)
	_vm_res=${RDMABLK_VM_RESULTS:-${top_builddir:-.}/tests/vm/results}
	_vm_skip() {
		if [ "${CI:-}" = true ]; then
			echo "FAIL: $_vm_name skipped, which CI does not allow: $*"
			exit 1
		fi
		echo "SKIP: $*"
		exit 77
	}
	_vm_show() {
		[ -s "$1" ] || return 0
		echo "---- $2 ($1)"
		cat "$1"
		echo "---- end of $2"
	}
	if [ ! -e "$_vm_res/suite.status" ]; then
		echo "FAIL: no VM suite results in $_vm_res (did tests/vm/vm-suite.sh run?)"
		exit 1
	fi
	read -r _vm_st _vm_why <"$_vm_res/suite.status"
	case "$_vm_st" in
	skip) _vm_skip "VM suite skipped: $_vm_why" ;;
	ok) ;;
	*)
		echo "FAIL: VM suite failed: $_vm_why; see tests/vm/vm-suite.log"
		_vm_show "$_vm_res/$_vm_name.log" "partial guest log"
		exit 1
		;;
	esac
	if [ -e "$_vm_res/$_vm_name.host" ]; then
		# run.sh's watchdog: the guest hung in this test or the VM ended during it.
		echo "FAIL: $_vm_name: $(head -n 1 "$_vm_res/$_vm_name.host")"
		sed 1d "$_vm_res/$_vm_name.host"
		_vm_show "$_vm_res/$_vm_name.log" "partial guest log"
		exit 1
	fi
	if [ ! -e "$_vm_res/$_vm_name.rc" ]; then
		echo "FAIL: $_vm_name has no result: not run in the VM (see tests/vm/vm-suite.log)"
		_vm_show "$_vm_res/$_vm_name.log" "partial guest log"
		exit 1
	fi
	_vm_rc=$(cat "$_vm_res/$_vm_name.rc")
	echo "# $_vm_name ran in the VM, exit status $_vm_rc"
	_vm_show "$_vm_res/$_vm_name.log" "guest log"
	case "$_vm_rc" in
	0) exit 0 ;;
	77) _vm_skip "$(sed -n 's/^SKIP: *//p' "$_vm_res/$_vm_name.log" | head -n 1)" ;;
	124 | 137) echo "FAIL: $_vm_name timed out in the VM" ;;
	*) echo "FAIL: $_vm_name failed in the VM (exit $_vm_rc)" ;;
	esac
	_vm_show "$_vm_res/$_vm_name.dmesg" "guest kernel log during the test"
	exit 1
fi

# ---- guest side -------------------------------------------------------------------------

TGT_ADDR=192.0.2.1
INI_ADDR=192.0.2.2
TGT_IF=rb-tgt
INI_IF=rb-ini
TGT_DEV=rxe0
INI_DEV=rxe1
VM_SIDES=none

vm_skip() {
	echo "SKIP: $*"
	exit 77
}

vm_fail() {
	echo "FAIL: $*"
	exit 1
}

vm_requires() {
	for _c in "$@"; do
		command -v "$_c" >/dev/null 2>&1 || vm_skip "$_c not installed"
	done
}

vm_modprobe() {
	for _m in "$@"; do
		modprobe "$_m" && continue
		modinfo "$_m" >/dev/null 2>&1 || vm_skip "kernel $(uname -r) has no module $_m"
		vm_fail "modprobe $_m"
	done
}

# A process in D state in every one of 4 samples, 1 s apart, is a hang, not a
# passing wait: print them, leave their pids in VM_DSTATE and return 1.
vm_no_dstate() {
	_d=$(ps -eo pid=,stat= | awk '$2 ~ /^D/ { print $1 }' | sort)
	for _i in 1 2 3; do
		[ -n "$_d" ] || return 0
		sleep 1
		_d=$(printf '%s\n' "$_d" | while read -r _p; do
			ps -o stat= -p "$_p" 2>/dev/null | grep -q '^D' && echo "$_p"
		done)
	done
	[ -n "$_d" ] || return 0
	ps -eo pid,stat,wchan:32,args | awk 'NR == 1 || $2 ~ /^D/'
	VM_DSTATE=$(echo $_d)
	return 1
}

vm_wait_for() {
	_t=$1
	shift
	while ! "$@" >/dev/null 2>&1; do
		[ "$_t" -gt 0 ] || return 1
		_t=$((_t - 1))
		sleep 1
	done
}

ns_exec() {
	_ns=$1
	shift
	ip netns exec "$_ns" "$@"
}

on_tgt() {
	if [ "$VM_SIDES" = netns ]; then ip netns exec tgt "$@"; else "$@"; fi
}

on_ini() {
	if [ "$VM_SIDES" = netns ]; then ip netns exec ini "$@"; else "$@"; fi
}

_vm_sysctl() {
	sysctl -qw "$@" || vm_fail "sysctl $*"
}

_vm_rdma_ready() {
	ibv_devices | grep -qw "$TGT_DEV" && ibv_devices | grep -qw "$INI_DEV" &&
		rdma link show "$TGT_DEV/1" | grep -q 'state ACTIVE' &&
		rdma link show "$INI_DEV/1" | grep -q 'state ACTIVE'
}

setup_rxe() {
	vm_requires ip rdma ibv_devices
	vm_modprobe veth rdma_rxe ib_uverbs rdma_ucm
	ip link add "$TGT_IF" type veth peer name "$INI_IF" || vm_fail "create veth pair"
	ip addr add "$TGT_ADDR/24" dev "$TGT_IF" || vm_fail "address $TGT_IF"
	ip addr add "$INI_ADDR/24" dev "$INI_IF" || vm_fail "address $INI_IF"
	# Arriving on a veth end with a local source address: accept it as from a peer.
	for _i in all "$TGT_IF" "$INI_IF"; do
		_vm_sysctl "net.ipv4.conf.$_i.rp_filter=0"
	done
	_vm_sysctl "net.ipv4.conf.$TGT_IF.accept_local=1" "net.ipv4.conf.$INI_IF.accept_local=1"
	ip link set "$TGT_IF" up && ip link set "$INI_IF" up || vm_fail "veth up"
	# Packets to the peer address leave by our veth end (tables 4791/4792) before the
	# "local" table is consulted; what arrives on a veth end is delivered locally.
	ip route add "$TGT_ADDR/32" dev "$INI_IF" src "$INI_ADDR" table 4791 &&
		ip route add "$INI_ADDR/32" dev "$TGT_IF" src "$TGT_ADDR" table 4792 &&
		ip rule add pref 100 iif "$TGT_IF" lookup local &&
		ip rule add pref 101 iif "$INI_IF" lookup local &&
		ip rule add pref 200 to "$TGT_ADDR" lookup 4791 &&
		ip rule add pref 201 to "$INI_ADDR" lookup 4792 &&
		ip rule add pref 300 lookup local &&
		ip rule del pref 0 lookup local || vm_fail "policy routing for $TGT_IF/$INI_IF"
	rdma link add "$TGT_DEV" type rxe netdev "$TGT_IF" || vm_fail "rdma link add $TGT_DEV"
	rdma link add "$INI_DEV" type rxe netdev "$INI_IF" || vm_fail "rdma link add $INI_DEV"
	VM_SIDES=rxe
	vm_wait_for 60 _vm_rdma_ready || vm_fail "$TGT_DEV/$INI_DEV not active: $(ibv_devices)"
	echo "# setup_rxe: $TGT_DEV on $TGT_IF $TGT_ADDR, $INI_DEV on $INI_IF $INI_ADDR"
}

setup_netns() {
	vm_requires ip
	vm_modprobe veth
	ip netns add tgt && ip netns add ini || vm_fail "create network namespaces"
	ip link add "$TGT_IF" netns tgt type veth peer name "$INI_IF" netns ini ||
		vm_fail "create veth pair"
	ip -n tgt addr add "$TGT_ADDR/24" dev "$TGT_IF" &&
		ip -n ini addr add "$INI_ADDR/24" dev "$INI_IF" &&
		ip -n tgt link set lo up && ip -n ini link set lo up &&
		ip -n tgt link set "$TGT_IF" up && ip -n ini link set "$INI_IF" up ||
		vm_fail "configure namespaces"
	VM_SIDES=netns
	echo "# setup_netns: tgt $TGT_IF $TGT_ADDR, ini $INI_IF $INI_ADDR"
}

# Undo both setups; safe to call when nothing was set up.
vm_reset() {
	for _d in $TGT_DEV $INI_DEV; do
		rdma link show "$_d/1" >/dev/null 2>&1 && rdma link delete "$_d"
	done
	ip link show "$TGT_IF" >/dev/null 2>&1 && ip link delete "$TGT_IF"
	if ip rule show pref 300 | grep -q .; then
		ip rule show pref 0 | grep -q . || ip rule add pref 0 lookup local
		for _p in 100 101 200 201 300; do
			ip rule del pref "$_p" 2>/dev/null
		done
		ip route flush table 4791 2>/dev/null
		ip route flush table 4792 2>/dev/null
	fi
	for _n in tgt ini; do
		[ -e "/run/netns/$_n" ] && ip netns delete "$_n"
	done
	VM_SIDES=none
	return 0
}
