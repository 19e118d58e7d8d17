/* SPDX-License-Identifier: MIT */
/*
 * "tcp" transport, passive side: listener, HELLO handshake, accept/reject.
 *
 * The listener never blocks: accepted sockets are non-blocking and sit in
 * the listener's own epoll set (that is listener_fd) until their HELLO has
 * fully arrived; listener_get returns -EAGAIN meanwhile.  A socket whose
 * HELLO is not complete within TCP_HELLO_TIMEOUT_MS (TCP_HELLO_TIMEOUT_SHORT_MS
 * while the table of them is 3/4 full, for sources holding several) is closed
 * when a timerfd in the same set fires.  A connect flood must not crowd out honest peers: a HELLO that
 * came with the connection takes no slot; one source address (an IPv6 /64)
 * holds at most a quarter of opts.max_half_open and, at its share, loses
 * its own oldest; a full table drops from the source holding the most; a
 * socket that sent part of a valid HELLO goes after the silent ones; and
 * bytes that cannot start a HELLO close the socket as they arrive.
 *
 * Port 0 binds an ephemeral port (logged); callers that need to know the
 * port pick a free one themselves.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "log_limit.h"
#include "transport_tcp_priv.h"

RB_FIFO_DECLARE(tcp_conn_q, struct tcp_conn);

struct tcp_listener {
	int lfd, epfd, tfd;
	struct tcp_domain *dom;
	struct rb_transport_opts opts;
	struct tcp_conn_q half; /* sockets waiting for HELLO, oldest first */
	struct tcp_conn_q ready; /* HELLO complete, not handed out yet */
	unsigned int max; /* opts.max_half_open */
	struct tcp_src {
		uint64_t key; /* 0: free */
		unsigned int n; /* its connections in half */
	} *src; /* open addressing, at least twice max slots */
	size_t src_mask;
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
	l->max = l->opts.max_half_open > 0 ? (unsigned int)l->opts.max_half_open :
					     RB_MAX_HALF_OPEN_DEFAULT;
	for (l->src_mask = 15; l->src_mask < 2 * (size_t)l->max; l->src_mask = l->src_mask * 2 + 1)
		;
	l->src = calloc(l->src_mask + 1, sizeof(*l->src));
	ret = l->src ? tcp_dom_get(opts, &l->dom) : -ENOMEM;
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
	free(l->src);
	free(l);
	return ret;
}

static void half_free(struct tcp_conn *c)
{
	close(c->fd);
	tcp_dom_put(c->dom);
	free(c);
}

/* ---- half-open connections per source address ---------------------------- */

static uint64_t src_key(const struct sockaddr *sa)
{
	const uint8_t *b = NULL;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	size_t n = 0;

	if (sa->sa_family == AF_INET) {
		b = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
		n = 4;
	} else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		/* IPv4 peers of a dual-stack listener count as IPv4; an IPv6
		 * peer has a /64 to pick addresses from, so that is its source. */
		b = IN6_IS_ADDR_V4MAPPED(a) ? &a->s6_addr[12] : a->s6_addr;
		n = IN6_IS_ADDR_V4MAPPED(a) ? 4 : 8;
	}
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h ? h : 1;
}

static size_t src_home(const struct tcp_listener *l, uint64_t key)
{
	return (size_t)((key ^ (key >> 29)) & l->src_mask);
}

/* key's slot, or the empty slot where it would go (the table is never full). */
static size_t src_find(const struct tcp_listener *l, uint64_t key)
{
	size_t i = src_home(l, key);

	while (l->src[i].key && l->src[i].key != key)
		i = (i + 1) & l->src_mask;
	return i;
}

static unsigned int src_count(const struct tcp_listener *l, uint64_t key)
{
	return l->src[src_find(l, key)].n;
}

static void src_add(struct tcp_listener *l, uint64_t key)
{
	size_t i = src_find(l, key);

	l->src[i].key = key;
	l->src[i].n++;
}

static void src_del(struct tcp_listener *l, uint64_t key)
{
	size_t i = src_find(l, key), j = i;

	if (!l->src[i].key || --l->src[i].n)
		return;
	/* Linear probing: move later entries back over the hole. */
	for (;;) {
		size_t k;

		j = (j + 1) & l->src_mask;
		if (!l->src[j].key)
			break;
		k = src_home(l, l->src[j].key);
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		l->src[i] = l->src[j];
		i = j;
	}
	l->src[i].key = 0;
	l->src[i].n = 0;
}

/* The source with the most half-open connections (the table is full); 0
 * when none holds more than one. */
static uint64_t src_hog(const struct tcp_listener *l)
{
	uint64_t key = 0;
	unsigned int most = 1;

	for (size_t i = 0; i <= l->src_mask; i++)
		if (l->src[i].key && l->src[i].n > most) {
			most = l->src[i].n;
			key = l->src[i].key;
		}
	return key;
}

