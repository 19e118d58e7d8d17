#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: Soft-RoCE works end to end. rping server on the target side (rxe0, 192.0.2.1),
# client on the initiator side (rxe1, 192.0.2.2), with data verification; the rxe counters
# must show the packets crossed from rxe1 to rxe0 rather than looping back inside rxe0.
# vm-timeout: 120
. "$(dirname "$0")/lib.sh"

vm_requires rping
setup_rxe

count=5
port=7174
on_tgt rping -s -a "$TGT_ADDR" -p "$port" -C "$count" -V -v >srv.log 2>&1 &
srv=$!
# The server is listening once rdma_cm has the port bound.
listening() { rdma resource show cm_id | grep LISTEN | grep -q "$TGT_ADDR:$port"; }
vm_wait_for 60 listening || echo "# no listener on $TGT_ADDR:$port seen yet; trying anyway"
rdma resource show cm_id | sed 's/^/# /'
rc=0
on_ini timeout 60 rping -c -a "$TGT_ADDR" -p "$port" -C "$count" -V -v >cli.log 2>&1 || rc=$?
sleep 1
kill "$srv" 2>/dev/null
wait "$srv"
src=$?
echo "# client (exit $rc):"
cat cli.log
echo "# server (exit $src):"
cat srv.log
rdma statistic show link "$TGT_DEV/1" | sed 's/^/# /'
rdma statistic show link "$INI_DEV/1" | sed 's/^/# /'

[ "$rc" = 0 ] || vm_fail "rping client exit $rc"
[ "$src" = 0 ] || vm_fail "rping server exit $src"
n=$(grep -c '^ping data: rdma-ping-' cli.log)
[ "$n" = "$count" ] || vm_fail "client verified $n of $count pings"
n=$(grep -c '^server ping data: rdma-ping-' srv.log)
[ "$n" = "$count" ] || vm_fail "server saw $n of $count pings"
stat() { rdma statistic show link "$1/1" | sed -n "s/.* $2 \([0-9]*\).*/\1/p"; }
sent=$(stat "$INI_DEV" sent_pkts)
rcvd=$(stat "$TGT_DEV" rcvd_pkts)
[ "${sent:-0}" -gt 0 ] || vm_fail "$INI_DEV sent no packets: traffic did not cross the veth"
[ "${rcvd:-0}" -gt 0 ] || vm_fail "$TGT_DEV received no packets"
echo "# $INI_DEV sent $sent packets, $TGT_DEV received $rcvd"
exit 0
