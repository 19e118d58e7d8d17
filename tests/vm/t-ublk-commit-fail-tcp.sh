#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: t-ublk-commit-fail-rdma.sh over tcp (the VM's loopback).
# vm-timeout: 300
. "$(dirname "$0")/t-ublk-commit-fail-rdma.sh"
