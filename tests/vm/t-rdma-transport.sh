#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the rdma transport on real verbs (Soft-RoCE). Runs the transport semantics test
# (tests/test-tcp-transport, which takes the transport by name) over rdma with the listener on
# the target side ($TGT_ADDR, rxe0); the connecting side resolves to rxe1, so every connection
# crosses the veth pair. The rxe counters must show it did.
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"

bin=$top_builddir/tests/test-tcp-transport
[ -x "$bin" ] || vm_skip "$bin not built (make check builds it)"
setup_rxe

stat() { rdma statistic show link "$1/1" | sed -n "s/.* $2 \([0-9]*\).*/\1/p"; }
sent0=$(stat "$INI_DEV" sent_pkts)
rcvd0=$(stat "$TGT_DEV" rcvd_pkts)

# Registered memory is locked memory; root in the VM has no limit, but say what it is.
echo "# memlock limit: $(ulimit -l)"
rc=0
RB_TEST_ADDR=$TGT_ADDR "$bin" rdma >out.log 2>&1 || rc=$?
cat out.log

rdma statistic show link "$TGT_DEV/1" | sed 's/^/# /'
rdma statistic show link "$INI_DEV/1" | sed 's/^/# /'
grep -q '^# SKIP transport' out.log && vm_fail "the build has no rdma transport (librdmacm/libibverbs missing at configure time?)"
[ "$rc" = 0 ] || vm_fail "test-tcp-transport rdma exit $rc ($(grep -c '^not ok' out.log) failed)"
n=$(grep -c '^ok ' out.log)
[ "$n" -gt 100 ] || vm_fail "only $n checks passed: the test did not run through"
sent=$(($(stat "$INI_DEV" sent_pkts) - ${sent0:-0}))
rcvd=$(($(stat "$TGT_DEV" rcvd_pkts) - ${rcvd0:-0}))
[ "$sent" -gt 0 ] && [ "$rcvd" -gt 0 ] ||
	vm_fail "no traffic crossed the veth ($INI_DEV sent $sent, $TGT_DEV received $rcvd)"
echo "# $n checks passed; $INI_DEV sent $sent packets, $TGT_DEV received $rcvd"
exit 0
