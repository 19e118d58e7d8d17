#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Guest test: t-ublk-fio-rdma.sh over tcp (the VM's loopback).
# vm-timeout: 400
. "$(dirname "$0")/t-ublk-fio-rdma.sh"
