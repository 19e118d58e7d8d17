#!/bin/bash
# Authentication (issue 30) over the test transport: the right secret
# attaches and does I/O; a wrong or missing secret is refused, and a target
# that does not know the target secret is refused by the initiator, each
# with a clear message; an unauthenticated LIST shows nothing protected; a
# key file others may read stops the target at start, naming the file; a
# reload rotates secrets (the running session goes on, a new attach needs
# the new key); a reconnect after a target restart authenticates again; a
# forged host id is logged escaped, on one line.
. "$top_srcdir/tests/helpers.sh"

KEYGEN="$top_builddir/tools/rdmablk-keygen"
newkey() { (umask 077 && "$KEYGEN" >"$1") || fail "keygen $1"; }

port=$(free_port)
truncate -s 16M "$T/a.img" "$T/b.img"
newkey "$T/host.key"
newkey "$T/other.key"
newkey "$T/target.key"
newkey "$T/wrongtgt.key"
cat >"$T/target.conf" <<CONF
[target]
listen = $(target_url "$port")
threads = 2
target-secret-file = $T/target.key

[export prot0]
path = $T/a.img
auth = required

[export open0]
path = $T/b.img

[host good]
hostid = host-good
secret-file = $T/host.key
CONF
start_target "$T/target.conf"
url=$(target_url "$port")

run_ini() {
	timeout 30 "$INITIATOR_BIN" "$@" --nbd-socket "$T/x.sock" >"$T/ini.out" 2>&1
}
refused() { # WHAT PATTERN ARGS...: the attach fails, saying PATTERN
	local what=$1 pat=$2 rc=0
	shift 2
	run_ini "$@" || rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$T/ini.out"; fail "$what: exit status $rc"; }
	grep -qiE "$pat" "$T/ini.out" || { cat "$T/ini.out"; fail "$what: no '$pat' message"; }
}

# Right secret, both ways: I/O works.
start_initiator good "$url/prot0" --host-id host-good --secret "$T/host.key" \
	--target-secret "$T/target.key"
grep -q "authenticated both ways" "$T/good.log" || fail "initiator did not verify the target"
"$top_builddir/tests/nbd-ops" "$(nbd_uri good prot0)" write:0:4096:42 read:0:4096:42 ||
	fail "authenticated host cannot do I/O"

# Wrong secret, no secret, unknown host: refused on both sides.
refused "wrong secret" "authentication failed" "$url/prot0" --host-id host-good \
	--secret "$T/other.key"
wait_until 60 grep -q "host host-good: admin queue authentication failed" "$T/target.log" ||
	fail "target did not log the failed authentication"
refused "no secret" "requires authentication.*no secret" "$url/prot0" --host-id host-good
refused "unknown host" "authentication failed" "$url/prot0" --host-id host-bad \
	--secret "$T/other.key"
wait_until 60 grep -q "host host-bad: admin queue authentication failed" "$T/target.log" ||
	fail "target did not log the unknown host's failure"
# Wrong target secret: the initiator refuses the target.
refused "wrong target secret" "target failed authentication" "$url/prot0" \
	--host-id host-good --secret "$T/host.key" --target-secret "$T/wrongtgt.key"
if grep -qE "DHHC-1|$(cut -d: -f3 "$T/host.key")" "$T/target.log" "$T/ini.out"; then
	fail "a secret reached a log"
fi

# Unauthenticated discovery lists the open export only; authenticated, both.
timeout 30 "$INITIATOR_BIN" --list "$url" --host-id host-bad >"$T/list.out" 2>&1 ||
	{ cat "$T/list.out"; fail "--list failed"; }
grep -q open0 "$T/list.out" || { cat "$T/list.out"; fail "open export not listed"; }
! grep -q prot0 "$T/list.out" || fail "protected export listed without authentication"
timeout 30 "$INITIATOR_BIN" --list "$url" --host-id host-good --secret "$T/host.key" \
	>"$T/list.out" 2>&1 || { cat "$T/list.out"; fail "authenticated --list failed"; }
grep -q prot0 "$T/list.out" || { cat "$T/list.out"; fail "authenticated host does not see prot0"; }

# Rotation: a new key file for host-good, reload.  The session goes on;
# the old key no longer attaches, the new one does.
newkey "$T/host2.key"
sed -i "s|secret-file = $T/host.key|secret-file = $T/host2.key|" "$T/target.conf"
kill -HUP "$(cat "$T/target.pid")"
wait_until 60 grep -q "reload: .*1 host secret" "$T/target.log" || fail "reload not logged"
"$top_builddir/tests/nbd-ops" "$(nbd_uri good prot0)" write:4096:4096:7 read:4096:4096:7 ||
	fail "the authenticated session stopped working after the rotation"
refused "old key after rotation" "authentication failed" "$url/prot0" --host-id host-good \
	--secret "$T/host.key"
start_initiator good2 "$url/prot0" --host-id host-good --secret "$T/host2.key"
"$top_builddir/tests/nbd-ops" "$(nbd_uri good2 prot0)" read:4096:4096:7 ||
	fail "new key does not attach"

# Reconnect (--ctrl-loss-tmo) authenticates again: the target is killed and
# started anew; the new session is authenticated, I/O resumes, data intact.
start_initiator rc "$url/prot0" --host-id host-good --secret "$T/host2.key" \
	--target-secret "$T/target.key" --queues 2 --ctrl-loss-tmo 60000 --reconnect-delay 300
"$top_builddir/tests/nbd-ops" "$(nbd_uri rc prot0)" write:8192:4096:5c ||
	fail "reconnecting host: first write"
kill -KILL "$(cat "$T/target.pid")"
wait "$(cat "$T/target.pid.launch")" 2>/dev/null || true
rm -f "$T/target.pid"
start_target "$T/target.conf"
wait_until 60 grep -q "re-established" "$T/rc.log" || fail "no reconnect after the target restart"
[ "$(grep -c "authenticated both ways" "$T/rc.log")" -ge 2 ] ||
	fail "the reconnect did not authenticate again: $(cat "$T/rc.log")"
"$top_builddir/tests/nbd-ops" "$(nbd_uri rc prot0)" read:8192:4096:5c write:12288:4096:6d \
	read:12288:4096:6d || fail "I/O after the authenticated reconnect"

# A forged host id is one escaped log line.
run_ini "$url/prot0" --host-id $'x\n<0>rdmablk-target: fatal: FORGED' --secret "$T/other.key" || true
wait_until 60 grep -qF 'host x\x0a<0>rdmablk-target: fatal: FORGED' "$T/target.log" ||
	{ cat "$T/target.log"; fail "forged host id not logged escaped"; }
! grep -q "^<0>rdmablk-target: fatal: FORGED" "$T/target.log" || fail "forged log line"

# A key file others may read: the target refuses to start, naming it.
chmod 644 "$T/host2.key"
rc=0
timeout 20 "$TARGET_BIN" --config "$T/target.conf" --pidfile "$T/bad.pid" >"$T/bad.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "target started with a readable key file"
grep -qF "$T/host2.key" "$T/bad.log" || { cat "$T/bad.log"; fail "message does not name the key file"; }
echo "ok"
