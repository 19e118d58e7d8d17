#!/bin/sh
# SPDX-License-Identifier: MIT
#
# System calls per I/O of rdmablk's target and initiator, ublk and nbd over rdma, in the test
# VM (tests/vm/run.sh; the guest half is bench/vm-syscalls-body.sh). Counts, unlike IOPS under
# TCG, do not move with the host's load: they show whether a change batches better or worse.
#
#   bench/vm-syscalls.sh [BUILD_DIR]   (default: . if it is a build tree, else SRC/build)
#   SYSC_RUNTIME=6                     seconds per fio job
# Results in BUILD_DIR/bench/vm-syscalls-results/ (vm-syscalls.tsv, the guest logs). ~2 minutes.
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/bench/vm-lib.sh"
bench_vm_build vm-syscalls "$@"
res=$build/bench/vm-syscalls-results
mkdir -p "$res"
rm -f "$res"/*.rc "$res"/*.log "$res/vm-syscalls.tsv"
echo "SYSC_RUNTIME=${SYSC_RUNTIME:-6}" >"$res/vm-syscalls.env"
rc=0
sh "$src/tests/vm/run.sh" --results "$res" --builddir "$build" \
	"$src/bench/vm-syscalls-ublk-rdma.sh" "$src/bench/vm-syscalls-nbd-rdma.sh" || rc=$?
# run.sh passes skips (a guest without perf, say): each script must have run to the end.
failed=
for n in vm-syscalls-ublk-rdma vm-syscalls-nbd-rdma; do
	[ "$(cat "$res/$n.rc" 2>/dev/null)" = 0 ] || failed="$failed $n"
done
if [ $rc != 0 ] || [ -n "$failed" ]; then
	echo "vm-syscalls: the guest run failed (run.sh exit $rc${failed:+; did not pass:$failed});" \
		"logs in $res" >&2
	exit 1
fi
rev=$(git -C "$src" describe --always --dirty 2>/dev/null || echo "?")
python3 - "$res/vm-syscalls.tsv" "$rev" <<'PY' | tee "$res/vm-syscalls.table"
import sys
tsv, rev = sys.argv[1:3]
rows = []
for line in open(tsv):
    f = line.rstrip("\n").split("\t")
    cfg, job, who, ios = f[0], f[1], f[2], int(f[3])
    counts = dict(kv.split("=", 1) for kv in f[4:])
    rows.append((cfg, job, who, ios, counts))
calls = []
for r in rows:
    for k in r[4]:
        if k != "total" and k not in calls:
            calls.append(k)
# Only the calls some daemon made at least once per 100 I/Os.
def per(c, n):
    try:
        return float(c) / n
    except ValueError:
        return float("nan")
calls = [c for c in calls if any(per(r[4].get(c, "0"), r[3]) >= 0.01 for r in rows)]
print("rdmablk daemons' system calls per I/O in the VM, commit %s" % rev)
hdr = ["frontend", "job", "daemon", "I/Os", "total"] + calls
ws = [10, 17, 9, 7] + [max(6, len(h)) for h in hdr[4:]]
print(" | ".join("%-*s" % (w, h) for w, h in zip(ws, hdr)))
for cfg, job, who, ios, counts in rows:
    cells = [cfg, job, who, str(ios)] + ["%.2f" % per(counts.get(c, "0"), ios)
                                         for c in ["total"] + calls]
    print(" | ".join("%-*s" % (w, c) for w, c in zip(ws, cells)))
PY
