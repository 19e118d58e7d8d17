#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: t-nbd-flush-rdma.sh over tcp (the VM's loopback).
# vm-timeout: 300
. "$(dirname "$0")/t-nbd-flush-rdma.sh"
