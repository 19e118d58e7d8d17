/* SPDX-License-Identifier: MIT */
/*
 * "tcp" transport connection management: what both sides use (HELLO
 * headers, connection objects), the active connect, and destroy.  The
 * passive side is in transport_tcp_listen.c.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "transport_tcp_priv.h"

#define TCP_CONNECT_TIMEOUT_MS 10000

int tcp_gai_errno(int rc)
{
	switch (rc) {
	case EAI_NONAME:
#ifdef EAI_NODATA
	case EAI_NODATA:
#endif
		return -ENOENT;
	case EAI_AGAIN: return -EAGAIN;
	case EAI_MEMORY: return -ENOMEM;
	case EAI_FAMILY: return -EAFNOSUPPORT;
	case EAI_SYSTEM: return -errno;
	default: return -EINVAL;
	}
}

void tcp_hdr_cm(struct tcp_hdr *h, uint8_t type, size_t len)
{
	memset(h, 0, sizeof(*h));
	h->type = type;
	h->length = htole32((uint32_t)len);
	h->addr = htole64(TCP_HELLO_MAGIC);
}

struct tcp_conn *tcp_conn_alloc(struct tcp_domain *d, const struct rb_transport_opts *opts,
				enum tcp_state st)
{
	struct tcp_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	/* The registry's filled copy, so c->ops is the table the engine found. */
	c->pub.ops = rb_transport_find("tcp");
	if (!c->pub.ops)
		c->pub.ops = &rb_tcp_transport;
	c->fd = -1;
	c->state = st;
	c->dom = d;
	/* No opts: the same defaults as rdma (and as a config without them). */
	if (opts)
		c->opts = *opts;
	else
		rb_transport_opts_init(&c->opts);
	c->qpn = tcp_next_qpn();
	return c;
}
/* ---- active side ---------------------------------------------------------- */

int tcp_conn_create(const struct rb_endpoint *ep, const struct rb_transport_opts *opts,
		    struct rb_conn **out)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct tcp_domain *d;
	struct tcp_conn *c;
	char port[8];
	int rc, ret;

	if (!ep || !ep->host[0] || !ep->port || !out)
		return -EINVAL;
	ret = tcp_dom_get(opts, &d);
	if (ret)
		return ret;
	c = tcp_conn_alloc(d, opts, ST_RESOLVED);
	if (!c) {
		tcp_dom_put(d);
		return -ENOMEM;
	}
	snprintf(port, sizeof(port), "%u", ep->port);
	rc = getaddrinfo(ep->host, port, &hints, &c->ai);
	if (rc) {
		ret = tcp_gai_errno(rc);
		rb_err("tcp: resolve %s:%u: %s", ep->host, ep->port, gai_strerror(rc));
		tcp_dom_put(d);
		free(c);
		return ret;
	}
	tcp_format_addr(c->ai->ai_addr, c->peer, sizeof(c->peer));
	*out = &c->pub;
	return 0;
}

static int wait_fd(int fd, short events, uint64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	uint64_t now = rb_clock_ns();
	int n;

	if (now >= deadline)
		return -ETIMEDOUT;
	n = poll(&p, 1, (int)((deadline - now + 999999) / 1000000));
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n == 0 ? -ETIMEDOUT : 0;
}

static int io_exact(int fd, void *buf, size_t len, bool out, uint64_t deadline)
{
	size_t done = 0;
	ssize_t n;
	int ret;

	while (done < len) {
		if (out)
			n = send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
		else
			n = recv(fd, (char *)buf + done, len - done, MSG_DONTWAIT);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		ret = wait_fd(fd, out ? POLLOUT : POLLIN, deadline);
		if (ret)
			return ret;
	}
	return 0;
}

static int connect_one(const struct addrinfo *ai, uint64_t deadline)
{
	socklen_t sl = sizeof(int);
	int fd, ret, err = 0;

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0)
		return -errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	ret = -errno;
	if (ret == -EINPROGRESS) {
		ret = wait_fd(fd, POLLOUT, deadline);
		if (!ret && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
			err = errno;
		if (!ret && !err)
			return fd;
		if (!ret)
			ret = -err;
	}
	close(fd);
	return ret;
}

