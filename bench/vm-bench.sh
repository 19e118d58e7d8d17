#!/bin/sh
# SPDX-License-Identifier: MIT
#
# In-VM benchmark: the kernel's NVMe-oF over rdma against rdmablk's block device frontends,
# all in one boot of the test VM (tests/vm/run.sh), on the same Soft-RoCE link and the same
# 1 GiB backing file; the guest half is bench/vm-bench-guest.sh. Prints the table here.
#
#   bench/vm-bench.sh [BUILD_DIR]      (default: . if it is a build tree, else SRC/build)
#   RUNTIME=6 RAMP=2                   seconds per fio job and of ramp before it
#   ROUNDS=3                           times each job runs on each device (the table shows
#                                      medians, the ratios are medians of same-round ratios)
#   QUEUES=2 DEPTH=128                 I/O queues and depth, for nvme connect and rdmablk
#   POLL_US=0                          poll-us of the "poll-us" columns' daemons (the others
#                                      run with the default; off: no such columns)
#   BASE=BUILD_DIR                     the second pair of columns runs that build's daemons
#                                      (poll-us only if POLL_US is given): two builds A/B in
#                                      one boot, with a table of this build / base
#   BACKING=brd                        brd: a RAM block device; tmpfs: a file on a guest tmpfs
#   MTU=1500                           the veth pair's MTU; 9000 gives RoCE MTU 4096 (jumbo)
#   RDMABLK_VM_MEM=3072                guest MiB (the backing file lives in guest RAM)
# Results (and the guest log) in BUILD_DIR/bench/vm-bench-results/. Not a test: not in make
# check. Takes ~13 minutes on 2 cores under TCG (ROUNDS=3). See bench/README.md.
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/bench/vm-lib.sh"
bench_vm_build vm-bench "$@"
RUNTIME=${RUNTIME:-6}
RAMP=${RAMP:-2}
ROUNDS=${ROUNDS:-3}
QUEUES=${QUEUES:-2}
DEPTH=${DEPTH:-128}
BASE=${BASE:-}
if [ -n "$BASE" ]; then
	BASE=$(bench_vm_tree "vm-bench: BASE" "$BASE") || exit 1
	POLL_US=${POLL_US:-}
else
	POLL_US=${POLL_US:-0}
fi
BACKING=${BACKING:-brd}
MTU=${MTU:-1500}
case $MTU in
'' | *[!0-9]*) echo "vm-bench: MTU=$MTU is not a number of bytes" >&2; exit 1 ;;
esac
export RDMABLK_VM_MEM="${RDMABLK_VM_MEM:-3072}"

res=$build/bench/vm-bench-results
mkdir -p "$res"
rm -f "$res/vm-bench.tsv" "$res/vm-bench.info" "$res/vm-bench.table"
cat >"$res/vm-bench.env" <<EOF
RUNTIME=$RUNTIME
RAMP=$RAMP
ROUNDS=$ROUNDS
QUEUES=$QUEUES
DEPTH=$DEPTH
POLL_US=$POLL_US
BASE_BUILD=$BASE
BACKING=$BACKING
MTU=$MTU
EOF

load0=$(uptime)
start=$(date +%s)
rc=0
sh "$src/tests/vm/run.sh" --results "$res" --builddir "$build" "$src/bench/vm-bench-guest.sh" ||
	rc=$?
elapsed=$(($(date +%s) - start))
load1=$(uptime)
if [ $rc != 0 ] || [ ! -s "$res/vm-bench.tsv" ]; then
	echo "vm-bench: the guest run failed (run.sh exit $rc); guest log $res/vm-bench-guest.log:" >&2
	tail -n 60 "$res/vm-bench-guest.log" 2>/dev/null | sed 's/^/  | /' >&2
	exit 1
fi

rev=$(git -C "$src" describe --always --dirty 2>/dev/null || echo "?")
# The base build's source tree: the one its Makefile names (it may be built outside it).
base_rev=
if [ -n "$BASE" ]; then
	bsrc=$(sed -n 's/^abs_top_srcdir = //p' "$BASE/Makefile" 2>/dev/null)
	base_rev=$(git -C "${bsrc:-$BASE}" describe --always --dirty 2>/dev/null || echo base)
fi
python3 - "$res" "$load0" "$load1" "$elapsed" "$rev" "$POLL_US" "$base_rev" <<'PY' | tee "$res/vm-bench.table"
import sys, datetime
res, load0, load1, elapsed, rev, poll, base = sys.argv[1:8]
# The second pair: another build (BASE), or this one with an explicit poll-us.
second = (" base " + base if base else "") + (" poll-us " + poll if poll else "")
cfgs = [("k", "kernel nvme-rdma"), ("r", "rdmablk nbd/rdma"), ("t", "rdmablk nbd/tcp"),
        ("u", "rdmablk ublk/rdma"), ("rp", "nbd/rdma" + second),
        ("up", "ublk/rdma" + second)]
