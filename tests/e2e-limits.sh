#!/bin/bash
# The target's limits (issue 31): each one refuses with its reason, which
# the peer sees (reject reason, CONNECT status) and the initiator prints as
# words; refusals are logged rate-limited.  Attacks: tests/attack-limits.py.
# - connections per address, then in total (reject reasons 8 and 9)
# - sessions per host id, per address, then in total (SESSION_LIMIT,
#   HOST_SESSION_LIMIT, ADDR_SESSION_LIMIT); claims of a host id that must
#   authenticate do not use up that host's sessions
# - I/O queues per session: more than max-io-queues get "bad queue id"
# - keep-alive 0 gets min-keepalive and the silent host is dropped; with
#   min-keepalive = 0 the target grants 0
# - discovery sessions end after discovery-timeout, KEEPALIVE or not, and
#   at the latest 10 x discovery-timeout however busy; --list still works
. "$top_srcdir/tests/helpers.sh"
requires python3

[ "$E2E_TRANSPORT" = tcp ] || skip "raw tcp framing: tcp transport only"
port=$(free_port)
truncate -s 16M "$T/disk.img"
TARGET_EXTRA="max-connections = 16
max-connections-per-address = 6
max-sessions = 8
max-sessions-per-host = 3
max-sessions-per-address = 4
max-io-queues = 2
min-keepalive = 2000
discovery-timeout = 1000" write_target_conf "$T/target.conf" "$port" disk0 "$T/disk.img"
start_target "$T/target.conf"

attack() {
	timeout 120 python3 "$top_srcdir/tests/attack-limits.py" 127.0.0.1 "$port" "$@"
}
# expect FIELDS ATTACK-ARGS...: the attack's summary line has every field of
# FIELDS ("a=1 b=2").  Each step connects from loopback addresses of its own;
# what an earlier step held still counts against the totals until the
# target notices it closed, so a step runs again (up to 60 s) until it sees
# the outcome asked for.
expect() {
	local want=$1 out line ok end=$(($(date +%s) + 60))
	shift
	while :; do
		out=$(attack "$@")
		line=$(grep '^attack-limits' <<<"$out") || fail "no summary: $out"
		ok=1
		for kv in $want; do
			grep -qw -- "$kv" <<<"$line" || ok=
		done
		[ -z "$ok" ] || break
		[ "$(date +%s)" -lt "$end" ] || fail "want $want: $line"
		sleep 0.5
	done
	note "$line"
}

# Sessions of one host id, then of many: 3 per host, 8 in all.
expect "opened=3 refused=2 reasons=HOST_SESSION_LIMIT:2 granted_kato=2000" \
	--mode sessions --hostid victim --count 5 --seconds 0 --source 127.0.0.2
# The initiator says why, in words, while the host has its 3 sessions.
attack --mode sessions --hostid victim --count 3 --seconds 60 --source 127.0.0.3 \
	>"$T/hold.out" &
hold_pid=$!
wait_until 60 sh -c "[ \$(grep -c 'host victim: export disk0' '$T/target.log') -ge 6 ]" ||
	fail "the holding sessions did not connect"
if timeout 60 "$INITIATOR_BIN" "$(target_url "$port")/disk0" --host-id victim \
	--nbd-socket "$T/v.sock" >"$T/victim.log" 2>&1; then
	fail "a fourth session of host victim was accepted"
fi
grep -q "max-sessions-per-host" "$T/victim.log" ||
	fail "the initiator did not say why: $(cat "$T/victim.log")"
kill "$hold_pid" 2>/dev/null || true
wait "$hold_pid" 2>/dev/null || true
expect "opened=8 refused=2 reasons=SESSION_LIMIT:2" \
	--mode sessions --hostid many --distinct-hosts --count 10 --seconds 0 \
	--source 127.0.0.4,127.0.0.5

# Sessions from one address: 4 (its 6 connections would allow more).
expect "opened=4 refused=2 reasons=ADDR_SESSION_LIMIT:2" \
	--mode sessions --hostid addr --distinct-hosts --count 6 --seconds 0 --source 127.0.0.14

# I/O queues: 4 asked, 2 granted, queues 3..5 refused.
expect "granted_queues=2 opened=3 refused=3 reasons=bad-qid:3" \
	--mode queues --nq 4 --depth 16 --seconds 0 --source 127.0.0.6

# Keep-alive 0: granted min-keepalive (2000 ms), then the silent host is dropped.
expect "opened=1 granted_kato=2000 closed_by_target=1 open_at_end=0" \
	--mode keepalive --kato 0 --count 1 --seconds 60 --source 127.0.0.7

