# SPDX-License-Identifier: MIT
#
# Body of t-{ublk,nbd}-auth-rdma.sh, sourced after lib.sh and a frontend library, with
# AUTH_FRONTEND_ARGS (the initiator's frontend flags for a bare run): authentication over
# rdma (issue 30).  The export requires authentication and the target has a secret for this
# host and its own secret; a wrong host secret is refused (both sides say so), then the
# right one, with --target-secret (the target proves itself too), attaches the device, fio
# writes and verifies through it, and the detach is clean.

vm_requires fio
KEYGEN=$top_builddir/tools/rdmablk-keygen
[ -x "$KEYGEN" ] || vm_skip "$KEYGEN not built"
fe_setup
truncate -s 64M disk.img
for k in host wrong target; do
	(umask 077 && "$KEYGEN" >"$k.key") || fe_fail "keygen $k.key"
done
# fe_start_target's file, with the target secret in [target] and a [host] section.
cat >target.conf <<CONF
[target]
listen = $FE_TRANSPORT://$FE_HOST:$FE_PORT
threads = 2
target-secret-file = $PWD/target.key
[export disk0]
path = $PWD/disk.img
auth = required
[host vm]
hostid = vm-auth-host
secret-file = $PWD/host.key
CONF
"$TGT_BIN" --config target.conf >target.log 2>&1 &
TGT_PID=$!
vm_wait_for 60 grep -q "ready:" target.log || fe_fail "target did not become ready"

# A wrong secret: refused, on both sides, before any device appears.
rc=0
timeout 60 "$INI_BIN" "$FE_URI" $AUTH_FRONTEND_ARGS --host-id vm-auth-host --secret wrong.key \
	>wrong.out 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat wrong.out; fe_fail "wrong secret: exit $rc"; }
grep -q "authentication failed" wrong.out || { cat wrong.out; fe_fail "wrong secret: no message"; }
vm_wait_for 60 grep -q "host vm-auth-host: admin queue authentication failed" target.log ||
	fe_fail "the target did not log the failed authentication"
echo "# wrong secret refused: $(grep -m1 'authentication failed' wrong.out)"

fe_attach --host-id vm-auth-host --secret host.key --target-secret target.key --queues 2 \
	--queue-depth 32
grep -q "authenticated both ways" ini.log || fe_fail "the initiator did not verify the target"
fio --name=auth --filename="$FE_DEV" --ioengine=libaio --direct=1 --rw=randwrite --bs=4k-64k \
	--size=16M --iodepth=8 --verify=crc32c --verify_fatal=1 --do_verify=1 \
	--output=fio.log || { cat fio.log; fe_fail "fio verify through $FE_DEV failed"; }
echo "# fio: $(grep -h -m1 'write:' fio.log | sed 's/^ *//')"
fe_detach
fe_check_no_dstate
exit 0
