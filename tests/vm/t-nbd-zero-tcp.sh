#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: write-zeroes, NO_HOLE and discard through /dev/nbdN on tmpfs, brd and vfat
# (tests/vm/zero-body.sh), and FAST_ZERO through the initiator's NBD socket; over tcp.
# vm-timeout: 600
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd-lib.sh"
ZERO_FAST=1
. "$(dirname "$0")/zero-body.sh"
