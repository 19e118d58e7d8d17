/* SPDX-License-Identifier: MIT */
/*
 * "tcp" transport: RDMA RC semantics in software over one TCP stream per
 * connection.  docs/transport-tcp.md has the same in prose.
 *
 * Framing.  Every frame is a 32-byte header (struct tcp_hdr, little
 * endian) followed by `length` payload bytes:
 *
 *   type          payload       fields used
 *   HELLO         connect priv  addr = magic                  (<= 56 bytes)
 *   HELLO_ACCEPT  accept priv   addr = magic                  (<= 196 bytes)
 *   HELLO_REJECT  reject priv   addr = magic                  (<= 148 bytes)
 *   SEND          message       tag, ack
 *   WRITE         data          tag, ack, addr, rkey
 *   READ_REQ      none          tag, ack, addr, rkey, length = bytes wanted
 *   READ_RESP     data          tag (of the READ_REQ), ack
 *   NAK           none          tag, ack, status = rb_wc_status for that WR
 *   ACK           none          ack
 *
 * Every frame after the handshake carries `ack`: the number of SEND and
 * WRITE frames the sender has received and placed so far.  SEND and WRITE
 * work requests complete on the requester when that count covers them
 * (like an RC ACK), so a WRITE the peer refuses can still complete with
 * RB_WC_REM_ACCESS_ERR.  Acks ride on any outgoing frame; a bare ACK is
 * sent when cq_poll finishes a batch and nothing else carried the count.
 * READs complete when READ_RESP data has landed in the local sges.
 *
 * Data is never staged: sends gather from the caller's sges (sendmsg of up
 * to IOV_MAX iovecs covering many queued frames), payloads are read with
 * readv straight into the receive sges / the target region, and a 512-byte
 * buffer after the payload catches the next headers in the same syscall.
 *
 * Errors: an incoming frame that breaks the rules (unknown rkey, missing
 * access, out of bounds, no receive posted, receive too small) gets a
 * best-effort NAK, is logged once, and the connection dies; all other
 * outstanding WRs then complete with RB_WC_FLUSH_ERR, exactly once.
 *
 * Files, cut like the rdma transport's:
 *   transport_tcp.c     framing (this text), work request pool, the ops table
 *   transport_tcp_mr.c  domains and memory regions (the rkey table)
 *   transport_tcp_cq.c  the completion queue and its single pollable fd
 *   transport_tcp_io.c  posting and the send side of the data path
 *   transport_tcp_rx.c  the receive side of the data path
 *   transport_tcp_cm.c  connect, accept, reject, teardown
 *   transport_tcp_listen.c  listeners and the HELLO handshake
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "checked.h"
#include "log.h"
#include "transport_tcp_priv.h"

static uint32_t g_qpn;

uint32_t tcp_next_qpn(void)
{
	return __atomic_add_fetch(&g_qpn, 1, __ATOMIC_RELAXED);
}

void tcp_format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		/* IPv4 peers of a dual-stack listener read as plain IPv4. */
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], host, sizeof(host));
			snprintf(buf, len, "%s:%u", host, ntohs(s6->sin6_port));
			return;
		}
		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(s6->sin6_port));
	} else if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(s4->sin_port));
	} else {
		snprintf(buf, len, "?");
	}
}

/* Latency matters more than segment count; RC has no keepalive either. */
void tcp_sock_opts(int fd, const struct rb_transport_opts *opts)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int one = 1, zero = 0;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		rb_warn("tcp: TCP_NODELAY: %s", strerror(errno));
	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &zero, sizeof(zero)) < 0)
		rb_warn("tcp: SO_KEEPALIVE: %s", strerror(errno));
	if (!opts || opts->tos < 0 || getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return;
	if (ss.ss_family == AF_INET6) {
		if (setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &opts->tos, sizeof(opts->tos)) < 0)
			rb_warn("tcp: IPV6_TCLASS %d: %s", opts->tos, strerror(errno));
	} else if (setsockopt(fd, IPPROTO_IP, IP_TOS, &opts->tos, sizeof(opts->tos)) < 0) {
		rb_warn("tcp: IP_TOS %d: %s", opts->tos, strerror(errno));
	}
}

