#!/bin/bash
# build.sh DIR [configure args...]: out-of-tree build of this checkout in DIR.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
dir=$1
shift
[ -x "$src/configure" ] || (cd "$src" && ./autogen.sh)
mkdir -p "$dir"
cd "$dir"
[ -f Makefile ] || "$src/configure" "$@"
make -j"$(nproc)"
