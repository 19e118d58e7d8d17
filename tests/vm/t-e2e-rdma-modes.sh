#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the host's end-to-end tests over rdma (e2e-rdma-body.sh): polling modes, a full file
# system under a thin export, no in-capsule data, idle queues.
# vm-timeout: 900
. "$(dirname "$0")/lib.sh"
E2E_GROUP=t-e2e-rdma-modes
E2E_TESTS="e2e-poll e2e-enospc e2e-no-incapsule e2e-idle-queue"
. "$(dirname "$0")/e2e-rdma-body.sh"
