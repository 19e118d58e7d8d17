#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the Soft-RoCE link drops every packet for 8 s under fio on the nbd device;
# the initiator reconnects and the data verifies (see blip-body.sh).
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd-lib.sh"
. "$(dirname "$0")/blip-body.sh"
