#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the target restarts under fio on the nbd device; the initiator reconnects and
# the data verifies (see reconnect-body.sh).
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd-lib.sh"
. "$(dirname "$0")/reconnect-body.sh"
