#!/bin/bash
# The main job, end to end on this host: install what is missing, build, export
# a sparse file with rdmablk-target, attach it with rdmablk-initiator over the
# best transport this host has (rdma when an RDMA device is up, else tcp), run
# fio through the NBD export (a verified write/read pass, then a short
# performance pass), print the results, and stop everything cleanly.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"
scripts/deps.sh
[ -x configure ] || ./autogen.sh >/dev/null
echo "demo: building in build-demo/"
scripts/build.sh build-demo >build-demo.log 2>&1 || { tail -40 build-demo.log; exit 1; }
B=$src/build-demo

W=$(mktemp -d /tmp/rdmablk-demo.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$W"
}
trap cleanup EXIT

transport=tcp addr=127.0.0.1
if command -v ibv_devinfo >/dev/null && ibv_devinfo 2>/dev/null | grep -q "PORT_ACTIVE"; then
	rdma_addr=$(ip -o -4 addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)
	[ -n "$rdma_addr" ] && transport=rdma addr=$rdma_addr
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo "demo: transport $transport ($addr:$port)"

truncate -s 1G "$W/disk.img"
cat >"$W/target.conf" <<CONF
[target]
listen = $transport://$addr:$port
threads = 1

[export demo]
path = $W/disk.img
CONF
"$B/target/rdmablk-target" --config "$W/target.conf" >"$W/target.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q "ready:" "$W/target.log" && break; sleep 0.1; done
grep -q "ready:" "$W/target.log" || { cat "$W/target.log"; exit 1; }

"$B/initiator/rdmablk-initiator" "$transport://$addr:$port/demo" --queues 2 \
	--nbd-socket "$W/nbd.sock" >"$W/initiator.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$W/nbd.sock" ] && break; sleep 0.1; done
[ -S "$W/nbd.sock" ] || { cat "$W/initiator.log"; exit 1; }
uri="nbd+unix:///demo?socket=$W/nbd.sock"
echo "demo: export attached at $uri"

echo "demo: fio random writes with crc32c verification (256 MiB)"
fio --name=verify --ioengine=nbd --uri="$uri" --rw=randwrite --bs=4k-128k --iodepth=16 \
	--size=256M --verify=crc32c --verify_fatal=1 --verify_state_save=0 \
	--output-format=terse --terse-version=3 \
	>"$W/verify.txt" || { cat "$W/verify.txt"; exit 1; }
echo "demo: verified OK"
for job in "randread 4k 32" "randwrite 4k 32" "read 128k 8"; do
	set -- $job
	fio --name="$1-$2" --ioengine=nbd --uri="$uri" --rw="$1" --bs="$2" --iodepth="$3" \
		--time_based --runtime=5 --size=256M --group_reporting |
		grep -E "^\s+(read|write):" | sed "s/^ */demo: $1 $2 QD$3: /"
done
echo "demo: stopping"
for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
	kill -TERM "${pids[$i]}"
	wait "${pids[$i]}" || { echo "demo: process exited with an error"; exit 1; }
done
pids=()
echo "demo: target and initiator stopped cleanly"
