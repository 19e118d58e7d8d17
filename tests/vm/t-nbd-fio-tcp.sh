#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: t-nbd-fio-rdma.sh over tcp (the VM's loopback).
# vm-timeout: 300
. "$(dirname "$0")/t-nbd-fio-rdma.sh"
