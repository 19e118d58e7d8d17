#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: write-zeroes (UBLK_IO_F_NOUNMAP as NO_HOLE) and discard through /dev/ublkbN on
# tmpfs, brd and vfat (tests/vm/zero-body.sh); over tcp.
# vm-timeout: 450
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ublk-lib.sh"
. "$(dirname "$0")/zero-body.sh"
