#!/bin/bash
# Unknown export and unauthorized host are refused with a clear message and
# the initiator exits non-zero; an allowed host gets in.
. "$top_srcdir/tests/helpers.sh"

port=$(free_port)
truncate -s 16M "$T/a.img" "$T/b.img"
write_target_conf "$T/target.conf" "$port" open0 "$T/a.img"
cat >>"$T/target.conf" <<CONF

[export locked0]
path = $T/b.img
allowed-hosts = host-good, host-other
CONF
start_target "$T/target.conf"

run_ini() {
	timeout 20 "$INITIATOR_BIN" "$@" --nbd-socket "$T/x.sock" >"$T/ini.out" 2>&1
}

rc=0
run_ini "$(target_url "$port")/nosuch" || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "unknown export: initiator exit status $rc"
grep -qi "unknown export" "$T/ini.out" || { cat "$T/ini.out"; fail "no 'unknown export' message"; }
grep -q "nosuch" "$T/ini.out" || fail "message does not name the export"

rc=0
run_ini "$(target_url "$port")/locked0" --host-id host-bad || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "unauthorized host: initiator exit status $rc"
grep -qiE "not allowed|access denied" "$T/ini.out" || { cat "$T/ini.out"; fail "no access-denied message"; }
grep -q "host-bad" "$T/ini.out" || fail "message does not name the host id"
grep -q "host-bad" "$T/target.log" || fail "target did not log the refused host"

start_initiator good "$(target_url "$port")/locked0" --host-id host-good
"$top_builddir/tests/nbd-ops" "$(nbd_uri good locked0)" write:0:4096:42 read:0:4096:42 ||
	fail "allowed host cannot do I/O"
echo "ok"
