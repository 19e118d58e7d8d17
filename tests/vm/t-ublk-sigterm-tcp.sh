#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: t-ublk-sigterm-rdma.sh over tcp (the VM's loopback).
# vm-timeout: 300
. "$(dirname "$0")/t-ublk-sigterm-rdma.sh"
