/* SPDX-License-Identifier: MIT */
/*
 * "tcp" transport, passive side: listener, HELLO handshake, accept/reject.
 *
 * The listener never blocks: accepted sockets are non-blocking and sit in
 * the listener's own epoll set (that is listener_fd) until their HELLO has
 * fully arrived; listener_get returns -EAGAIN meanwhile.  A socket whose
 * HELLO is not complete within TCP_HELLO_TIMEOUT_MS is closed when a
 * timerfd in the same set fires.  Port 0 binds an ephemeral port (logged);
 * callers that need to know the port pick a free one themselves.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "transport_tcp_priv.h"

RB_FIFO_DECLARE(tcp_conn_q, struct tcp_conn);

struct tcp_listener {
	int lfd, epfd, tfd;
	struct tcp_domain *dom;
	struct rb_transport_opts opts;
	struct tcp_conn_q half; /* sockets waiting for HELLO, oldest first */
	char name[80];
};

static struct tcp_listener *to_lst(struct rb_listener *l)
{
	return (struct tcp_listener *)l;
}

static int bind_listen(const struct addrinfo *ai, bool any6)
{
	int one = 1, zero = 0, fd, ret;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		goto out_err;
	/* "" and "::" take IPv4 too, whatever net.ipv6.bindv6only says. */
	if (any6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0)
		goto out_err;
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0)
		goto out_err;
	return fd;
out_err:
	ret = -errno;
	close(fd);
	return ret;
}

static int open_listen_socket(const struct rb_endpoint *ep)
{
	struct addrinfo hints = {
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	};
	struct addrinfo *res, *ai;
	const char *host = ep->host[0] ? ep->host : NULL;
	char port[8];
	int rc, fd = -EADDRNOTAVAIL;

	snprintf(port, sizeof(port), "%u", ep->port);
	if (!host) {
		/* Any address: dual-stack IPv6 first, plain IPv4 if there is no IPv6. */
		hints.ai_family = AF_INET6;
		if (getaddrinfo(NULL, port, &hints, &res) == 0) {
			fd = bind_listen(res, true);
			freeaddrinfo(res);
			if (fd >= 0 || (fd != -EAFNOSUPPORT && fd != -EADDRNOTAVAIL))
				return fd;
		}
		hints.ai_family = AF_INET;
	}
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc) {
		rb_err("tcp: listen %s:%u: %s", ep->host, ep->port, gai_strerror(rc));
		return tcp_gai_errno(rc);
	}
	for (ai = res; ai; ai = ai->ai_next) {
		bool any6 = false;

		if (ai->ai_family == AF_INET6) {
			const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ai->ai_addr;

			any6 = IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr);
		}
		fd = bind_listen(ai, any6);
		if (fd >= 0)
			break;
	}
	freeaddrinfo(res);
	return fd;
}

int tcp_listen(const struct rb_endpoint *ep, const struct rb_transport_opts *opts,
	       struct rb_listener **out)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct tcp_listener *l;
	int ret;

	if (!ep || !out)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->epfd = l->tfd = -1;
	if (opts)
		l->opts = *opts;
	else
		rb_transport_opts_init(&l->opts);
	ret = tcp_dom_get(opts, &l->dom);
	if (ret)
		goto out_free;
	l->lfd = open_listen_socket(ep);
	if (l->lfd < 0) {
		ret = l->lfd;
		rb_err("tcp: listen on %s:%u: %s", ep->host, ep->port, strerror(-ret));
		goto out_put;
	}
	if (getsockname(l->lfd, (struct sockaddr *)&ss, &sl) == 0)
		tcp_format_addr((struct sockaddr *)&ss, l->name, sizeof(l->name));
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->epfd < 0 || l->tfd < 0)
		goto out_errno;
	ev.data.ptr = &l->lfd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->lfd, &ev) < 0)
		goto out_errno;
	ev.data.ptr = &l->tfd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->tfd, &ev) < 0)
		goto out_errno;
	rb_info("tcp: listening on %s", l->name);
	*out = (struct rb_listener *)l;
	return 0;

out_errno:
	ret = -errno;
	rb_err("tcp: listener setup: %s", strerror(-ret));
	if (l->tfd >= 0)
		close(l->tfd);
	if (l->epfd >= 0)
		close(l->epfd);
	close(l->lfd);
