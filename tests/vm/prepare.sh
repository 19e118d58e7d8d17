#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Prepare everything the VM harness needs, outside the repository:
#   - host packages (qemu, busybox-static, kmod, cpio, xz, guest tools), installed with apt-get
#   - a Debian kernel (the image package linux-image-6.12-amd64 depends on), extracted and
#     depmod'ed in $RDMABLK_VM_CACHE/<kver>/
#   - a tiny initramfs that mounts the host / over virtio-9p read-only with a tmpfs overlay
# and writes $RDMABLK_VM_CACHE/current.env for run.sh.
#
# Idempotent and cached per kernel version; a second run only checks and prints.
# Exit status: 0 ready, 77 cannot be had here (reason printed), 1 error.

set -eu

CACHE=${RDMABLK_VM_CACHE:-/var/cache/rdmablk-vm}
KMETA=${RDMABLK_VM_KPKG:-linux-image-6.12-amd64}
# Host packages: the VM itself, the initramfs tools, and what guest tests run from the host /.
PKGS="qemu-system-x86 busybox-static kmod cpio xz-utils coreutils util-linux iproute2
rdmacm-utils ibverbs-utils ibverbs-providers dosfstools"
# Modules the initramfs needs before it can see the root file system.
INITRD_MODS="9pnet_virtio 9p overlay"

