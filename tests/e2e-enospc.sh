#!/bin/bash
# A thin export whose file system fills up: the write that finds no space
# fails with ENOSPC (an NBD error for that request, and a target log line
# naming export and offset), not a dropped connection.  Data written before
# is intact, overwrites of allocated blocks still work, and once a trim gives
# space back, writes work again.  The file system is a 1 MiB tmpfs in a
# private mount namespace, so this needs root (CI runs as root).
if [ -z "${RB_MOUNT_NS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	RB_MOUNT_NS=1 exec unshare --mount --propagation private bash "$0" "$@"
fi
. "$top_srcdir/tests/helpers.sh"
[ -n "${RB_MOUNT_NS:-}" ] || skip "needs root and unshare to mount a small tmpfs"

mkdir "$T/fs"
mount -t tmpfs -o size=1m rdmablk-enospc "$T/fs"
# Detach the tmpfs (lazily: the target may still hold the file) so that
# cleanup can remove $T; cleanup still sees the test's exit status.
trap 'rc=$?; umount -l "$T/fs" 2>/dev/null || true; (exit $rc); cleanup' EXIT
truncate -s 8M "$T/fs/thin.img"

port=$(free_port)
write_target_conf "$T/target.conf" "$port" thin "$T/fs/thin.img"
start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/thin"
uri=$(nbd_uri ini thin)
ops() { "$top_builddir/tests/nbd-ops" "$uri" "$@"; }

ops write:0:262144:aa read:0:262144:aa || fail "write within the free space failed"
# 2 MiB do not fit in the 768 KiB left: some chunks land, the request fails.
ops fail:ENOSPC:write:1048576:2097152:bb || fail "a write into a full file system did not fail with ENOSPC"
grep -q "export thin: WRITE offset [0-9]* length [0-9]* (peer .*): No space left on device" \
	"$T/target.log" || fail "target did not log the failed write with export, offset and peer"
ops read:0:262144:aa || fail "data written before the file system filled up changed"
ops write:0:4096:cc read:0:4096:cc read:4096:258048:aa ||
	fail "overwriting allocated blocks failed on a full file system"
ops trim:1048576:2097152 write:1048576:131072:dd read:1048576:131072:dd ||
	fail "writes did not work again after a trim gave space back"
pid_alive "$T/target.pid" || fail "target died"
pid_alive "$T/ini.pid" || fail "initiator died"
echo "ok"
