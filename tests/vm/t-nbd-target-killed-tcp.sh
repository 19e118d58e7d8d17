#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: t-nbd-target-killed-rdma.sh over tcp (the VM's loopback).
# vm-timeout: 300
. "$(dirname "$0")/t-nbd-target-killed-rdma.sh"
