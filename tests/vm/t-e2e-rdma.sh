#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the host's end-to-end tests (tests/e2e-*.sh) again, over rdma
# on Soft-RoCE: the target listens on rdma://$TGT_ADDR (rxe0) and the
# initiator connects through rxe1, so every command and every RDMA READ and
# WRITE crosses the veth.  Integrity (nbdcopy, fio verify), read-only,
# ACL, malformed capsules from a raw host, target killed, SIGTERM, a full
# file system under a thin export.
# vm-timeout: 600
. "$(dirname "$0")/lib.sh"

[ -x "$top_builddir/tests/rawclient" ] || vm_skip "tests not built (make check builds them)"
setup_rxe
stat() { rdma statistic show link "$1/1" | sed -n "s/.* $2 \([0-9]*\).*/\1/p"; }
rcvd0=$(stat "$TGT_DEV" rcvd_pkts)

failed=""
for t in e2e-basic e2e-nbdcopy e2e-fio-verify e2e-readonly e2e-acl e2e-malformed \
	e2e-target-killed e2e-sigterm e2e-poll e2e-enospc; do
	rc=0
	E2E_TRANSPORT=rdma E2E_ADDR=$TGT_ADDR top_srcdir=$top_srcdir top_builddir=$top_builddir \
		bash "$top_srcdir/tests/$t.sh" >"$t.out" 2>&1 || rc=$?
	echo "# $t over rdma: exit $rc"
	if [ "$rc" != 0 ]; then
		# The whole output goes to the host; here the verdict, then the end.
		cp "$t.out" "$RDMABLK_VM_RESULTS/t-e2e-rdma.$t.out" 2>/dev/null &&
			echo "# whole output: t-e2e-rdma.$t.out in the results"
		grep -E '^(FAIL|SKIP|not ok)' "$t.out" | head -n 5
		tail -40 "$t.out"
		failed="$failed $t"
	fi
done
rcvd=$(($(stat "$TGT_DEV" rcvd_pkts) - ${rcvd0:-0}))
echo "# $TGT_DEV received $rcvd packets"
[ -z "$failed" ] || vm_fail "failed over rdma:$failed"
[ "$rcvd" -gt 1000 ] || vm_fail "almost no traffic crossed the veth ($rcvd packets)"
exit 0
