#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: t-ublk-target-killed-rdma.sh over tcp (the VM's loopback).
# vm-timeout: 300
. "$(dirname "$0")/t-ublk-target-killed-rdma.sh"