jobs = ["4k-randread-qd32", "4k-randwrite-qd32", "128k-seqread-qd8", "4k-randread-qd1"]
cells, na, rounds = {}, {}, {}
for line in open(res + "/vm-bench.tsv"):
    f = line.rstrip("\n").split("\t")
    if f[1] == "-":
        na[f[0]] = f[3]
    else:
        rnd = f[5] if len(f) > 5 else "1"
        rounds.setdefault((f[0], f[1]), {})[rnd] = tuple(map(float, f[2:5]))  # iops, MiB/s, lat

def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2

# A cell: the median of its rounds, field by field.
for k, by in rounds.items():
    cells[k] = tuple(median([v[i] for v in by.values()]) for i in range(3))
# Only the columns this run has (the poll ones are left out with POLL_US=off).
cfgs = [(c, n) for c, n in cfgs if c in na or any(k[0] == c for k in cells)]

def big(job):
    return job.startswith("128k")

def cell(c, job):
    if c in na:
        return "n/a"
    v = cells.get((c, job))
    if v is None:
        return "?"
    if big(job):
        return "%.1f MiB/s %.0fus" % (v[1], v[2])
    return "%.0f IOPS %.0fus" % (v[0], v[2])

# Ratios are taken within a round (both cells measured minutes apart at most), then the
# median over the rounds; the range shows how far the rounds disagreed.
def ratio(c, job, ref="k"):
    kb, vb = rounds.get((ref, job), {}), rounds.get((c, job), {})
    common = sorted(set(kb) & set(vb))
    if c in na or ref in na or not common:
        return "n/a"
    key = 1 if big(job) else 0
    rs = [vb[r][key] / kb[r][key] for r in common if kb[r][key]]
    ls = [vb[r][2] / kb[r][2] for r in common if kb[r][2]]
    if not rs or not ls:
        return "n/a"
    if len(rs) == 1:
        return "%.2fx lat %.2fx" % (rs[0], ls[0])
    return "%.2fx (%.2f-%.2f) lat %.2fx" % (median(rs), min(rs), max(rs), median(ls))

print("rdmablk in-VM benchmark, %s, commit %s, VM run %ss" %
      (datetime.date.today().isoformat(), rev, elapsed))
print("host load before: %s" % load0.strip())
print("host load after:  %s" % load1.strip())
for l in open(res + "/vm-bench.info"):
    print("  " + l.rstrip())
w = max([20] + [len(n) for _, n in cfgs])
print()
print("%-18s | " % "job" + " | ".join("%-*s" % (w, n) for _, n in cfgs))
print("-" * 18 + "-+-" + "-+-".join("-" * w for _ in cfgs))
for j in jobs:
    print("%-18s | " % j + " | ".join("%-*s" % (w, cell(c, j)) for c, _ in cfgs))
print()
nr = max([len(by) for by in rounds.values()] or [0])
print("cells: median of %d round(s)" % nr)
print()
print("ratios vs kernel nvme-rdma (IOPS for 4K jobs, MiB/s for 128K; mean latency); median of")
print("the rounds' ratios, (lowest-highest) when there were several:")
w = max([27 if nr > 1 else 20] + [len(n) for _, n in cfgs])
print("%-18s | " % "job" + " | ".join("%-*s" % (w, n) for _, n in cfgs[1:]))
print("-" * 18 + "-+-" + "-+-".join("-" * w for _ in cfgs[1:]))
for j in jobs:
    print("%-18s | " % j + " | ".join("%-*s" % (w, ratio(c, j)) for c, _ in cfgs[1:]))
if base:
    print()
    print("this build (%s) / base (%s), same rounds, same way:" % (rev, base))
    pairs = [(c, b, n) for c, b, n in [("r", "rp", "nbd/rdma"), ("u", "up", "ublk/rdma")]
             if any(k[0] == b for k in cells)]
    print("%-18s | " % "job" + " | ".join("%-*s" % (w, n) for _, _, n in pairs))
    print("-" * 18 + "-+-" + "-+-".join("-" * w for _ in pairs))
    for j in jobs:
        print("%-18s | " % j + " | ".join("%-*s" % (w, ratio(c, j, b)) for c, b, _ in pairs))
for c, n in cfgs:
    if c in na:
        print("%s: n/a (%s)" % (n, na[c]))
PY
