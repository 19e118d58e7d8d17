#!/bin/bash
# The man pages document every long option that --help lists and every key
# of the annotated configuration files, and groff formats them without a
# warning.  A new flag or key without documentation fails here.
. "$top_srcdir/tests/helpers.sh"
requires groff

# check_page BIN PAGE CONF
check_page() {
	local bin=$1 page=$2 conf=$3 missing="" warn o k opts keys
	warn=$(groff -man -ww -z -Tutf8 "$page" 2>&1) || fail "$page: groff failed: $warn"
	[ -z "$warn" ] || fail "$page: groff warnings: $warn"
	opts=$("$bin" --help | grep -o -E -- '--[a-z][a-z0-9-]*' | sort -u)
	keys=$(sed -n -E 's/^#? ?([a-z][a-z0-9-]*) = .*/\1/p' "$conf" | sort -u)
	# roff writes a hyphen as \-
	for o in $opts; do
		grep -qF -- "${o//-/\\-}" "$page" || missing="$missing $o"
	done
	for k in $keys; do
		grep -E '^\.BR? ' "$page" | grep -qwF -- "${k//-/\\-}" || missing="$missing $k"
	done
	[ -z "$missing" ] || fail "$page does not document:$missing"
	note "$page: $(wc -w <<<"$opts") options, $(wc -w <<<"$keys") keys"
}

check_page "$TARGET_BIN" "$top_srcdir/man/rdmablk-target.8" "$top_srcdir/conf/target.conf"
check_page "$INITIATOR_BIN" "$top_srcdir/man/rdmablk-initiator.8" "$top_srcdir/conf/initiator.conf"
echo "ok"