# Discovery sessions: a flood of silent ones, ones sending KEEPALIVE, and
# ones sending LIST_EXPORTS every 0.3 s (10 x 1000 ms at most) all end.
expect "opened=5 closed_by_target=5 open_at_end=0" \
	--mode discovery --distinct-hosts --count 5 --seconds 60 --source 127.0.0.8,127.0.0.16
expect "opened=2 closed_by_target=2 open_at_end=0" \
	--mode discovery --distinct-hosts --count 2 --seconds 60 --keepalive-every 0.3 \
	--source 127.0.0.9
expect "opened=2 closed_by_target=2 open_at_end=0" \
	--mode discovery --distinct-hosts --count 2 --seconds 90 --keepalive-every 0.3 --op list \
	--source 127.0.0.10
grep -q "discovery session lifetime" "$T/target.log" ||
	fail "the busy discovery sessions did not end by their lifetime"
"$INITIATOR_BIN" --list "$(target_url "$port")" >"$T/list.out" 2>"$T/list.err" ||
	fail "--list failed: $(cat "$T/list.err")"
grep -q disk0 "$T/list.out" || fail "--list did not list disk0: $(cat "$T/list.out")"

# Connections: 6 from each address, 16 in all; 66 tried from each of three
# addresses, and the refusals' log lines rate-limited.
expect "opened=16 refused=182 reasons=addr-conn-limit:120,conn-limit:62" \
	--mode conns --source 127.0.0.11,127.0.0.12,127.0.0.13 --count 66 --seconds 0
for a in 127.0.0.11 127.0.0.12 127.0.0.13; do
	n=$(grep -c "peer $a:[0-9]*: connection refused" "$T/target.log" || true)
	[ "$n" -le 10 ] || fail "$n log lines for the refusals of $a (rate limit: 5 a window)"
done
# ... and summed up once the window is over, the flood or not.
wait_until 60 grep -q "per-address connection limit: [0-9]* similar messages suppressed" \
	"$T/target.log" || fail "no summary of the suppressed refusals"

# A host that must authenticate: 4 sessions claiming its id (they never
# authenticate) take none of its 2; the real host attaches twice, and a
# third authenticated session of it is refused, in words.
KEYGEN="$top_builddir/tools/rdmablk-keygen"
(umask 077 && "$KEYGEN" >"$T/victim.key") || fail "keygen"
port3=$(free_port)
cat >"$T/t3.conf" <<CONF
[target]
listen = $(target_url "$port3")
max-sessions-per-host = 2
[export disk0]
path = $T/disk.img
auth = required
[host victim]
secret-file = $T/victim.key
CONF
start_target "$T/t3.conf" t3
port=$port3 attack --mode sessions --hostid victim --count 4 --seconds 60 \
	--source 127.0.0.15 >"$T/claims.out" &
claims_pid=$!
wait_until 60 sh -c "[ \$(grep -c 'host victim: export disk0: authentication required' \
	'$T/t3.log') -ge 4 ]" || fail "the claiming sessions did not connect: $(cat "$T/t3.log")"
url3="$(target_url "$port3")/disk0"
start_initiator v1 "$url3" --host-id victim --secret "$T/victim.key"
start_initiator v2 "$url3" --host-id victim --secret "$T/victim.key"
# The claims were there all along: none ended before the host's sessions.
grep -q "authentication failed" "$T/t3.log" &&
	fail "a claim ended before the real host attached; the test proves nothing"
if timeout 60 "$INITIATOR_BIN" "$url3" --host-id victim --secret "$T/victim.key" \
	--nbd-socket "$T/v3.sock" >"$T/v3.log" 2>&1; then
	fail "a third authenticated session of host victim was accepted"
fi
grep -q "max-sessions-per-host" "$T/v3.log" ||
	fail "the initiator did not say why: $(cat "$T/v3.log")"
# The target ends the claims at their authentication deadline.
wait "$claims_pid" || true
grep -q "opened=4 .*closed_by_target=4" "$T/claims.out" || fail "claims: $(cat "$T/claims.out")"

# min-keepalive = 0 lets a host have no keep-alive.
port2=$(free_port)
TARGET_EXTRA="min-keepalive = 0" write_target_conf "$T/t2.conf" "$port2" disk0 "$T/disk.img"
start_target "$T/t2.conf" t2
port=$port2 expect "opened=1 granted_kato=0" --mode keepalive --kato 0 --count 1 --seconds 0
echo ok
