/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the tcp transport's receive side: the input is what
 * a peer sends after a valid HELLO.  Each run accepts a fresh connection on
 * a loopback listener, posts receives, writes the input from a raw socket,
 * closes it, and drives the CQ until the connection is gone.
 *
 * So that frames get past the key check and exercise placement, the input
 * is walked as frames and two placeholder rkeys are replaced: 0xffffffff by
 * the key of a remotely writable region, 0xfffffffe by that of a remotely
 * readable one, and WRITE / READ_REQ addresses below 64 KiB become offsets
 * into the region the key names (so in- and out-of-bounds both occur).
 *
 * Invariants: nothing crashes or touches memory it should not (ASan), and
 * every posted receive completes exactly once.
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "checked.h"
#include "log.h"
#include "transport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REGION (64u << 10)
#define NRECV 8
#define RECV_SZ 256 /* two sges of this each */
#define HDR 32
#define MAGIC 0x5242544350000001ull
#define MAX_INPUT (256u << 10)

struct fz_recv {
	struct rb_cqe cqe;
	int done;
};

static const struct rb_transport_ops *T;
static struct rb_domain *dom;
static struct rb_listener *lst;
static struct rb_cq *cq;
static uint16_t port;
static uint8_t *wreg, *rreg, *rcv;
static struct rb_mr *wmr, *rmr, *rcvmr;
static struct fz_recv recvs[NRECV];
static int completions;

static void recv_done(struct rb_cq *c, struct rb_wc *wc)
{
	struct fz_recv *r = rb_container_of(wc->cqe, struct fz_recv, cqe);

	(void)c;
	if (r->done++)
		abort(); /* a receive completed twice */
	completions++;
}

static uint16_t pick_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0)
		abort();
	close(fd);
	return ntohs(sa.sin_port);
}

static void setup(void)
{
	struct rb_transport_opts o = { .tos = -1, .ack_timeout = -1, .retry_count = -1,
				       .rnr_retry = -1 };
	struct rb_endpoint ep = { .host = "127.0.0.1" };

	rb_log_init("fuzz-tcp", RB_LOG_ERR); /* every bad frame is logged: keep quiet */
	T = rb_transport_find("tcp");
	if (!T || T->domain_open(&o, &dom) || T->cq_create(dom, 64, &cq))
		abort();
	wreg = calloc(1, REGION);
	rreg = calloc(1, REGION);
	rcv = calloc(1, NRECV * 2 * RECV_SZ);
	if (!wreg || !rreg || !rcv ||
	    T->reg_mr(dom, wreg, REGION, RB_ACCESS_REMOTE_WRITE, &wmr) ||
	    T->reg_mr(dom, rreg, REGION, RB_ACCESS_REMOTE_READ, &rmr) ||
	    T->reg_mr(dom, rcv, NRECV * 2 * RECV_SZ, RB_ACCESS_LOCAL, &rcvmr))
		abort();
	for (int tries = 0;; tries++) {
		ep.port = port = pick_port();
		if (!T->listen(&ep, &o, &lst))
			break;
		if (tries == 20)
			abort();
	}
}

/* The input with placeholder keys and addresses filled in. */
static size_t rewrite(const uint8_t *in, size_t size, uint8_t *out)
{
	size_t at = 0;

	memcpy(out, in, size);
	while (size - at >= HDR) {
		uint8_t *h = out + at;
		uint32_t len, rkey;
		uint64_t addr;

		memcpy(&len, h + 4, 4);
		memcpy(&rkey, h + 12, 4);
		memcpy(&addr, h + 24, 8);
		len = le32toh(len);
		rkey = le32toh(rkey);
		addr = le64toh(addr);
		if (rkey == 0xffffffffu || rkey == 0xfffffffeu) {
			const struct rb_mr *mr = rkey == 0xffffffffu ? wmr : rmr;

			rkey = htole32(mr->rkey);
			memcpy(h + 12, &rkey, 4);
			if (addr < REGION) {
				addr = htole64((uint64_t)(uintptr_t)mr->addr + addr);
				memcpy(h + 24, &addr, 8);
			}
		}
		at += HDR;
		/* READ_REQ's length is what it asks for; nothing follows it. */
		if (h[0] != 6)
			at += len < size - at ? len : size - at;
	}
	return size;
}

static void poll_cq(void)
{
	struct rb_wc wc[16];
	int n;

	while ((n = T->cq_poll(cq, wc, 16)) > 0)
		for (int i = 0; i < n; i++)
			wc[i].cqe->done(cq, &wc[i]);
}

/* Read and drop what the transport sends back (ACKs, READ responses). */
static void drain_peer(int fd)
{
	uint8_t sink[16384];

	while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
}

static struct rb_conn *accept_one(int *peer)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint8_t hello[HDR + 8] = { 1 };
	uint64_t magic = htole64(MAGIC);
	uint32_t plen = htole32(8);
	const struct rb_conn_caps caps = { .max_send_wr = 64, .max_recv_wr = NRECV, .max_sge = 2 };
	struct rb_conn *c = NULL;
	const void *priv;
	size_t priv_len;
	int fd;

	memcpy(hello + 4, &plen, 4);
	memcpy(hello + 24, &magic, 8);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(fd, hello, sizeof(hello), MSG_NOSIGNAL) != (ssize_t)sizeof(hello))
		abort();
	for (int i = 0; i < 2000 && T->listener_get(lst, &c, &priv, &priv_len); i++) {
		struct pollfd p = { .fd = T->listener_fd(lst), .events = POLLIN };

		poll(&p, 1, 1);
	}
	if (!c || T->accept(c, cq, &caps, NULL, 0))
		abort();
	*peer = fd;
	return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t buf[MAX_INPUT];
	struct rb_conn *c;
	size_t len, off = 0;
	int fd, posted = 0;

	if (size > MAX_INPUT)
		return 0;
	if (!T)
		setup();
	c = accept_one(&fd);
	completions = 0;
	for (int i = 0; i < NRECV; i++) {
		struct rb_sge sg[2] = {
			{ .addr = rcv + (2 * i) * RECV_SZ, .length = RECV_SZ, .lkey = rcvmr->lkey },
			{ .addr = rcv + (2 * i + 1) * RECV_SZ, .length = RECV_SZ,
			  .lkey = rcvmr->lkey },
		};

		recvs[i] = (struct fz_recv){ .cqe.done = recv_done };
		if (T->post_recv(c, &recvs[i].cqe, sg, 2))
			abort();
		posted++;
	}
	len = rewrite(data, size, buf);
	/* Feed it while the transport reads, so a large input cannot wedge. */
	while (off < len) {
		ssize_t n = send(fd, buf + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			break; /* the transport closed on a bad frame */
		poll_cq();
		drain_peer(fd);
	}
	shutdown(fd, SHUT_WR);
	/* Until the transport has seen the end of the stream (or closed). */
	for (int i = 0; i < 200 && completions < posted; i++) {
		struct pollfd p = { .fd = T->cq_fd(cq), .events = POLLIN };

		poll_cq();
		drain_peer(fd);
		poll(&p, 1, 1);
	}
	T->disconnect(c);
	for (int i = 0; i < 200 && completions < posted; i++)
		poll_cq();
	if (completions != posted)
		abort(); /* a receive never completed, not even flushed */
	T->conn_destroy(c);
	close(fd);
	return 0;
}
