# SPDX-License-Identifier: MIT
#
# Body of t-e2e-rdma-*.sh, sourced after lib.sh with E2E_GROUP (the guest test's name) and
# E2E_TESTS (which of the host's end-to-end tests, tests/e2e-*.sh; E2E_MIN_PACKETS, the rxe0
# packets that prove traffic crossed the veth, default 100): those tests again, over
# rdma on Soft-RoCE (tests/rdma-e2e.sh): the target listens on rdma://$TGT_ADDR (rxe0) and the
# initiator connects through rxe1, so every command and every RDMA READ and WRITE crosses the
# veth.  The tests are split in groups so that each guest test has its own time budget: one
# guest test for all of them ran past its 600 s on a loaded machine.

[ -x "$top_builddir/tests/rawclient" ] || vm_skip "tests not built (make check builds them)"
setup_rxe
stat() { rdma statistic show link "$1/1" | sed -n "s/.* $2 \([0-9]*\).*/\1/p"; }
rcvd0=$(stat "$TGT_DEV" rcvd_pkts)

# Without an address the runner finds one of an ACTIVE RDMA port.
found=$("$top_srcdir/tests/rdma-e2e.sh" -n) || vm_fail "rdma-e2e.sh found no RDMA address"
case "$found" in
"$TGT_ADDR" | "$INI_ADDR") echo "# rdma-e2e.sh -n: $found" ;;
*) vm_fail "rdma-e2e.sh -n gave '$found', not an address of $TGT_DEV or $INI_DEV" ;;
esac

# The same runner a host with a real RDMA device uses; a failed test's whole
# output goes to the host as $E2E_GROUP.NAME.out.
rc=0
top_srcdir=$top_srcdir top_builddir=$top_builddir \
	"$top_srcdir/tests/rdma-e2e.sh" -p "$RDMABLK_VM_RESULTS/$E2E_GROUP." -t "$E2E_TESTS" \
	"$TGT_ADDR" || rc=$?
rcvd=$(($(stat "$TGT_DEV" rcvd_pkts) - ${rcvd0:-0}))
echo "# $TGT_DEV received $rcvd packets"
[ "$rc" = 0 ] || vm_fail "rdma-e2e.sh exited $rc"
# Proof that rxe carried the tests (without it: next to none).  How many
# more depends on how many I/O rounds a test fits in its time, that is on the
# machine's speed: the admin group received 955 on a loaded machine.
[ "$rcvd" -gt "${E2E_MIN_PACKETS:-100}" ] ||
	vm_fail "almost no traffic crossed the veth ($rcvd packets)"
exit 0