int tcp_connect(struct rb_conn *rc, struct rb_cq *cq, const struct rb_conn_caps *caps,
		const void *priv, size_t priv_len, void *rpriv, size_t *rpriv_len)
{
	struct tcp_conn *c = to_conn(rc);
	struct tcp_hdr *h = (struct tcp_hdr *)c->cm_buf;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int tmo = c->opts.connect_timeout_ms > 0 ? c->opts.connect_timeout_ms
						  : TCP_CONNECT_TIMEOUT_MS;
	uint64_t deadline = rb_clock_ns() + (uint64_t)tmo * 1000000ull;
	size_t cap = rpriv_len ? *rpriv_len : 0, len;
	int ret = -EHOSTUNREACH;

	if (rpriv_len)
		*rpriv_len = 0;
	if (c->state != ST_RESOLVED || !cq || priv_len > TCP_PRIV_CONNECT_MAX ||
	    (priv_len && !priv))
		return -EINVAL;
	for (const struct addrinfo *ai = c->ai; ai; ai = ai->ai_next) {
		ret = connect_one(ai, deadline);
		if (ret >= 0) {
			c->fd = ret;
			break;
		}
	}
	if (c->fd < 0) {
		rb_info("tcp %s: connect: %s", c->peer, strerror(-ret));
		return ret;
	}
	if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) == 0)
		tcp_format_addr((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
	tcp_hdr_cm(h, F_HELLO, priv_len);
	if (priv_len)
		memcpy(c->cm_buf + TCP_HDR_SIZE, priv, priv_len);
	ret = io_exact(c->fd, c->cm_buf, TCP_HDR_SIZE + priv_len, true, deadline);
	if (!ret)
		ret = io_exact(c->fd, c->cm_buf, TCP_HDR_SIZE, false, deadline);
	if (ret)
		goto out_close;
	len = le32toh(h->length);
	if ((h->type != F_HELLO_ACCEPT && h->type != F_HELLO_REJECT) ||
	    le64toh(h->addr) != TCP_HELLO_MAGIC || len > TCP_PRIV_MAX) {
		ret = -EPROTO;
		goto out_close;
	}
	/* Exactly the reply: frames the peer sends after it stay in the socket. */
	ret = io_exact(c->fd, c->cm_buf + TCP_HDR_SIZE, len, false, deadline);
	if (ret)
		goto out_close;
	if (rpriv && rpriv_len) {
		*rpriv_len = len < cap ? len : cap;
		memcpy(rpriv, c->cm_buf + TCP_HDR_SIZE, *rpriv_len);
	}
	if (h->type == F_HELLO_REJECT) {
		rb_dbg("tcp %s: connection rejected", c->peer);
		close(c->fd);
		c->fd = -1;
		return -ECONNREFUSED;
	}
	ret = tcp_conn_attach(c, (struct tcp_cq *)cq, caps);
	if (ret)
		goto out_close;
	c->state = ST_CONNECTED;
	rb_dbg("tcp %s: connected", c->peer);
	return 0;

out_close:
	rb_info("tcp %s: connect: %s", c->peer,
		ret == -EPROTO ? "peer is not an rdmablk tcp listener" : strerror(-ret));
	tcp_conn_free_pool(c);
	close(c->fd);
	c->fd = -1;
	if (rpriv_len)
		*rpriv_len = 0;
	return ret;
}

void tcp_conn_destroy(struct rb_conn *rc)
{
	struct tcp_conn *c = to_conn(rc);

	if (!c)
		return;
	tcp_conn_detach(c);
	if (c->fd >= 0)
		close(c->fd);
	if (c->ai)
		freeaddrinfo(c->ai);
	tcp_conn_free_pool(c);
	tcp_dom_put(c->dom);
	free(c);
}
