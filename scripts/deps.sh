#!/bin/bash
# Install everything rdmablk needs to build, test, benchmark and demo on
# Debian 12.  Idempotent: only missing packages are installed.
set -euo pipefail

PKGS=(
	# build
	build-essential autoconf automake libtool pkg-config
	liburing-dev libinih-dev libsystemd-dev libnl-genl-3-dev libnl-3-dev
	librdmacm-dev libibverbs-dev libssl-dev
	# tests, bench, fuzzing
	libnbd-dev libnbd-bin nbdkit fio python3 clang-14 libclang-rt-14-dev
	systemd iproute2 e2fsprogs util-linux groff-base
	dosfstools # mkfs.vfat: a store without ZERO_RANGE/PUNCH_HOLE (tests/vm/zero-body.sh)
	# RDMA user space (Soft-RoCE in the VM suite)
	rdma-core ibverbs-providers ibverbs-utils rdmacm-utils
	# the VM suite: kernel package download, initramfs, qemu
	qemu-system-x86 busybox-static kmod cpio xz-utils nvme-cli
	# bench/vm-syscalls.sh (perf stat on syscall tracepoints in the guest)
	linux-perf
)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#PKGS[@]} packages present"
	exit 0
fi
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
