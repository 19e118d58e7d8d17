/* SPDX-License-Identifier: MIT */
/*
 * Kernel NBD driver control over generic netlink (family "nbd",
 * linux/nbd-netlink.h): CONNECT a /dev/nbdN to sockets we serve,
 * DISCONNECT it, and ask its STATUS.  Needs CAP_SYS_ADMIN.
 *
 * Every function logs its failure once, with what the kernel said and
 * what to do about it (module not loaded, device busy, no permission),
 * and returns 0 or -errno.  Built without libnl-genl-3 the functions
 * fail with -EOPNOTSUPP.
 */
#ifndef RB_NBD_NETLINK_H
#define RB_NBD_NETLINK_H

#include <stdbool.h>
#include <stdint.h>

struct nbd_nl;

/* What NBD_CMD_CONNECT configures. */
struct nbd_nl_config {
	int index; /* /dev/nbdN; -1: the kernel picks the first free one */
	uint64_t size; /* bytes */
	uint64_t block_size; /* logical block size, 512..page size */
	uint64_t server_flags; /* NBD_FLAG_* transmission flags of the export */
	uint64_t timeout_s; /* per-request timeout in the kernel */
	uint64_t dead_conn_timeout_s; /* wait for a reconnect once every socket died */
	const int *fds; /* one connected stream socket per hardware queue */
	unsigned int nr_fds;
	const char *backend; /* shown in /sys/block/nbdN/backend; NULL: none */
};

/* Open a generic netlink socket and resolve the "nbd" family.
 * -ENOENT: the nbd module is not loaded. */
int nbd_nl_open(struct nbd_nl **out);
void nbd_nl_close(struct nbd_nl *nl);

/* Configure and start the device; *index is the one the kernel used.
 * The kernel holds its own reference to every fd afterwards. */
int nbd_nl_connect(struct nbd_nl *nl, const struct nbd_nl_config *c, int *index);
/* Ask the kernel to disconnect /dev/nbd<index>: it sends NBD_CMD_DISC on
 * every socket, shuts them down and fails what is still queued. */
int nbd_nl_disconnect(struct nbd_nl *nl, int index);
/* *connected: the device exists and still has a configuration (it keeps
 * one while opened after a disconnect).  A device that does not exist is
 * reported as not connected. */
int nbd_nl_status(struct nbd_nl *nl, int index, bool *connected);

/* "/dev/nbdN" -> N, "auto" -> -1; -EINVAL otherwise. */
int nbd_parse_device(const char *s, int *index);

#endif
