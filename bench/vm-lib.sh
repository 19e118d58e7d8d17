# Shared by the VM benchmarks (vm-bench.sh, vm-syscalls.sh); sourced, not run, with src set.

# bench_vm_build NAME [BUILD_DIR]: sets build to the build tree's absolute path (BUILD_DIR;
# else . if it is a build tree; else SRC/build); exits with a message (NAME: ...) unless both
# daemons are built and python3 (which prints the tables) is there.
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
	[ -d "$build" ] || { echo "$_name: $build: no such build directory" >&2; exit 1; }
	build=$(cd "$build" && pwd)
	for _b in target/rdmablk-target initiator/rdmablk-initiator; do
		[ -x "$build/$_b" ] || { echo "$_name: $build/$_b not built" >&2; exit 1; }
	done
	command -v python3 >/dev/null || { echo "$_name: needs python3" >&2; exit 1; }
}
