#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the host's end-to-end tests over rdma (e2e-rdma-body.sh): ACL, malformed capsules
# from a raw host, the target killed, SIGTERM.
# vm-timeout: 900
. "$(dirname "$0")/lib.sh"
E2E_GROUP=t-e2e-rdma-faults
E2E_TESTS="e2e-acl e2e-malformed e2e-target-killed e2e-sigterm"
. "$(dirname "$0")/e2e-rdma-body.sh"
