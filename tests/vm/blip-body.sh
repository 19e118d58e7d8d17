# SPDX-License-Identifier: MIT
#
# Body of t-{nbd,ublk}-blip-rdma.sh, sourced after lib.sh and a frontend library: the
# Soft-RoCE link drops every packet for 8 s (netem on both veth ends) while fio writes with
# checksums through the block device; target and initiator stay up.  The initiator's queues
# fail (a command timeout of 3 s, or the QP's retries running out), it reconnects once the
# link is back, naming the session it replaces, and re-issues what was unanswered: fio ends
# without an error and every block verifies; nothing is left in D state.

vm_requires fio timeout tc
vm_modprobe sch_netem
fe_setup
[ "$FE_TRANSPORT" = rdma ] || vm_fail "the link blip needs the Soft-RoCE veth pair (rdma)"
# netem goes on before any traffic and the blip only changes its loss rate: adding or
# deleting a root qdisc swaps in noop_qdisc for a moment, and rxe takes its NET_XMIT_CN
# as a send error that moves the sending QP to the error state; when that QP is the
# device's QP1, the kernel's connection manager can no longer send, and no reconnect
# works again.  A lossy link does not do that; the test would be of rxe, not of us.
tc qdisc add dev "$TGT_IF" root netem loss 0% &&
	tc qdisc add dev "$INI_IF" root netem loss 0% || fe_fail "tc netem on $TGT_IF/$INI_IF"
truncate -s 128M disk.img
fe_start_target "$PWD/disk.img"
fe_attach --queues 2 --queue-depth 32 --timeout 3000 --ctrl-loss-tmo 60000 \
	--reconnect-delay 500

fe_verify_start
tc qdisc change dev "$TGT_IF" root netem loss 100% &&
	tc qdisc change dev "$INI_IF" root netem loss 100% || fe_fail "netem loss 100%"
sleep 8
tc qdisc change dev "$TGT_IF" root netem loss 0% &&
	tc qdisc change dev "$INI_IF" root netem loss 0% || fe_fail "netem loss back to 0%"
start=$(cut -d. -f1 /proc/uptime)
vm_wait_for 60 grep -q "re-established" ini.log || fe_fail "the initiator did not reconnect"
echo "# reconnected $(($(cut -d. -f1 /proc/uptime) - start)) s after the link was back:"
grep -h "lost:\|re-issued\|re-established" ini.log | sed 's/^/#   /'
grep -h "replaces session\|replaced" target.log | sed 's/^/#   target: /'
fe_verify_wait "link blip"
grep -q "failing it with EIO" ini.log && fe_fail "a command was failed instead of re-issued"
fe_check_rxe 1000
for _d in "$TGT_DEV" "$INI_DEV"; do
	[ "$(_fe_rxe_stat "$_d" send_err)" = 0 ] ||
		fe_fail "$_d: rxe send errors: the local qdisc refused a packet, the blip was not clean"
done
fe_check_no_dstate
fe_detach
fe_check_no_dstate
exit 0