/* Half-open connections one source address may hold. */
static unsigned int src_share(const struct tcp_listener *l)
{
	return l->max / 4 ? l->max / 4 : 1;
}

/*
 * c's HELLO deadline in ms: short while the table is 3/4 full, for sources
 * that hold several half-open connections.  An honest host has one or two
 * pending at a time, and on a loaded machine may take a while to send its
 * HELLO; a flood needs many.
 */
static unsigned int hello_timeout_ms(const struct tcp_listener *l, const struct tcp_conn *c)
{
	bool pressure = (uint64_t)l->half.n * 4 >= (uint64_t)l->max * 3;
	unsigned int several = src_share(l) < TCP_HELLO_SHORT_FROM ? src_share(l) :
								    TCP_HELLO_SHORT_FROM;

	return pressure && src_count(l, c->src) >= several ?
		       TCP_HELLO_TIMEOUT_SHORT_MS :
		       TCP_HELLO_TIMEOUT_MS;
}

/* The peer's address without the port: log lines are limited per source,
 * so that a flood from one cannot use up the lines about another. */
static const char *log_key(const struct tcp_conn *c, char *buf, size_t len)
{
	const char *colon = strrchr(c->peer, ':');

	snprintf(buf, len, "%.*s", colon ? (int)(colon - c->peer) : (int)strlen(c->peer),
		 c->peer);
	return buf;
}

static void half_unlink(struct tcp_listener *l, struct tcp_conn *c)
{
	struct tcp_conn *t, *prev = NULL;

	for (t = l->half.head; t; prev = t, t = t->next) {
		if (t == c) {
			rb_fifo_unlink(&l->half, prev, c);
			src_del(l, c->src);
			break;
		}
	}
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
}

/* Due at the earliest deadline.  The list is in accept order and no
 * deadline is shorter than the short one, so the walk stops early. */
