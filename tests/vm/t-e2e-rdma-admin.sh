#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the host's end-to-end tests over rdma (e2e-rdma-body.sh): exports reloaded under
# I/O, clean DISCONNECTs (--list and attach/detach rounds, a frozen target).
# vm-timeout: 900
. "$(dirname "$0")/lib.sh"
E2E_GROUP=t-e2e-rdma-admin
E2E_TESTS="e2e-reload e2e-disconnect"
. "$(dirname "$0")/e2e-rdma-body.sh"
