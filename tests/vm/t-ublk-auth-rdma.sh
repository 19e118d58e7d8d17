#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: authentication over rdma with the ublk frontend (auth-body.sh).
# vm-timeout: 300
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ublk-lib.sh"
AUTH_FRONTEND_ARGS=--ublk
. "$(dirname "$0")/auth-body.sh"
