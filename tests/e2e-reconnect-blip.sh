#!/bin/bash
# One I/O queue's connection breaks while the target keeps running (a network
# blip, not a restart).  The initiator (--ctrl-loss-tmo) reconnects and names
# the session it replaces.  A write of that old session is still executing on
# the target (its file system is frozen), so the target holds the new CONNECT:
# started now, the re-issued copy and later writes could land before the old
# copy does.  While frozen the initiator gets no session and says why; once the
# file system thaws, the old write finishes, the session comes back, the
# re-issued write completes and the data reads back.  The file system is an
# ext4 image on a loop device in a private mount namespace: needs root (CI).
if [ -z "${RB_MOUNT_NS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	RB_MOUNT_NS=1 exec unshare --mount --propagation private bash "$0" "$@"
fi
. "$top_srcdir/tests/helpers.sh"
[ -n "${RB_MOUNT_NS:-}" ] || skip "needs root and unshare to mount a file system it can freeze"
requires fsfreeze mkfs.ext4 ss timeout

mkdir "$T/fs"
truncate -s 64M "$T/fs.img"
mkfs.ext4 -q -F "$T/fs.img" || fail "mkfs.ext4 of the scratch image failed"
mount -o loop "$T/fs.img" "$T/fs" || fail "cannot loop-mount the scratch file system"
# Thawed and detached on every exit, so no daemon stays blocked on it.
trap 'rc=$?; fsfreeze -u "$T/fs" 2>/dev/null || true; umount -l "$T/fs" 2>/dev/null || true; (exit $rc); cleanup' EXIT
truncate -s 16M "$T/fs/disk.img"

port=$(free_port)
write_target_conf "$T/target.conf" "$port" disk0 "$T/fs/disk.img"
start_target "$T/target.conf"
start_initiator ini "$(target_url "$port")/disk0" --queues 2 --timeout 20000 \
	--ctrl-loss-tmo 30000 --reconnect-delay 300
uri=$(nbd_uri ini disk0)
ops() { "$top_builddir/tests/nbd-ops" "$uri" "$@"; }
ops write:0:65536:aa read:0:65536:aa || fail "baseline write failed"

fsfreeze -f "$T/fs"
ops write:0:65536:bb >"$T/write.out" 2>&1 &
wpid=$!
sleep 1
kill -0 $wpid 2>/dev/null || fail "the write finished on a frozen file system: $(cat "$T/write.out")"

# Break I/O queue 1's connection only (its initiator-side socket; the target
# logged that peer's port): the admin queue and the target stay up.
lport=$(sed -n 's/.* peer 127\.0\.0\.1:\([0-9]*\): queue 1 connected.*/\1/p' "$T/target.log" | tail -1)
[ -n "$lport" ] || fail "no 'queue 1 connected' line in the target log"
ss -K -4 -t dst 127.0.0.1 dport = ":$port" sport = ":$lport" >/dev/null ||
	fail "ss -K could not close the connection"
wait_until 60 grep -q "the session this one replaces still has commands in flight" \
	"$T/target.log" || fail "the target did not hold the CONNECT for the replaced session"
# The target refuses the waiting CONNECT after its bound (2 s), the initiator
# says why, and there is no session while the old write is stuck.
wait_until 30 grep -q "still has commands in flight after [0-9]* ms: refused" "$T/target.log" ||
	fail "the target did not refuse the waiting CONNECT after its bound"
wait_until 30 grep -q "the session it replaces still has commands executing on the target" \
	"$T/ini.log" || fail "the initiator did not say why the CONNECT was refused"
grep -q "re-established" "$T/ini.log" &&
	fail "the initiator reconnected while the replaced session still had a write executing"
kill -0 $wpid 2>/dev/null || fail "the write ended during the reconnect: $(cat "$T/write.out")"

fsfreeze -u "$T/fs"
wait_until 60 grep -q "re-established" "$T/ini.log" ||
	fail "the initiator did not reconnect after the file system thawed"
wait_child_ok $wpid 20 "the write across the reconnect" "$T/write.out"
grep -q "commands re-issued" "$T/ini.log" || fail "the initiator logged no re-issue"
ops read:0:65536:bb write:65536:4096:cc read:65536:4096:cc ||
	fail "data after the reconnect is wrong"
pid_alive "$T/target.pid" || fail "target died"
stop_and_status "$T/ini.pid"
[ "$stop_rc" -eq 0 ] || fail "initiator exit status $stop_rc after SIGTERM"
cmp -n 65536 "$T/fs/disk.img" <(head -c 65536 /dev/zero | tr '\0' '\273') ||
	fail "the exported file does not hold the re-issued write"
echo "ok"
