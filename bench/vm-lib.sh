# Shared by the VM benchmarks (vm-bench.sh, vm-syscalls.sh); sourced, not run, with src set.

# bench_vm_tree NAME DIR: DIR's absolute path, on stdout; exits with a message (NAME: ...)
# unless it is a build tree with both daemons built.
bench_vm_tree() {
	[ -d "$2" ] || { echo "$1: $2: no such build directory" >&2; exit 1; }
	_dir=$(cd "$2" && pwd)
	for _b in target/rdmablk-target initiator/rdmablk-initiator; do
		[ -x "$_dir/$_b" ] || { echo "$1: $_dir/$_b not built" >&2; exit 1; }
	done
	echo "$_dir"
}

# bench_vm_build NAME [BUILD_DIR]: sets build to the build tree (BUILD_DIR; else . if it is a
# build tree; else SRC/build), checked by bench_vm_tree; python3 (which prints the tables)
# must be there.
bench_vm_build() {
	_name=$1
	shift
	if [ $# -gt 0 ]; then
		build=$1
	elif [ -x ./target/rdmablk-target ]; then
		build=.
	else
		build=$src/build
	fi
	build=$(bench_vm_tree "$_name" "$build") || exit 1
	command -v python3 >/dev/null || { echo "$_name: needs python3" >&2; exit 1; }
}
