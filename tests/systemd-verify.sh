#!/bin/bash
# SPDX-License-Identifier: MIT
# The generated systemd units pass `systemd-analyze verify` without a single
# warning.  Their ExecStart names the install path (@sbindir@), which does
# not exist under make check, so verify runs on copies rewritten to the
# built binaries; everything else is checked exactly as it will be installed.
. "$top_srcdir/tests/helpers.sh"

requires systemd-analyze sed grep

target_bin=$top_builddir/target/rdmablk-target
initiator_bin=$top_builddir/initiator/rdmablk-initiator
for b in "$target_bin" "$initiator_bin"; do
	[ -x "$b" ] || fail "$b is not built"
done

# unit, expected ExecStart arguments after the binary
check_unit() {
	local u=$1 bin=$2 args=$3 src=$top_builddir/systemd/$1
	[ -f "$src" ] || fail "$src was not generated (make builds it from $u.in)"
	if grep -n '@[a-z_]*@' "$src"; then
		fail "$u: unexpanded @variable@ left by the template"
	fi
	grep -qx "ExecStart=[^ ]*/$(basename "$bin") $args" "$src" ||
		fail "$u: ExecStart is not '.../$(basename "$bin") $args'"
	for line in Type=notify LimitMEMLOCK=infinity Restart=on-failure KillSignal=SIGTERM; do
		grep -qx "$line" "$src" || fail "$u: missing $line"
	done
	sed -e "s|^ExecStart=[^ ]*/$(basename "$bin") |ExecStart=$bin |" "$src" >"$T/$u"
	grep -q "^ExecStart=$bin " "$T/$u" || fail "$u: could not point ExecStart at $bin"
}

sysconfdir=$(sed -n 's|^ExecStart=[^ ]* --config \(.*\)/rdmablk/target.conf$|\1|p' \
	"$top_builddir/systemd/rdmablk-target.service" 2>/dev/null)
[ -n "$sysconfdir" ] || fail "rdmablk-target.service: cannot find --config FILE"
check_unit rdmablk-target.service "$target_bin" \
	"--config $sysconfdir/rdmablk/target.conf"
# systemctl reload: the target re-reads its exports on SIGHUP (e2e-reload).
grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$top_builddir/systemd/rdmablk-target.service" ||
	fail "rdmablk-target.service: no ExecReload sending SIGHUP"
check_unit rdmablk-initiator@.service "$initiator_bin" \
	"--config $sysconfdir/rdmablk/initiator.conf --attach %i"

# verify reports unknown keys, bad values and missing binaries as log lines
# but still exits 0: any output at all is a failure.
out=$(cd "$T" && systemd-analyze verify --man=no \
	"$T/rdmablk-target.service" "$T/rdmablk-initiator@.service" 2>&1) ||
	fail "systemd-analyze verify failed: $out"
[ -z "$out" ] || fail "systemd-analyze verify warnings: $out"
note "both units verified"
