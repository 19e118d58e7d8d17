#!/bin/bash
# NBD clients that flood options and never read the replies: our replies
# pile up (we stop reading them) and their options wait unread, but the
# handshake limit (10 s) closes them all the same, the memory they hold
# stays bounded, and the server keeps serving others.  The attack is
# tests/attack-nbd.py (also for the bench).
. "$top_srcdir/tests/helpers.sh"
requires python3

start_disk_target
start_initiator ini "$(target_url "$port")/disk0" --nbd-max-clients 4
pid=$(cat "$T/ini.pid")
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"; }
rss0=$(rss)

# Closed at the limit: "not never" has a generous bound, so a loaded
# machine does not fail it.
python3 "$top_srcdir/tests/attack-nbd.py" options --unix "$T/ini.sock" --clients 3 \
	--seconds 60 >"$T/attack.out" 2>&1 || fail "attack script failed: $(cat "$T/attack.out")"
cat "$T/attack.out"
sum=$(tail -n 1 "$T/attack.out")
case $sum in
*" closed=3 open=0 "*) ;;
*) fail "option flooders not all closed within 60 s: $sum" ;;
esac
sent=$(echo "$sum" | sed -n 's/.* sent=\([0-9]*\) .*/\1/p')
[ "${sent:-0}" -ge 3000 ] || fail "the flood sent only ${sent:-0} options"
for t in $(echo "$sum" | sed -n 's/.*closed_after=//p' | tr , ' '); do
	awk -v t="$t" 'BEGIN { exit !(t >= 9.9) }' || fail "a flooder was closed after $t s, before the limit"
done
n=$(grep -c "handshake not finished after 10000 ms; closing it" "$T/ini.log")
[ "$n" -eq 3 ] || fail "expected 3 handshake-limit warnings, got $n"
rss1=$(rss)
note "initiator RSS ${rss0} KiB before, ${rss1} KiB after the flood"
[ $((rss1 - rss0)) -lt 65536 ] || fail "RSS grew by $((rss1 - rss0)) KiB"

# Still serving: the places are free again.
PYTHONPATH="$top_srcdir/tests" python3 - "$T/ini.sock" <<'PY' || fail "client after the flood failed"
import sys
from nbdraw import *
for i in range(4):
    s = attach(sys.argv[1])
    request(s, CMD_READ, 7, 0, 4096)
    err, h = reply(s)
    assert (err, h) == (0, 7), f"READ: error {err}"
    recvall(s, 4096)
PY
echo "ok"
