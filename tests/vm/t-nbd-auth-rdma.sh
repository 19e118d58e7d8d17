#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: authentication over rdma with the kernel NBD frontend, /dev/nbdN
# (auth-body.sh).
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nbd-lib.sh"
AUTH_FRONTEND_ARGS="--nbd-device auto"
. "$(dirname "$0")/auth-body.sh"
