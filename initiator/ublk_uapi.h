/* SPDX-License-Identifier: MIT */
/*
 * The ublk kernel interface as rdmablk uses it: <linux/ublk_cmd.h> plus the
 * pieces older kernel headers lack (Debian 12 ships the 6.1 header; the
 * ioctl-encoded commands and CMD_IOCTL_ENCODE came with 6.3-6.5).  Every
 * missing constant is defined here and only here, guarded, with the value
 * of the Linux 6.12 uapi; the structs are the 6.1 ones, whose sizes and
 * used fields 6.12 kept (asserted below).
 */
#ifndef RB_UBLK_UAPI_H
#define RB_UBLK_UAPI_H

#include <linux/ublk_cmd.h>
#include <sys/ioctl.h>

/* ioctl-encoded control commands ('u', legacy number, ctrl cmd). */
#ifndef UBLK_U_CMD_ADD_DEV
#define UBLK_U_CMD_GET_DEV_INFO _IOR('u', UBLK_CMD_GET_DEV_INFO, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_ADD_DEV _IOWR('u', UBLK_CMD_ADD_DEV, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_DEL_DEV _IOWR('u', UBLK_CMD_DEL_DEV, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_START_DEV _IOWR('u', UBLK_CMD_START_DEV, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_STOP_DEV _IOWR('u', UBLK_CMD_STOP_DEV, struct ublksrv_ctrl_cmd)
#define UBLK_U_CMD_SET_PARAMS _IOWR('u', UBLK_CMD_SET_PARAMS, struct ublksrv_ctrl_cmd)
#endif
#ifndef UBLK_U_CMD_GET_FEATURES
#define UBLK_U_CMD_GET_FEATURES _IOR('u', 0x13, struct ublksrv_ctrl_cmd)
#endif

/* ioctl-encoded I/O commands ('u', legacy number, io cmd). */
#ifndef UBLK_U_IO_FETCH_REQ
#define UBLK_U_IO_FETCH_REQ _IOWR('u', UBLK_IO_FETCH_REQ, struct ublksrv_io_cmd)
#define UBLK_U_IO_COMMIT_AND_FETCH_REQ                                                             \
	_IOWR('u', UBLK_IO_COMMIT_AND_FETCH_REQ, struct ublksrv_io_cmd)
#endif

/* Feature flags (ublksrv_ctrl_dev_info.flags, GET_FEATURES). */
#ifndef UBLK_F_UNPRIVILEGED_DEV
#define UBLK_F_UNPRIVILEGED_DEV (1ULL << 5)
#endif
#ifndef UBLK_F_CMD_IOCTL_ENCODE
#define UBLK_F_CMD_IOCTL_ENCODE (1ULL << 6)
#endif

/* Limits the driver enforces (6.12: 4096 tags per queue, 12-bit queue id). */
#ifndef UBLK_MAX_NR_QUEUES
#define UBLK_MAX_NR_QUEUES 4096u
#endif

/* The driver takes sizes from the header (dev_info) or only reads the
 * fields common to every version; these must not drift. */
_Static_assert(sizeof(struct ublksrv_ctrl_cmd) == 32, "ublksrv_ctrl_cmd is 32 bytes");
_Static_assert(sizeof(struct ublksrv_ctrl_dev_info) == 64, "ublksrv_ctrl_dev_info is 64 bytes");
_Static_assert(sizeof(struct ublksrv_io_cmd) == 16, "ublksrv_io_cmd is 16 bytes");
_Static_assert(sizeof(struct ublksrv_io_desc) == 24, "ublksrv_io_desc is 24 bytes");
_Static_assert(sizeof(struct ublk_param_basic) == 32, "ublk_param_basic is 32 bytes");
_Static_assert(sizeof(struct ublk_param_discard) == 20, "ublk_param_discard is 20 bytes");

#endif
