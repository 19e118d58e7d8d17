#!/bin/bash
# A thin export whose file system fills up: the write that finds no space
# fails with ENOSPC (an NBD error for that request, and a target log line
# naming export and offset), not a dropped connection.  Data written before
# is intact, overwrites of allocated blocks still work, and once a trim gives
# space back, writes work again; with io_uring writes and with inline
# writes.  The file systems are 1 MiB tmpfs mounts in a private mount
# namespace, so this needs root (CI runs as root).
if [ -z "${RB_MOUNT_NS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	RB_MOUNT_NS=1 exec unshare --mount --propagation private bash "$0" "$@"
fi
. "$top_srcdir/tests/helpers.sh"
[ -n "${RB_MOUNT_NS:-}" ] || skip "needs root and unshare to mount a small tmpfs"

# Two exports, each on its own tmpfs: "thin" with the default io_uring writes,
# "thini" with inline-writes = yes (the reactor's own pwrite).
for x in thin thini; do
	mkdir "$T/fs-$x"
	mount -t tmpfs -o size=1m rdmablk-enospc "$T/fs-$x"
	truncate -s 8M "$T/fs-$x/$x.img"
done
# Detach the tmpfs (lazily: the target may still hold the file) so that
# cleanup can remove $T; cleanup still sees the test's exit status.
trap 'rc=$?; umount -l "$T"/fs-* 2>/dev/null || true; (exit $rc); cleanup' EXIT

port=$(free_port)
write_target_conf "$T/target.conf" "$port" thin "$T/fs-thin/thin.img"
printf '[export thini]\npath = %s\ndirect = no\ninline-writes = yes\n' \
	"$T/fs-thini/thini.img" >>"$T/target.conf"
start_target "$T/target.conf"
grep -q "export thini: .*, inline writes" "$T/target.log" ||
	fail "export thini: no 'inline writes' in its open line"

for x in thin thini; do
	start_initiator "ini-$x" "$(target_url "$port")/$x"
	uri=$(nbd_uri "ini-$x" "$x")
	ops() { "$top_builddir/tests/nbd-ops" "$uri" "$@"; }

	ops write:0:262144:aa read:0:262144:aa || fail "$x: write within the free space failed"
	# 2 MiB do not fit in the 768 KiB left: some chunks land, the request fails.
	ops fail:ENOSPC:write:1048576:2097152:bb ||
		fail "$x: a write into a full file system did not fail with ENOSPC"
	grep -q "export $x: WRITE offset [0-9]* length [0-9]* (peer .*): No space left on device" \
		"$T/target.log" || fail "$x: target did not log the failed write with export, offset and peer"
	ops read:0:262144:aa || fail "$x: data written before the file system filled up changed"
	ops write:0:4096:cc read:0:4096:cc read:4096:258048:aa ||
		fail "$x: overwriting allocated blocks failed on a full file system"
	ops trim:1048576:2097152 write:1048576:131072:dd read:1048576:131072:dd ||
		fail "$x: writes did not work again after a trim gave space back"
	pid_alive "$T/ini-$x.pid" || fail "$x: initiator died"
done
pid_alive "$T/target.pid" || fail "target died"
kill -USR1 "$(cat "$T/target.pid")"
wait_until 60 grep -q "export thini stats:" "$T/target.log" || fail "no stats line"
n=$(grep "export thini stats:" "$T/target.log" | tail -1 | sed -n 's/.* inline_writes=\([0-9]*\).*/\1/p')
[ "${n:-0}" -gt 0 ] || fail "thini: no write was done inline (inline_writes=$n)"
echo "ok"
