#!/bin/bash
# WRITE_ZEROES never fails for lack of support, honours NO_HOLE and FAST_ZERO
# (issue 28).  Through the initiator's NBD socket, 32 WRITE_ZEROES at once on
# a fresh export (with and without NO_HOLE and FUA), on files on ext4 (the
# scratch directory; O_DIRECT and buffered), on tmpfs (no ZERO_RANGE: punch
# a hole, or punch and allocate for NO_HOLE) and on ramfs (no fallocate at
# all: the target writes zeroes).  Every zeroed range reads zeroes and the
# rest its pattern; NO_HOLE leaves the file as allocated as it was; FAST_ZERO
# succeeds where zeroing is fast and fails with ENOTSUP where the target
# would write; TRIM succeeds everywhere (a no-op on ramfs); then a seeded
# integrity torture at depth 32 on each.  tmpfs and ramfs are mounted in a
# private mount namespace, so this needs root (CI runs as root).
if [ -z "${RB_MOUNT_NS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
	RB_MOUNT_NS=1 exec unshare --mount --propagation private bash "$0" "$@"
fi
. "$top_srcdir/tests/helpers.sh"
[ -n "${RB_MOUNT_NS:-}" ] || skip "needs root and unshare to mount tmpfs and ramfs"
ZERO=$top_builddir/tests/nbd-zero
[ -x "$ZERO" ] || skip "tests/nbd-zero not built (needs libnbd)"

mkdir "$T/tmpfs" "$T/ramfs"
mount -t tmpfs -o size=128m rdmablk-wz "$T/tmpfs"
mount -t ramfs rdmablk-wz "$T/ramfs"
trap 'rc=$?; umount -l "$T/tmpfs" "$T/ramfs" 2>/dev/null || true; (exit $rc); cleanup' EXIT

declare -A path=([e4d]="$T/e4d.img" [e4b]="$T/e4b.img" [shm]="$T/tmpfs/shm.img"
	[ram]="$T/ramfs/ram.img")
stores="e4d e4b shm ram"
# Fully written, so that any deallocation shows in st_blocks.
for x in $stores; do
	dd if=/dev/zero of="${path[$x]}" bs=1M count=40 status=none conv=fsync
done
port=$(free_port)
write_target_conf "$T/target.conf" "$port" e4d "${path[e4d]}" "direct = yes"
for x in e4b shm ram; do
	printf '\n[export %s]\npath = %s\ndirect = no\n' "$x" "${path[$x]}" >>"$T/target.conf"
done
start_target "$T/target.conf"

seed=${WZ_SEED:-28}
note "torture seed $seed (WZ_SEED=$seed to repeat)"
for x in $stores; do
	start_initiator "ini-$x" "$(target_url "$port")/$x"
	uri=$(nbd_uri "ini-$x" "$x")
	f=${path[$x]}

	blocks=$(stat -c %b "$f")
	for flags in nohole nohole,fua; do
		"$ZERO" "$uri" burst "$flags" || fail "$x: WRITE_ZEROES burst ($flags) failed"
	done
	after=$(stat -c %b "$f")
	[ "$after" -ge "$blocks" ] ||
		fail "$x: NO_HOLE zeroes deallocated: $blocks blocks before, $after after"
	for flags in none fua; do
		"$ZERO" "$uri" burst "$flags" || fail "$x: WRITE_ZEROES burst ($flags) failed"
	done
	if [ "$x" = shm ]; then
		# The check above can see a hole: zeroes that may deallocate do here.
		punched=$(stat -c %b "$f")
		[ "$punched" -lt "$after" ] ||
			fail "$x: zeroes without NO_HOLE did not punch ($after -> $punched blocks)"
	fi
	if [ "$x" = ram ]; then
		"$ZERO" "$uri" fast ENOTSUP || fail "$x: FAST_ZERO did not fail with ENOTSUP"
	else
		"$ZERO" "$uri" fast ok || fail "$x: FAST_ZERO failed where zeroing is fast"
	fi
	"$ZERO" "$uri" trim || fail "$x: TRIM failed"
	"$ZERO" "$uri" torture "$seed" 3000 || fail "$x: torture (seed $seed) failed"
	pid_alive "$T/ini-$x.pid" || fail "$x: initiator died"
	stop_pidfile "$T/ini-$x.pid"
done
pid_alive "$T/target.pid" || fail "target died"
grep -q "export shm: fallocate ZERO_RANGE not supported .*write-zeroes uses fallocate PUNCH_HOLE" \
	"$T/target.log" || fail "shm: no log line for the step down to PUNCH_HOLE"
grep -q "export ram: .*not supported .*uses writing zeroes from now on" "$T/target.log" ||
	fail "ram: no log line for the step down to writing zeroes"
n=$(grep -c "export ram: discard not supported" "$T/target.log" || true)
[ "$n" = 1 ] || fail "ram: 'discard not supported' logged $n times, expected once"
! grep -q "<3>" "$T/target.log" || fail "the target logged errors: $(grep "<3>" "$T/target.log")"
echo "ok"
