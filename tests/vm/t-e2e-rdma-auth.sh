#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the host's end-to-end tests over rdma (e2e-rdma-body.sh): authentication (right,
# wrong and missing secrets, a target proven, rotation by reload).
# vm-timeout: 900
. "$(dirname "$0")/lib.sh"
E2E_GROUP=t-e2e-rdma-auth
E2E_TESTS="e2e-auth"
. "$(dirname "$0")/e2e-rdma-body.sh"
