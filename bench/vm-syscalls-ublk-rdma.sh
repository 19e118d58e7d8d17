#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest script of bench/vm-syscalls.sh: ublk over rdma (see vm-syscalls-body.sh).
# vm-timeout: 300
. "$top_srcdir/tests/vm/lib.sh"
. "$top_srcdir/tests/vm/ublk-lib.sh"
SYSC_FRONTEND=ublk
. "$top_srcdir/bench/vm-syscalls-body.sh"
