#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the rdma transport on real verbs (Soft-RoCE). Runs the transport tests
# (tests/test-tcp-transport and tests/test-transport-flow, which take the transport by name)
# over rdma with the listener on the target side ($TGT_ADDR, rxe0); the connecting side resolves to rxe1, so every connection
# crosses the veth pair. The rxe counters must show it did.
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"

bins="$top_builddir/tests/test-tcp-transport $top_builddir/tests/test-transport-flow"
for bin in $bins; do
	[ -x "$bin" ] || vm_skip "$bin not built (make check builds it)"
done
setup_rxe

stat() { rdma statistic show link "$1/1" | sed -n "s/.* $2 \([0-9]*\).*/\1/p"; }
sent0=$(stat "$INI_DEV" sent_pkts)
rcvd0=$(stat "$TGT_DEV" rcvd_pkts)

# Registered memory is locked memory; root in the VM has no limit, but say what it is.
echo "# memlock limit: $(ulimit -l)"
# run_one BIN MIN: BIN over rdma must pass with more than MIN checks.
run_one() {
	name=$(basename "$1")
	rc=0
	RB_TEST_ADDR=$TGT_ADDR "$1" rdma >"$name.log" 2>&1 || rc=$?
	cat "$name.log"
	grep -q '^# SKIP transport' "$name.log" &&
		vm_fail "the build has no rdma transport (librdmacm/libibverbs missing at configure time?)"
	[ "$rc" = 0 ] || vm_fail "$name rdma exit $rc ($(grep -c '^not ok' "$name.log") failed)"
	n=$(grep -c '^ok ' "$name.log")
	[ "$n" -gt "$2" ] || vm_fail "$name: only $n checks passed: the test did not run through"
	total=$((${total:-0} + n))
}
run_one "$top_builddir/tests/test-tcp-transport" 80
run_one "$top_builddir/tests/test-transport-flow" 10
rdma statistic show link "$TGT_DEV/1" | sed 's/^/# /'
rdma statistic show link "$INI_DEV/1" | sed 's/^/# /'
n=$total
sent=$(($(stat "$INI_DEV" sent_pkts) - ${sent0:-0}))
rcvd=$(($(stat "$TGT_DEV" rcvd_pkts) - ${rcvd0:-0}))
[ "$sent" -gt 0 ] && [ "$rcvd" -gt 0 ] ||
	vm_fail "no traffic crossed the veth ($INI_DEV sent $sent, $TGT_DEV received $rcvd)"
echo "# $n checks passed; $INI_DEV sent $sent packets, $TGT_DEV received $rcvd"
exit 0