static void arm_timer(struct tcp_listener *l)
{
	const uint64_t short_ns = TCP_HELLO_TIMEOUT_SHORT_MS * 1000000ull;
	struct itimerspec its = { 0 };
	uint64_t due = UINT64_MAX;

	for (struct tcp_conn *c = l->half.head; c && c->accepted_ns + short_ns < due; c = c->next) {
		uint64_t d = c->accepted_ns + hello_timeout_ms(l, c) * 1000000ull;

		if (d < due)
			due = d;
	}
	if (due != UINT64_MAX) {
		its.it_value.tv_sec = (time_t)(due / 1000000000ull);
		its.it_value.tv_nsec = (long)(due % 1000000000ull);
	}
	if (timerfd_settime(l->tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		rb_err("tcp: listener timer: %s", strerror(errno));
}

static void expire(struct tcp_listener *l)
{
	static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("tcp: no HELLO in time", RB_LOG_WARN);
	const uint64_t short_ns = TCP_HELLO_TIMEOUT_SHORT_MS * 1000000ull;
	uint64_t now = rb_clock_ns(), v;
	struct tcp_conn *c, *next;
	char key[80];

	if (read(l->tfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		rb_err("tcp: listener timer read: %s", strerror(errno));
	for (c = l->half.head; c && c->accepted_ns + short_ns <= now; c = next) {
		unsigned int ms = hello_timeout_ms(l, c);

		next = c->next;
		if (c->accepted_ns + ms * 1000000ull > now)
			continue;
		rb_log_limited(&lim, log_key(c, key, sizeof(key)), RB_LOG_WARN,
			       "tcp %s: no HELLO within %u ms (%zu bytes of it), closing%s", c->peer,
			       ms, c->cm_got,
			       ms < TCP_HELLO_TIMEOUT_MS ? " (shorter deadline: the half-open table "
							   "is nearly full and this address holds "
							   "several)" :
							   "");
		half_unlink(l, c);
		half_free(c);
	}
	arm_timer(l);
}

/* The bytes of a HELLO header received so far match what a HELLO has there. */
static bool hello_prefix_ok(const struct tcp_conn *c)
{
	const size_t moff = offsetof(struct tcp_hdr, addr);
	uint64_t m = htole64(TCP_HELLO_MAGIC);
	uint8_t magic[8];

	if (c->cm_got >= 1 && c->cm_buf[0] != F_HELLO)
		return false;
	memcpy(magic, &m, sizeof(magic));
	for (size_t i = moff; i < c->cm_got && i < moff + sizeof(magic); i++)
		if (c->cm_buf[i] != magic[i - moff])
			return false;
	return true;
}

/* Read exactly the HELLO, never past it: 0 when complete, -EAGAIN, or error.
 * Each byte is checked as it comes, so garbage is closed at once. */
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
		if (!hello_prefix_ok(c))
			return -EPROTO;
		if (c->cm_got == TCP_HDR_SIZE) {
			if (le32toh(h->length) > TCP_PRIV_CONNECT_MAX)
				return -EPROTO;
			c->cm_len = le32toh(h->length);
		}
	}
}

/* A HELLO that failed: log (rate-limited: a peer can do this at will), free. */
static void hello_failed(struct tcp_conn *c, int err)
{
	static struct rb_log_limit bad = RB_LOG_LIMIT_INIT("tcp: bad HELLO", RB_LOG_WARN);
	static struct rb_log_limit gone = RB_LOG_LIMIT_INIT("tcp: closed before HELLO",
							    RB_LOG_INFO);

	char key[80];

	if (err == -EPROTO)
		rb_log_limited(&bad, log_key(c, key, sizeof(key)), RB_LOG_WARN,
			       "tcp %s: bad HELLO: not an rdmablk tcp peer (%zu bytes read)",
			       c->peer, c->cm_got);
	else
		rb_log_limited(&gone, log_key(c, key, sizeof(key)), RB_LOG_INFO,
			       "tcp %s: closed before HELLO: %s",
			       c->peer, strerror(-err));
	half_free(c);
}

/*
 * The connection to drop for room: src's (any source's when src is 0)
 * oldest that has sent nothing, else its oldest.  A peer that sent part
 * of a valid HELLO goes only when none of the silent ones can.
 */
static struct tcp_conn *pick_victim(const struct tcp_listener *l, uint64_t src)
{
	struct tcp_conn *c, *oldest = NULL;

	for (c = l->half.head; c; c = c->next) {
		if (src && c->src != src)
			continue;
		if (!c->cm_got)
			return c;
		if (!oldest)
			oldest = c;
	}
	return oldest;
}

/*
 * Make room for a connection from src: a source at its share loses its own
 * oldest; in a full table the source with the most loses one.  The victim
 * is read first: if its HELLO is there after all it is handed out, not
 * dropped.
 */
static void make_room(struct tcp_listener *l, uint64_t src)
{
	static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("tcp: half-open connection dropped",
							   RB_LOG_WARN);
	unsigned int share = src_share(l), mine = src_count(l, src);
	struct tcp_conn *c;
	char key[80];
	uint64_t from;
	int ret;

	if (mine >= share)
		from = src;
	else if (l->half.n >= l->max)
		from = src_hog(l); /* 0 when every source holds one: any */
	else
		return;
	c = pick_victim(l, from);
	if (!c)
		return;
	half_unlink(l, c);
	ret = hello_progress(c);
	if (ret == 0) {
		rb_fifo_push(&l->ready, c);
		return;
	}
	if (ret != -EAGAIN) {
		hello_failed(c, ret);
		return;
	}
	rb_log_limited(&lim, log_key(c, key, sizeof(key)), RB_LOG_WARN,
		       "tcp %s: too many connections without HELLO (%u from this address, share "
		       "%u of %u): closing this one (%zu bytes of HELLO so far)",
		       c->peer, src_count(l, c->src) + 1, share, l->max, c->cm_got);
	half_free(c);
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
	c->src = src_key((struct sockaddr *)&ss);
	c->accepted_ns = rb_clock_ns();
	/* An honest peer's HELLO is usually here already: it needs no slot. */
	ret = hello_progress(c);
	if (ret == 0) {
		rb_fifo_push(&l->ready, c);
		return 0;
	}
	if (ret != -EAGAIN) {
		hello_failed(c, ret);
		return 0;
	}
	make_room(l, c->src);
	ev.data.ptr = c;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		ret = -errno;
		half_free(c);
		return ret;
	}
	rb_fifo_push(&l->half, c);
	src_add(l, c->src);
	arm_timer(l);
	return 0;
out_close:
	close(fd);
	return ret;
}

/* Hand out c, whose HELLO is complete. */
static int hand_out(struct tcp_conn *c, struct rb_conn **out, const void **priv,
		    size_t *priv_len)
{
	c->state = ST_REQUEST;
	*out = &c->pub;
	if (priv)
		*priv = c->cm_buf + TCP_HDR_SIZE;
	if (priv_len)
		*priv_len = c->cm_len;
	return 0;
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
		c = rb_fifo_pop(&l->ready);
		if (c)
			return hand_out(c, out, priv, priv_len);
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
		arm_timer(l);
		if (ret) {
			hello_failed(c, ret);
			continue;
		}
		return hand_out(c, out, priv, priv_len);
	}
	c = rb_fifo_pop(&l->ready);
	return c ? hand_out(c, out, priv, priv_len) : -EAGAIN;
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
	while (l->ready.head)
		half_free(rb_fifo_pop(&l->ready));
	free(l->src);
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