/* ---- work request pool ------------------------------------------------- */

static size_t chunk_len(unsigned int n)
{
	return (sizeof(struct tcp_chunk) + n * sizeof(struct tcp_wr) + 4095) / 4096 * 4096;
}

/* Chunks are mappings of their own: a closed connection's go back to the
 * kernel at once, where malloc kept them in the arenas of the threads that
 * happened to allocate them (issue 31). */
int tcp_pool_grow(struct tcp_conn *c, unsigned int n)
{
	struct tcp_chunk *ch = mmap(NULL, chunk_len(n), PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (ch == MAP_FAILED)
		return -ENOMEM;
	ch->n = n;
	ch->next = c->chunks;
	c->chunks = ch;
	for (unsigned int i = 0; i < n; i++) {
		ch->wr[i].conn = c;
		ch->wr[i].next = c->free;
		c->free = &ch->wr[i];
	}
	return 0;
}

struct tcp_wr *tcp_wr_get(struct tcp_conn *c)
{
	struct tcp_wr *w;

	if (!c->free && tcp_pool_grow(c, TCP_CHUNK))
		return NULL;
	w = c->free;
	c->free = w->next;
	w->next = NULL;
	w->cqe = NULL;
	w->nsge = 0;
	w->len = 0;
	w->byte_len = 0;
	w->tag = 0;
	memset(&w->hdr, 0, sizeof(w->hdr));
	return w;
}

void tcp_wr_put(struct tcp_conn *c, struct tcp_wr *w)
{
	w->next = c->free;
	c->free = w;
}

void tcp_conn_free_pool(struct tcp_conn *c)
{
	while (c->chunks) {
		struct tcp_chunk *ch = c->chunks;

		c->chunks = ch->next;
		munmap(ch, chunk_len(ch->n));
	}
	c->free = NULL;
}

static struct rb_domain *tcp_conn_domain(struct rb_conn *c)
{
	return (struct rb_domain *)to_conn(c)->dom;
}

/* The connection and its work request pool: what tcp_accept grows at once,
 * and a few TCP_CHUNK grows for frames of its own (acks, NAKs). */
static size_t tcp_conn_mem(const struct rb_conn_caps *caps)
{
	size_t wrs = (size_t)caps->max_send_wr + caps->max_recv_wr + TCP_CHUNK;

	return sizeof(struct tcp_conn) + chunk_len((unsigned int)wrs) + 4 * chunk_len(TCP_CHUNK);
}

static void tcp_conn_peer(struct rb_conn *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s", to_conn(c)->peer);
}

static uint32_t tcp_conn_qpn(struct rb_conn *c)
{
	return to_conn(c)->qpn;
}

const struct rb_transport_ops rb_tcp_transport = {
	.name = "tcp",
	.domain_open = tcp_domain_open,
	.domain_close = tcp_domain_close,
	.reg_mr = tcp_reg_mr,
	.dereg_mr = tcp_dereg_mr,
	.cq_create = tcp_cq_create,
	.cq_destroy = tcp_cq_destroy,
	.cq_fd = tcp_cq_fd,
	.cq_arm = tcp_cq_arm,
	.cq_poll = tcp_cq_poll,
	.cq_cork = tcp_cq_cork,
	.cq_prepare_wait = tcp_cq_prepare_wait,
	.listen = tcp_listen,
	.listener_close = tcp_listener_close,
	.listener_fd = tcp_listener_fd,
	.listener_get = tcp_listener_get,
	.conn_domain = tcp_conn_domain,
	.accept = tcp_accept,
	.reject = tcp_reject,
	.conn_create = tcp_conn_create,
	.connect = tcp_connect,
	.disconnect = tcp_disconnect,
	.conn_destroy = tcp_conn_destroy,
	.post_recv = tcp_post_recv,
	.post_send = tcp_post_send,
	.post_read = tcp_post_read,
	.post_write = tcp_post_write,
	.conn_peer = tcp_conn_peer,
	.conn_mem = tcp_conn_mem,
	.conn_qpn = tcp_conn_qpn,
};
