#!/bin/bash
# SIGHUP reloads the target's exports and drops no session: an added export
# can be attached; a removed one refuses new hosts while the attached host
# keeps its I/O; a changed export serves new sessions with the new settings
# and old ones with the old; a bad file or an export that cannot be opened
# changes nothing; [target] keys wait for a restart, except log-level.
. "$top_srcdir/tests/helpers.sh"

port=$(free_port)
url=$(target_url "$port")
truncate -s 16M "$T/a.img"
truncate -s 8M "$T/b.img"
truncate -s 4M "$T/c.img"
TARGET_THREADS=1 write_target_conf "$T/target.conf" "$port" a "$T/a.img"
start_target "$T/target.conf"
tpid=$(cat "$T/target.pid")
ops() { "$top_builddir/tests/nbd-ops" "$@"; }

# reload: SIGHUP, then wait for this reload's outcome in the log.
nreload=0
reload() {
	nreload=$((nreload + 1))
	kill -HUP "$tpid"
	wait_until 60 sh -c "[ \$(grep -cE 'reload: .*(export\(s\):|keeping the running)' \
		'$T/target.log') -ge $nreload ]" || fail "reload $nreload: no outcome logged"
}
# listed: the export names --list prints.  The list is its stdout alone; its
# stderr (logs) is kept apart, and any line there is a failure: a clean
# discovery session says nothing.
listed() {
	timeout 60 "$INITIATOR_BIN" --list "$url" >"$T/list.out" 2>"$T/list.err" ||
		fail "--list failed: $(list_shown)"
	[ ! -s "$T/list.err" ] || fail "--list logged: $(list_shown)"
	awk 'NR > 1 { print $1 }' "$T/list.out" | sort | tr '\n' ' '
}
list_shown() {
	echo "[stdout] $(cat "$T/list.out") [stderr] $(cat "$T/list.err")"
}
# attach_fails NAME: a new host cannot attach export NAME; the reason is in ini.out.
attach_fails() {
	local rc=0
	timeout 20 "$INITIATOR_BIN" "$url/$1" --nbd-socket "$T/x.sock" >"$T/ini.out" 2>&1 || rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "attach to $1: exit status $rc, expected a refusal"
}

start_initiator a1 "$url/a"
ops "$(nbd_uri a1 a)" write:0:4096:a1 || fail "a: first write"

# 1. An added export is listed and can be attached; nothing else moves.
cat >>"$T/target.conf" <<CONF

[export b]
path = $T/b.img
CONF
reload
grep -q "reload: export b added" "$T/target.log" || fail "no 'export b added' line"
grep -q "1 added, 0 changed, 0 removed" "$T/target.log" || fail "reload 1 summary"
[ "$(listed)" = "a b " ] || fail "after adding b, --list shows: $(list_shown)"
start_initiator b1 "$url/b"
ops "$(nbd_uri b1 b)" size:8388608 write:4096:4096:b1 read:4096:4096:b1 || fail "b: I/O"
ops "$(nbd_uri a1 a)" read:0:4096:a1 || fail "a: I/O after reload 1"

# 2. A syntax error: file:line in the log, the running exports stay.
cp "$T/target.conf" "$T/good.conf"
printf '\n[export c\npath = %s\n' "$T/c.img" >>"$T/target.conf"
bad_line=$(grep -n '^\[export c$' "$T/target.conf" | cut -d: -f1)
reload
grep -q "reload: $T/target.conf:$bad_line: .*keeping the running configuration" "$T/target.log" ||
	fail "syntax error: no 'FILE:LINE: ... keeping the running configuration' line"
[ "$(listed)" = "a b " ] || fail "after a bad file, --list shows: $(list_shown)"

# 3. An export that cannot be opened: named with its path; nothing changes.
cp "$T/good.conf" "$T/target.conf"
printf '\n[export c]\npath = %s/missing.img\n' "$T" >>"$T/target.conf"
reload
grep -q "export c: cannot open $T/missing.img" "$T/target.log" || fail "no error naming the missing path"
grep -q "reload: .*an export cannot be opened.*keeping the running configuration" "$T/target.log" ||
	fail "missing export: no 'keeping the running configuration' line"
[ "$(listed)" = "a b " ] || fail "after a missing export, --list shows: $(list_shown)"
ops "$(nbd_uri b1 b)" read:4096:4096:b1 || fail "b: I/O after two failed reloads"

# 4. Remove a, make b read-only, add c, and change two [target] keys.
cat >"$T/target.conf" <<CONF
[target]
listen = $url
threads = 2
log-level = debug

[export b]
path = $T/b.img
read-only = yes

[export c]
path = $T/c.img
CONF
reload
grep -q "1 added, 1 changed, 1 removed" "$T/target.log" || fail "reload 4 summary"
grep -q "reload: export a removed; 1 session(s) keep it" "$T/target.log" ||
	fail "no 'export a removed; 1 session(s)' line"
