#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The end-to-end tests (tests/e2e-*.sh) over rdma instead of tcp: the target
# listens on rdma://ADDR and the initiator connects there, so every command
# and every RDMA READ and WRITE goes through the RDMA device that owns ADDR.
#
#   tests/rdma-e2e.sh [-n] [-p PREFIX] [-t "NAME..."] [ADDR]
#     ADDR    an IPv4 address of an RDMA device's network interface (default:
#             the first one `rdma link` shows ACTIVE with an address)
#     -p PREFIX   keep a failed test's whole output as PREFIXNAME.out
#                 (default: in a temporary directory, named at the end)
#     -t NAMES    run only these tests (e2e-basic ...; default: all below)
#     -n      only print the address it would use
#
# Run it from a build tree after `make check` (which builds the test tools),
# on a host with a real RDMA device.  The VM suite runs it on Soft-RoCE
# (tests/vm/t-e2e-rdma-*.sh).  Exit 0 when all passed, 1 when one failed, 77
# when there is no RDMA device with an address here.
set -u

TESTS="e2e-basic e2e-nbdcopy e2e-fio-verify e2e-readonly e2e-acl e2e-malformed
	e2e-target-killed e2e-sigterm e2e-poll e2e-enospc e2e-no-incapsule e2e-idle-queue
	e2e-reload e2e-disconnect e2e-auth"

prefix= dry=
while getopts np:t:h opt; do
	case $opt in
	n) dry=1 ;;
	p) prefix=$OPTARG ;;
	t) TESTS=$OPTARG ;;
	h) sed -n '4,19s/^# \{0,1\}//p' "$0"; exit 0 ;;
	*) sed -n '4,19s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$PWD}
for t in $TESTS; do
	[ -f "$top_srcdir/tests/$t.sh" ] ||
		{ echo "rdma-e2e: no test $t (tests/$t.sh)" >&2; exit 2; }
done

# An ACTIVE RDMA port's network interface, and its first IPv4 address.
find_addr() {
	local dev
	command -v rdma >/dev/null || return 1
	for dev in $(rdma link show 2>/dev/null |
		sed -n 's/.* state ACTIVE .* netdev \([^ ]*\).*/\1/p'); do
		ip -4 -o addr show dev "$dev" 2>/dev/null | awk '{ split($4, a, "/"); print a[1]; exit }' |
			grep . && return 0
	done
	return 1
}

addr=${1:-}
if [ -z "$addr" ] && ! addr=$(find_addr); then
	echo "rdma-e2e: SKIP: no ACTIVE RDMA device with an IPv4 address on this host" \
		"(rdma link show; or give ADDR)" >&2
	exit 77
fi
if [ -n "$dry" ]; then
	echo "$addr"
	exit 0
fi
if [ ! -x "$top_builddir/tests/rawclient" ]; then
	echo "rdma-e2e: no test tools in $top_builddir (run it from a build tree after make check)" >&2
	exit 1
fi
if [ -z "$prefix" ]; then
	keep=$(mktemp -d "${TMPDIR:-/tmp}/rdmablk-rdma-e2e.XXXXXX")
	prefix=$keep/
fi

echo "# rdma-e2e: end-to-end tests over rdma://$addr"
failed=
for t in $TESTS; do
	out=$(mktemp "${TMPDIR:-/tmp}/rdmablk-$t.XXXXXX")
	rc=0
	E2E_TRANSPORT=rdma E2E_ADDR=$addr top_srcdir=$top_srcdir top_builddir=$top_builddir \
		bash "$top_srcdir/tests/$t.sh" >"$out" 2>&1 || rc=$?
	echo "# $t over rdma: exit $rc"
	if [ "$rc" != 0 ]; then
		cp "$out" "$prefix$t.out" && echo "# whole output: $prefix$t.out"
		grep -E '^(FAIL|SKIP|not ok)' "$out" | head -n 5
		tail -40 "$out"
		failed="$failed $t"
	fi
	rm -f "$out"
done
[ -z "${keep:-}" ] || rmdir "$keep" 2>/dev/null || true
if [ -n "$failed" ]; then
	echo "rdma-e2e: failed over rdma:$failed" >&2
	exit 1
fi
echo "# rdma-e2e: all passed"
exit 0
