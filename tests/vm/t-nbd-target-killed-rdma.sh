#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the target is SIGKILLed while fio runs on /dev/nbdN; errors, not a hang (see
# target-killed-body.sh). Transport from the name (see frontend-lib.sh): -rdma.sh or -tcp.sh.
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd-lib.sh"
KILL_QD=4
. "$(dirname "$0")/target-killed-body.sh"
