#!/bin/bash
# Buffered exports (direct = no): with inline-writes = yes whole-page writes
# are done by the reactor, partial pages and FUA writes by io_uring; without
# it (the default) every write goes through io_uring.  Both paths keep the
# data (fio crc32c verify over mixed block sizes and alignments, exact bytes
# at page edges, the file equal to the NBD view), and the target's stats show
# which path each export took.
. "$top_srcdir/tests/helpers.sh"
requires fio nbdcopy

port=$(free_port)
truncate -s 32M "$T/inl.img" "$T/async.img"
write_target_conf "$T/target.conf" "$port" inl "$T/inl.img" "direct = no" "inline-writes = yes"
cat >>"$T/target.conf" <<EOF

[export async]
path = $T/async.img
direct = no
EOF
start_target "$T/target.conf"
grep -q "export inl: .*, inline writes" "$T/target.log" || fail "export inl: no 'inline writes' in its open line"
grep "export async: " "$T/target.log" | grep -q "inline writes" &&
	fail "export async (inline-writes not set: no) says inline writes"

for x in inl async; do
	start_initiator "ini-$x" "$(target_url "$port")/$x" --queues 2 --queue-depth 16
	uri=$(nbd_uri "ini-$x" "$x")
	# Whole pages, a partial page next to them, a FUA write: each reads back exactly.
	"$top_builddir/tests/nbd-ops" "$uri" write:0:65536:a1 write:4608:512:b2 \
		writefua:8192:4096:c3 write:12288:8192:d4 read:0:4608:a1 read:4608:512:b2 \
		read:5120:3072:a1 read:8192:4096:c3 read:12288:8192:d4 read:20480:45056:a1 ||
		fail "$x: page-edge writes did not read back"
	# Both paths at once, on one connection each: whole pages (4-64 KiB, page
	# aligned) in the first 8 MiB, 512 B-8 KiB at 512-byte alignment in the next.
	fio --name="$x-pages" --ioengine=nbd --uri="$uri" --rw=randwrite --bsrange=4k-64k \
		--blockalign=4k --iodepth=16 --offset=1M --size=8M --verify=crc32c \
		--verify_fatal=1 --output="$T/fio-$x-pages.log" &
	fpid=$!
	fio --name="$x-sectors" --ioengine=nbd --uri="$uri" --rw=randwrite --bsrange=512-8k \
		--blockalign=512 --iodepth=16 --offset=9M --size=8M --verify=crc32c \
		--verify_fatal=1 --output="$T/fio-$x-sectors.log" ||
		{ cat "$T/fio-$x-sectors.log"; fail "$x: fio verify of unaligned writes failed"; }
	wait "$fpid" || { cat "$T/fio-$x-pages.log"; fail "$x: fio verify of page writes failed"; }
	nbdcopy "$uri" "$T/$x.back" || fail "$x: nbdcopy out failed"
	cmp "$T/$x.img" "$T/$x.back" || fail "$x: exported file differs from the NBD view"
done

kill -USR1 "$(cat "$T/target.pid")"
wait_until 60 grep -q "export async stats:" "$T/target.log" || fail "no stats lines"
stat_of() { # stat_of EXPORT KEY
	grep "export $1 stats:" "$T/target.log" | tail -1 | sed -n "s/.* $2=\([0-9]*\).*/\1/p"
}
for x in inl async; do
	note "$x: writes=$(stat_of "$x" writes) fua_writes=$(stat_of "$x" fua_writes) inline_writes=$(stat_of "$x" inline_writes)"
done
[ "$(stat_of inl inline_writes)" -gt 100 ] || fail "inl: whole-page writes were not done inline"
# fio's unaligned job alone writes more than 100 partial pages.
[ "$(stat_of inl writes)" -gt "$(($(stat_of inl inline_writes) + 100))" ] ||
	fail "inl: too few writes went through io_uring (partial pages and FUA must)"
[ "$(stat_of async inline_writes)" = 0 ] || fail "async: inline-writes not set (no), yet writes were inline"
[ "$(stat_of async writes)" -gt 100 ] || fail "async: writes missing from the stats"
echo "ok"