say() { printf 'prepare: %s\n' "$*"; }
skip() { printf 'prepare: SKIP: %s\n' "$*"; exit 77; }
die() { printf 'prepare: ERROR: %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" = 0 ]; }

apt_updated=no
apt_update() {
	[ "$apt_updated" = yes ] && return 0
	say "apt-get update"
	apt_updated=yes
	apt-get update -qq >/dev/null 2>&1 || { say "apt-get update failed"; return 1; }
}

pkg_installed() {
	dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

ensure_packages() {
	missing=
	for p in $PKGS; do
		pkg_installed "$p" || missing="$missing $p"
	done
	if [ -z "$missing" ]; then
		say "host packages present"
		return 0
	fi
	is_root || skip "missing packages:$missing (not root, cannot apt-get install)"
	say "installing:$missing"
	# shellcheck disable=SC2086
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			$missing >/dev/null 2>&1; then
		apt_update || true
		# shellcheck disable=SC2086
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			$missing >/dev/null 2>&1 || skip "apt-get install$missing failed (no archive?)"
	fi
}

# Print the concrete image package the meta package depends on, or nothing.
resolve_kpkg() {
	apt-cache depends "$KMETA" 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }'
}

# Newest kernel already prepared in the cache (fallback when the archive is unreachable).
cached_kver() {
	for d in "$CACHE"/*/ready; do
		[ -e "$d" ] && basename "$(dirname "$d")"
	done | sort -V | tail -n 1
}

modules_base() {
	# Debian packages ship lib/modules or usr/lib/modules depending on the release.
	for b in "$1" "$1/usr"; do
		[ -d "$b/lib/modules/$2" ] && { printf '%s\n' "$b"; return 0; }
	done
	return 1
}

fetch_kernel() {
	kpkg=$1
	kver=$2
	kdir="$CACHE/$kver"
	[ -e "$kdir/ready" ] && { say "kernel $kver cached"; return 0; }
	is_root || [ -w "$CACHE" ] || skip "cache $CACHE not writable"
	mkdir -p "$CACHE/dl"
	rm -f "$CACHE/dl/"*.deb
	say "downloading $kpkg"
	# apt-get download complains about unsandboxed downloads as root; harmless.
	if ! (cd "$CACHE/dl" && apt-get download -qq "$kpkg" >/dev/null 2>&1); then
		apt_update || true
		(cd "$CACHE/dl" && apt-get download -qq "$kpkg" >/dev/null 2>&1) || return 1
	fi
	deb=$(ls "$CACHE/dl/"*.deb)
	rm -rf "$kdir"
	mkdir -p "$kdir"
	say "extracting $(basename "$deb")"
	dpkg-deb -x "$deb" "$kdir/root"
	rm -f "$deb"
	base=$(modules_base "$kdir/root" "$kver") || die "no modules dir for $kver in $kpkg"
	say "depmod $kver"
	depmod -b "$base" "$kver"
	chmod a+r "$kdir/root/boot/vmlinuz-$kver"
	touch "$kdir/ready"
}

# The initramfs' /init: load the 9p/overlay modules, mount host / read-only over virtio-9p with
# a tmpfs upper layer, then switch_root into it and run the shell script rdmablk.init= with
# /bin/sh (scripts need no exec bit), or an interactive /bin/sh without one.
write_init() {
	cat <<'EOF'
#!/bin/sh
PATH=/bin
fail() {
	echo "rdmablk-initramfs: FAILED: $*"
	echo o > /proc/sysrq-trigger
	sleep 60
}
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules.order); do
	insmod "/lib/modules/$m" || fail "insmod $m"
done
init=
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	rdmablk.init=*) init=${arg#rdmablk.init=} ;;
	esac
done
mkdir -p /lower /rw /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower ||
	fail "mount 9p hostroot"
mount -t tmpfs -o mode=0755 tmpfs /rw || fail "mount tmpfs"
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
	fail "mount overlay"
umount /proc /sys
mount --move /dev /newroot/dev || umount /dev
exec switch_root /newroot /bin/sh $init
EOF
}

build_initrd() {
	kver=$1
	kdir="$CACHE/$kver"
	base=$(modules_base "$kdir/root" "$kver") || die "no modules dir for $kver"
	bb=$(command -v busybox) || die "busybox not found"
	# Rebuild when the init script, module list or busybox changes.
	key=$({ write_init; echo "$INITRD_MODS"; cksum <"$bb"; } | cksum | cut -d' ' -f1)
	if [ -e "$kdir/initrd.gz" ] && [ "$(cat "$kdir/initrd.key" 2>/dev/null)" = "$key" ]; then
		say "initramfs cached"
		return 0
	fi
	say "building initramfs"
	t=$(mktemp -d "$CACHE/initrd.XXXXXX")
	mkdir -p "$t/bin" "$t/proc" "$t/sys" "$t/dev" "$t/lib/modules"
	cp "$bb" "$t/bin/busybox"
	ln -s busybox "$t/bin/sh"
	write_init >"$t/init"
	chmod 755 "$t/init"
	: >"$t/modules.order"
	# shellcheck disable=SC2086
	modprobe -d "$base" -S "$kver" --show-depends -a $INITRD_MODS |
		awk '$1 == "insmod" { print $2 }' | while read -r ko; do
		name=$(basename "$ko")
		name=${name%.xz}
		name=${name%.zst}
		grep -qx "$name" "$t/modules.order" && continue
		case "$ko" in
		*.xz) xz -dc "$ko" >"$t/lib/modules/$name" ;;
		*.zst) zstd -qdc "$ko" >"$t/lib/modules/$name" ;;
		*) cp "$ko" "$t/lib/modules/$name" ;;
		esac
		echo "$name" >>"$t/modules.order"
	done
	[ -s "$t/modules.order" ] || die "no initramfs modules resolved for $INITRD_MODS"
	say "initramfs modules: $(tr '\n' ' ' <"$t/modules.order")"
	(cd "$t" && find . | cpio -o -H newc --quiet) | gzip -1 >"$kdir/initrd.gz.tmp"
	mv "$kdir/initrd.gz.tmp" "$kdir/initrd.gz"
	echo "$key" >"$kdir/initrd.key"
	rm -rf "$t"
}

write_env() {
	kver=$1
	kdir="$CACHE/$kver"
	base=$(modules_base "$kdir/root" "$kver")
	cat >"$CACHE/current.env.tmp" <<EOF
RDMABLK_VM_KVER='$kver'
RDMABLK_VM_KERNEL='$kdir/root/boot/vmlinuz-$kver'
RDMABLK_VM_INITRD='$kdir/initrd.gz'
RDMABLK_VM_MODDIR='$base/lib/modules'
EOF
	mv "$CACHE/current.env.tmp" "$CACHE/current.env"
}

# Keep the kernel in use and the newest other one (a VM of another build tree may still be
# reading its modules); each is ~120 MB.
prune() {
	keep_other=$(for d in "$CACHE"/*/ready; do
		[ -e "$d" ] && basename "$(dirname "$d")"
	done | grep -vxF "$1" | sort -V | tail -n 1)
	for d in "$CACHE"/*/; do
		v=$(basename "$d")
		[ -e "$d/ready" ] || [ -e "$d/initrd.gz" ] || continue
		[ "$v" = "$1" ] || [ "$v" = "$keep_other" ] && continue
		say "removing old kernel $v"
		rm -rf "$d"
	done
}

main() {
	start=$(date +%s)
	ensure_packages
	command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not available"
	mkdir -p "$CACHE" 2>/dev/null || skip "cannot create cache dir $CACHE (set RDMABLK_VM_CACHE)"
	[ -w "$CACHE" ] || skip "cache dir $CACHE not writable (set RDMABLK_VM_CACHE)"
	# Several build trees may prepare at once: serialise on the shared cache.
	exec 9>"$CACHE/.lock"
	flock 9

	kpkg=$(resolve_kpkg)
	if [ -z "$kpkg" ]; then
		apt_update || true
		kpkg=$(resolve_kpkg)
	fi
	kver=
	if [ -n "$kpkg" ]; then
		kver=${kpkg#linux-image-}
		if ! fetch_kernel "$kpkg" "$kver"; then
			say "cannot download $kpkg"
			kver=
		fi
	fi
	if [ -z "$kver" ]; then
		kver=$(cached_kver)
		[ -n "$kver" ] || skip "kernel package for $KMETA cannot be had (no archive access?)"
		say "falling back to cached kernel $kver"
	fi
	build_initrd "$kver"
	write_env "$kver"
	prune "$kver"
	say "ready: kernel $kver in $CACHE/$kver ($(($(date +%s) - start)) s)"
}

[ "${1:-}" = --print-init ] && { write_init; exit 0; }
main
