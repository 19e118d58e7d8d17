#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: the host's end-to-end tests over rdma (e2e-rdma-body.sh): integrity (nbdcopy, fio
# verify) and read-only exports.
# vm-timeout: 900
. "$(dirname "$0")/lib.sh"
E2E_GROUP=t-e2e-rdma-io
E2E_TESTS="e2e-basic e2e-nbdcopy e2e-fio-verify e2e-readonly"
. "$(dirname "$0")/e2e-rdma-body.sh"
