#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest script of bench/vm-syscalls.sh: nbd over rdma (see vm-syscalls-body.sh).
# vm-timeout: 300
. "$top_srcdir/tests/vm/lib.sh"
. "$top_srcdir/tests/vm/nbd-lib.sh"
SYSC_FRONTEND=nbd
. "$top_srcdir/bench/vm-syscalls-body.sh"