grep -q "reload: export b: 1 session(s) keep the previous settings" "$T/target.log" ||
	fail "no line saying b's session keeps the previous settings"
grep -q "\[target\] threads changed; it takes effect when the target restarts" "$T/target.log" ||
	fail "no warning about [target] threads"
grep -q "log-level is now debug" "$T/target.log" || fail "log-level not applied"
[ "$(listed)" = "b c " ] || fail "after reload 4, --list shows: $(list_shown)"
# The attached hosts go on as before: a's host still writes, b's still may.
ops "$(nbd_uri a1 a)" write:8192:4096:a2 read:0:4096:a1 read:8192:4096:a2 ||
	fail "a: the attached host lost its export"
ops "$(nbd_uri b1 b)" write:0:4096:b2 read:0:4096:b2 || fail "b: the attached host lost write access"
attach_fails a
grep -qi "unknown export" "$T/ini.out" || fail "new attach to a: $(cat "$T/ini.out")"
start_initiator b2 "$url/b"
ops "$(nbd_uri b2 b)" flag:is_read_only:1 read:0:4096:b2 fail:EPERM:write:0:4096:ff ||
	fail "b: a new session is not read-only"
start_initiator c1 "$url/c"
ops "$(nbd_uri c1 c)" size:4194304 write:0:4096:c1 read:0:4096:c1 || fail "c: I/O"

# 5. The removed export closes when its last session ends.
grep -q "export a stats:" "$T/target.log" && fail "export a closed while a host used it"
stop_pidfile "$T/a1.pid"
wait_until 60 grep -q "export a stats:" "$T/target.log" ||
	fail "export a not closed after its last session ended"
head -c 4096 /dev/zero | tr '\0' '\241' >"$T/a1.bytes" # no /dev/fd in the test VM
cmp -n 4096 "$T/a.img" "$T/a1.bytes" || fail "a.img does not hold a's first write"

# 6. Another file at the same path (new inode and size) replaces the export.
rm "$T/c.img"
truncate -s 2M "$T/c.img"
reload
grep -q "reload: export c changed" "$T/target.log" || fail "a replaced file at c's path went unnoticed"
start_initiator c2 "$url/c"
ops "$(nbd_uri c2 c)" size:2097152 || fail "c: a new session does not see the new file"
ops "$(nbd_uri c1 c)" size:4194304 read:0:4096:c1 || fail "c: the old session lost its file"

# 7. A reload with nothing changed keeps everything, then a clean stop.
reload
grep -q "reload: .*: 2 export(s): 0 added, 0 changed, 0 removed" "$T/target.log" ||
	fail "an unchanged reload changed something"
# 8. Reloads in quick succession, d coming and going, while b's and c's hosts
#    keep writing and reading: no I/O error, and the last file is served.
cp "$T/target.conf" "$T/base.conf"
truncate -s 1M "$T/d.img"
printf '\n[export d]\npath = %s\n' "$T/d.img" >"$T/d.part"
(
	for i in $(seq 1 ${STRESS_ROUNDS:-40}); do
		# odd rounds add d, even rounds (the last one too) take it away
		if [ $((i % 2)) = 1 ]; then cat "$T/base.conf" "$T/d.part"; else cat "$T/base.conf"; fi >"$T/new.conf"
		mv "$T/new.conf" "$T/target.conf"
		kill -HUP "$tpid"
		sleep 0.02
	done
) &
hup=$!
# I/O goes on while the reloads run, and for at least min_rounds whatever the
# machine's speed; the pattern is a byte derived from the round (it wraps).
io_rounds=0 min_rounds=${IO_ROUNDS:-10}
while kill -0 "$hup" 2>/dev/null || [ "$io_rounds" -lt "$min_rounds" ]; do
	pat=$(printf '%02x' $((io_rounds % 240 + 16)))
	ops "$(nbd_uri b1 b)" write:0:4096:$pat read:0:4096:$pat ||
		fail "b: I/O failed during reloads (round $io_rounds)"
	ops "$(nbd_uri c2 c)" read:0:4096:00 || fail "c: I/O failed during reloads"
	io_rounds=$((io_rounds + 1))
done
wait "$hup"
# Signals that arrive together count once; the file the last one finds is
# what must be served.
lists() { [ "$(listed)" = "$1" ]; }
wait_until 60 lists "b c " || fail "after the reloads, --list shows: $(list_shown)"
note "$io_rounds I/O rounds during ${STRESS_ROUNDS:-40} reloads"
pid_alive "$T/target.pid" || fail "target died during reloads"

for i in b1 b2 c1 c2; do stop_pidfile "$T/$i.pid"; done
stop_and_status "$T/target.pid"
[ "$stop_rc" -eq 0 ] || fail "target exit status $stop_rc"
echo "ok"