out_put:
	tcp_dom_put(l->dom);
out_free:
	free(l);
	return ret;
}

static void half_free(struct tcp_conn *c)
{
	close(c->fd);
	tcp_dom_put(c->dom);
	free(c);
}

static void half_unlink(struct tcp_listener *l, struct tcp_conn *c)
{
	struct tcp_conn *t, *prev = NULL;

	for (t = l->half.head; t; prev = t, t = t->next) {
		if (t == c) {
			rb_fifo_unlink(&l->half, prev, c);
			break;
		}
	}
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
}

static void arm_timer(struct tcp_listener *l)
{
	struct itimerspec its = { 0 };

	if (l->half.head) {
		its.it_value.tv_sec = (time_t)(l->half.head->deadline_ns / 1000000000ull);
		its.it_value.tv_nsec = (long)(l->half.head->deadline_ns % 1000000000ull);
	}
	if (timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		rb_err("tcp: listener timer: %s", strerror(errno));
}

static void expire(struct tcp_listener *l)
{
	uint64_t now = rb_clock_ns(), v;

	if (read(l->tfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		rb_err("tcp: listener timer read: %s", strerror(errno));
	while (l->half.head && l->half.head->deadline_ns <= now) {
		struct tcp_conn *c = l->half.head;

		rb_warn("tcp %s: no HELLO within %d ms, closing", c->peer, TCP_HELLO_TIMEOUT_MS);
		half_unlink(l, c);
		half_free(c);
	}
	arm_timer(l);
}

static int accept_one(struct tcp_listener *l)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct tcp_conn *c;
	struct tcp_domain *d;
	int fd, ret;

	fd = accept4(l->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
		    errno == ECONNABORTED)
			return 0;
		ret = -errno;
		rb_err("tcp: accept on %s: %s", l->name, strerror(-ret));
		return ret;
	}
	if (l->half.n >= TCP_MAX_HALF_OPEN) {
		rb_warn("tcp %s: too many connections without HELLO, dropping oldest",
			l->half.head->peer);
		c = l->half.head;
		half_unlink(l, c);
		half_free(c);
	}
	ret = tcp_dom_get(&l->opts, &d);
	if (ret)
		goto out_close;
	c = tcp_conn_alloc(d, &l->opts, ST_HELLO);
	if (!c) {
		tcp_dom_put(d);
		ret = -ENOMEM;
		goto out_close;
	}
	c->fd = fd;
	tcp_format_addr((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
	c->deadline_ns = rb_clock_ns() + TCP_HELLO_TIMEOUT_MS * 1000000ull;
	ev.data.ptr = c;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		ret = -errno;
		half_free(c);
		return ret;
	}
	rb_fifo_push(&l->half, c);
	if (l->half.n == 1)
		arm_timer(l);
	return 0;
out_close:
	close(fd);
	return ret;
}

/* Read exactly the HELLO, never past it: 0 when complete, -EAGAIN, or error. */
static int hello_progress(struct tcp_conn *c)
{
	const struct tcp_hdr *h = (const struct tcp_hdr *)c->cm_buf;
	ssize_t n;

	for (;;) {
		size_t want = c->cm_got < TCP_HDR_SIZE ? TCP_HDR_SIZE : TCP_HDR_SIZE + c->cm_len;

		if (c->cm_got >= TCP_HDR_SIZE && c->cm_got == want)
			return 0;
		n = recv(c->fd, c->cm_buf + c->cm_got, want - c->cm_got, 0);
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN
											   : -errno;
		if (n == 0)
			return -ECONNRESET;
		c->cm_got += (size_t)n;
		if (c->cm_got == TCP_HDR_SIZE) {
			if (h->type != F_HELLO || le64toh(h->addr) != TCP_HELLO_MAGIC ||
			    le32toh(h->length) > TCP_PRIV_CONNECT_MAX)
				return -EPROTO;
			c->cm_len = le32toh(h->length);
		}
	}
}

int tcp_listener_get(struct rb_listener *rl, struct rb_conn **out, const void **priv,
		     size_t *priv_len)
{
	struct tcp_listener *l = to_lst(rl);
	struct epoll_event ev;
	struct tcp_conn *c;
	int n, ret;

	/* One event per epoll_wait: handling one may free the conn another
	 * names.  Level triggered, so nothing is lost. */
	for (int round = 0; round < 64; round++) {
		n = epoll_wait(l->epfd, &ev, 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EAGAIN;
		if (ev.data.ptr == &l->lfd) {
			ret = accept_one(l);
			if (ret)
				return ret;
			continue;
		}
		if (ev.data.ptr == &l->tfd) {
			expire(l);
			continue;
		}
		c = ev.data.ptr;
		ret = hello_progress(c);
		if (ret == -EAGAIN)
			continue;
		half_unlink(l, c);
		if (!l->half.head)
			arm_timer(l);
		if (ret) {
			if (ret == -EPROTO)
				rb_warn("tcp %s: bad HELLO: not an rdmablk tcp peer", c->peer);
			else
				rb_info("tcp %s: closed before HELLO: %s", c->peer, strerror(-ret));
			half_free(c);
			continue;
		}
		c->state = ST_REQUEST;
		*out = &c->pub;
		if (priv)
			*priv = c->cm_buf + TCP_HDR_SIZE;
		if (priv_len)
			*priv_len = c->cm_len;
		return 0;
	}
	return -EAGAIN;
}

int tcp_listener_fd(struct rb_listener *l)
{
	return to_lst(l)->epfd;
}

void tcp_listener_close(struct rb_listener *rl)
{
	struct tcp_listener *l = to_lst(rl);

	if (!l)
		return;
	while (l->half.head) {
		struct tcp_conn *c = l->half.head;

		half_unlink(l, c);
		half_free(c);
	}
	close(l->tfd);
	close(l->epfd);
	close(l->lfd);
	tcp_dom_put(l->dom);
	free(l);
}

int tcp_accept(struct rb_conn *rc, struct rb_cq *cq, const struct rb_conn_caps *caps,
	       const void *priv, size_t priv_len)
{
	struct tcp_conn *c = to_conn(rc);
	struct tcp_wr *w;
	int ret;

	if (c->state != ST_REQUEST || !cq || priv_len > TCP_PRIV_ACCEPT_MAX || (priv_len && !priv))
		return -EINVAL;
	ret = tcp_conn_attach(c, (struct tcp_cq *)cq, caps);
	if (ret)
		goto out_err;
	w = tcp_wr_get(c);
	if (!w) {
		ret = -ENOMEM;
		goto out_detach;
	}
	/* The peer's HELLO data is no longer needed: its buffer carries ours. */
	if (priv_len)
		memmove(c->cm_buf, priv, priv_len);
	w->kind = W_CTRL;
	w->len = priv_len;
	w->nsge = priv_len ? 1 : 0;
	w->iov[0].iov_base = c->cm_buf;
	w->iov[0].iov_len = priv_len;
	tcp_hdr_cm(&w->hdr, F_HELLO_ACCEPT, priv_len);
	tcp_tx_queue(c, w);
	c->state = ST_CONNECTED;
	tcp_tx_progress(c);
	rb_dbg("tcp %s: accepted", c->peer);
	return 0;

out_detach:
	tcp_conn_detach(c);
out_err:
	rb_err("tcp %s: accept: %s", c->peer, strerror(-ret));
	return ret;
}

int tcp_reject(struct rb_conn *rc, const void *priv, size_t priv_len)
{
	struct tcp_conn *c = to_conn(rc);
	uint8_t buf[TCP_HDR_SIZE + TCP_PRIV_REJECT_MAX];
	int ret = 0;

	if (c->state != ST_REQUEST || priv_len > TCP_PRIV_REJECT_MAX || (priv_len && !priv)) {
		ret = -EINVAL;
		priv_len = 0;
	}
	tcp_hdr_cm((struct tcp_hdr *)buf, F_HELLO_REJECT, priv_len);
	if (priv_len)
		memcpy(buf + TCP_HDR_SIZE, priv, priv_len);
	/* A fresh socket always has room for this; a failure only costs the
	 * peer its reject data. */
	if (c->state == ST_REQUEST &&
	    send(c->fd, buf, TCP_HDR_SIZE + priv_len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		rb_info("tcp %s: reject: %s", c->peer, strerror(errno));
	tcp_conn_destroy(rc);
	return ret;
}
