/* SPDX-License-Identifier: MIT */
/*
 * "rdma" transport: RC queue pairs over librdmacm + libibverbs.
 *   transport_rdma.c     small helpers, the ops table
 *   transport_rdma_mr.c  domains (one PD per device), memory regions
 *   transport_rdma_cq.c  the completion queue, its single pollable fd, completions
 *   transport_rdma_io.c  queue pair setup and the data path
 *   transport_rdma_cm.c  connect, teardown, CM events on the CQ's channel
 *   transport_rdma_listen.c  listen, accept, reject
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <arpa/inet.h>

#include "checked.h"
#include "transport_rdma_priv.h"

void rd_format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(s6->sin6_port));
	} else if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(s4->sin_port));
	} else {
		snprintf(buf, len, "?");
	}
}

int rd_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	return 0;
}

const char *rd_op_name(unsigned int op)
{
	static const char *const names[] = { "send", "receive", "RDMA READ", "RDMA WRITE" };

	return op < RB_ARRAY_SIZE(names) ? names[op] : "?";
}

/* ---- small accessors ------------------------------------------------------------ */

static struct rb_domain *rd_conn_domain(struct rb_conn *c)
{
	return (struct rb_domain *)to_rconn(c)->dom;
}

static void rd_conn_peer(struct rb_conn *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s", to_rconn(c)->peer);
}

static uint32_t rd_conn_qpn(struct rb_conn *c)
{
	return to_rconn(c)->qpn;
}

const struct rb_transport_ops rb_rdma_transport = {
	.name = "rdma",
	.domain_open = rd_domain_open,
	.domain_close = rd_domain_close,
	.reg_mr = rd_reg_mr,
	.dereg_mr = rd_dereg_mr,
	.cq_create = rd_cq_create,
	.cq_destroy = rd_cq_destroy,
	.cq_fd = rd_cq_fd,
	.cq_arm = rd_cq_arm,
	.cq_cork = rd_cq_cork,
	.cq_prepare_wait = rd_cq_prepare_wait,
	.cq_poll = rd_cq_poll,
	.listen = rd_listen,
	.listener_close = rd_listener_close,
	.listener_fd = rd_listener_fd,
	.listener_get = rd_listener_get,
	.conn_domain = rd_conn_domain,
	.accept = rd_accept,
	.reject = rd_reject,
	.conn_create = rd_conn_create,
	.connect = rd_connect,
	.disconnect = rd_disconnect,
	.conn_destroy = rd_conn_destroy,
	.post_recv = rd_post_recv,
	.post_send = rd_post_send,
	.post_read = rd_post_read,
	.post_write = rd_post_write,
	.conn_peer = rd_conn_peer,
	.conn_qpn = rd_conn_qpn,
	.domain_lost = rd_domain_lost,
	.rescan = rd_rescan,
};

