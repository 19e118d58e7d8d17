/* SPDX-License-Identifier: MIT */
/*
 * "rdma" transport connection management (librdmacm, RDMA_PS_TCP).
 *
 * Event channels: a listener has its own (that is listener_fd); the
 * requests it yields stay on it until accept migrates their cm_id to the
 * CQ's channel.  An active connection resolves and connects on a private
 * channel (blocking, bounded by opts->connect_timeout_ms) and moves to the
 * CQ's channel once established.  From then on its CM events (DISCONNECTED,
 * DEVICE_REMOVAL, ...) are handled inside cq_poll by rd_cm_event.
 *
 * Private data is framed (see RD_PRIV_MAGIC) so the peer gets the length
 * that was sent, not the size of the IB CM field.  A REJECTED event
 * carries the peer's data only for a consumer reject (IB CM reason 28);
 * any other reject (no listener on that port, ...) comes back without it.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "transport_rdma_priv.h"

#define IB_CM_REJ_CONSUMER_DEFINED 28

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int timeout_ms(const struct rb_transport_opts *o)
{
	return o->connect_timeout_ms > 0 ? o->connect_timeout_ms : RD_DEFAULT_TIMEOUT_MS;
}

static int left_ms(uint64_t deadline)
{
	uint64_t now = now_ms();

	return now >= deadline ? 0 : (int)(deadline - now);
}

static size_t priv_frame(uint8_t *buf, const void *priv, size_t len)
{
	buf[0] = RD_PRIV_MAGIC;
	buf[1] = (uint8_t)len;
	if (len)
		memcpy(buf + RD_PRIV_HDR, priv, len);
	return RD_PRIV_HDR + len;
}

/* false: not framed by an rdmablk peer */
static bool priv_unframe(const void *data, size_t len, const uint8_t **out, size_t *olen)
{
	const uint8_t *p = data;

	if (!p || len < RD_PRIV_HDR || p[0] != RD_PRIV_MAGIC || p[1] > len - RD_PRIV_HDR)
		return false;
	*out = p + RD_PRIV_HDR;
	*olen = p[1];
	return true;
}

static uint8_t min3_u8(int a, int b, int c)
{
	int m = a < b ? a : b;

	m = m < c ? m : c;
	return (uint8_t)(m < 0 ? 0 : m > 255 ? 255 : m);
}

static uint8_t retry_val(int v, int def)
{
	return (uint8_t)(v < 0 ? def : v > 7 ? 7 : v);
}

static void set_u8_option(struct rdma_cm_id *id, int name, int v, const char *what,
			  const char *who)
{
	uint8_t u = (uint8_t)v;

	if (v < 0)
		return;
	if (rdma_set_option(id, RDMA_OPTION_ID, name, &u, sizeof(u)))
		rb_warn("rdma %s: set %s %d: %s", who, what, v, strerror(errno));
}

static struct rd_conn *conn_alloc(const struct rb_transport_opts *opts, enum rd_state st)
{
	struct rd_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	/* The registry's filled copy, so c->ops is the table the engine found. */
	c->pub.ops = rb_transport_find("rdma");
	if (!c->pub.ops)
		c->pub.ops = &rb_rdma_transport;
	if (opts)
		c->opts = *opts;
	else
		rb_transport_opts_init(&c->opts);
	c->state = st;
	snprintf(c->peer, sizeof(c->peer), "?");
	return c;
}

static void lst_hold(struct rd_listener *l)
{
	pthread_mutex_lock(&l->lock);
	l->refs++;
	pthread_mutex_unlock(&l->lock);
}

static void lst_put(struct rd_listener *l)
{
	unsigned int n;

	pthread_mutex_lock(&l->lock);
	n = --l->refs;
	pthread_mutex_unlock(&l->lock);
	if (n)
		return;
	rdma_destroy_event_channel(l->ch);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

static int event_errno(enum rdma_cm_event_type type, int status)
{
	switch (type) {
	case RDMA_CM_EVENT_ADDR_ERROR: return status < 0 ? status : -EHOSTUNREACH;
	case RDMA_CM_EVENT_ROUTE_ERROR: return status < 0 ? status : -ENETUNREACH;
	case RDMA_CM_EVENT_UNREACHABLE: return -EHOSTUNREACH;
	case RDMA_CM_EVENT_REJECTED: return -ECONNREFUSED;
	case RDMA_CM_EVENT_CONNECT_ERROR: return -ECONNRESET;
	case RDMA_CM_EVENT_DEVICE_REMOVAL: return -ENODEV;
	case RDMA_CM_EVENT_ADDR_CHANGE: return -EADDRNOTAVAIL;
	default: return -EPROTO;
	}
}

/* Next event on a private channel, waiting until deadline. */
static int wait_event(struct rdma_event_channel *ch, uint64_t deadline, struct rdma_cm_event **ev)
{
	for (;;) {
		struct pollfd pf = { .fd = ch->fd, .events = POLLIN };
		int ms;

		if (rdma_get_cm_event(ch, ev) == 0)
			return 0;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		ms = left_ms(deadline);
		if (!ms)
			return -ETIMEDOUT;
		if (poll(&pf, 1, ms) < 0 && errno != EINTR)
			return -errno;
	}
}

/* Wait for `want` on c's private channel; anything else fails, logged.
 * With `retry`, an address resolution timeout returns -EAGAIN unlogged. */
static int expect_event(struct rd_conn *c, enum rdma_cm_event_type want, uint64_t deadline,
			int tmo, const char *what, bool retry)
{
	struct rdma_cm_event *ev;
	enum rdma_cm_event_type type;
	int ret, status;

	ret = wait_event(c->own_ch, deadline, &ev);
	if (ret == -ETIMEDOUT) {
		rb_warn("rdma %s: %s: timed out after %d ms", c->peer, what, tmo);
		return ret;
	}
	if (ret) {
		rb_err("rdma %s: %s: CM event channel: %s", c->peer, what, strerror(-ret));
		return ret;
	}
	type = ev->event;
	status = ev->status;
	rdma_ack_cm_event(ev);
	if (type == want)
		return 0;
	if (retry && type == RDMA_CM_EVENT_ADDR_ERROR && status == -ETIMEDOUT)
		return -EAGAIN;
	ret = event_errno(type, status);
	rb_warn("rdma %s: %s failed: %s (status %d): %s", c->peer, what, rdma_event_str(type),
		status, strerror(-ret));
	return ret;
}

/* ---- listener -------------------------------------------------------------------- */

static int listen_addr(const struct rb_endpoint *ep, struct sockaddr_storage *ss, bool *any6)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res;
	char port[8];
	int rc;

	memset(ss, 0, sizeof(*ss));
	*any6 = false;
	if (!ep->host[0] || strcmp(ep->host, "::") == 0) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_addr = in6addr_any;
		s6->sin6_port = htons(ep->port);
		*any6 = true;
		return 0;
	}
	if (strcmp(ep->host, "0.0.0.0") == 0) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = htonl(INADDR_ANY);
		s4->sin_port = htons(ep->port);
		return 0;
	}
	snprintf(port, sizeof(port), "%u", ep->port);
	rc = getaddrinfo(ep->host, port, &hints, &res);
	if (rc) {
		rb_err("rdma: listen on %s:%u: %s", ep->host, ep->port, gai_strerror(rc));
		return rc == EAI_SYSTEM ? -errno : -ENOENT;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

/* Create, bind and listen l->id; on a retry failures are expected (the
 * device is still gone) and only logged at debug level. */
static int listen_start(struct rd_listener *l, bool retry)
{
	const struct rb_endpoint *ep = &l->ep;
	struct sockaddr_storage ss = l->addr;
	int ret, one = 1, zero = 0;

	if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP)) {
		ret = -errno;
		rb_err("rdma: create CM id: %s", strerror(-ret));
		return ret;
	}
	if (rdma_set_option(l->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)))
		rb_warn("rdma: listen on %s:%u: SO_REUSEADDR-like option: %s", ep->host, ep->port,
			strerror(errno));
	/* "" and "::" take IPv4 too. */
	if (l->any6 &&
	    rdma_set_option(l->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &zero, sizeof(zero)))
		rb_warn("rdma: listen on [::]:%u: dual stack: %s", ep->port, strerror(errno));
	set_u8_option(l->id, RDMA_OPTION_ID_TOS, l->opts.tos, "type of service", ep->host);
	ret = rdma_bind_addr(l->id, (struct sockaddr *)&ss) ? -errno : 0;
	if (ret && l->any6 && !ep->host[0]) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		/* No IPv6 here: plain IPv4 any (a failed bind leaves the id unbound). */
		memset(&ss, 0, sizeof(ss));
		s4->sin_family = AF_INET;
		s4->sin_port = htons(ep->port);
		ret = rdma_bind_addr(l->id, (struct sockaddr *)&ss) ? -errno : 0;
	}
	if (ret)
		goto out_bind;
	if (rdma_listen(l->id, RD_LISTEN_BACKLOG)) {
		ret = -errno;
		goto out_bind;
	}
	rd_format_addr(rdma_get_local_addr(l->id), l->name, sizeof(l->name));
	if (l->id->verbs)
		rb_info("rdma: listening %son %s (device %s)", retry ? "again " : "", l->name,
			ibv_get_device_name(l->id->verbs->device));
	else
		rb_info("rdma: listening %son %s (all devices)", retry ? "again " : "", l->name);
	return 0;

out_bind:
	if (retry)
		rb_dbg("rdma: listen again on %s:%u: %s", ep->host, ep->port, strerror(-ret));
	else
		rb_err("rdma: listen on %s:%u: %s%s", ep->host[0] ? ep->host : "*", ep->port,
		       strerror(-ret),
		       ret == -EADDRNOTAVAIL || ret == -ENODEV ?
			       " (no RDMA device has that address?)" :
			       "");
	rdma_destroy_id(l->id);
	l->id = NULL;
	return ret;
}

static int epoll_in(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

int rd_listen(const struct rb_endpoint *ep, const struct rb_transport_opts *opts,
	      struct rb_listener **out)
{
	struct rd_listener *l;
	int ret;

	if (!ep || !out)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	if (opts)
		l->opts = *opts;
	else
		rb_transport_opts_init(&l->opts);
	l->ep = *ep;
	l->refs = 1;
	pthread_mutex_init(&l->lock, NULL);
	ret = listen_addr(ep, &l->addr, &l->any6);
	if (ret)
		goto out_free;
	l->ch = rdma_create_event_channel();
	if (!l->ch) {
		ret = errno ? -errno : -ENODEV;
		rb_err("rdma: listen on %s:%u: create CM event channel: %s (is rdma_ucm loaded?)",
		       ep->host, ep->port, strerror(-ret));
		goto out_free;
	}
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (l->epfd < 0 || l->tfd < 0)
		ret = -errno;
	else
		ret = rd_set_nonblock(l->ch->fd);
	if (!ret)
		ret = epoll_in(l->epfd, l->ch->fd);
	if (!ret)
		ret = epoll_in(l->epfd, l->tfd);
	if (ret) {
		rb_err("rdma: listen on %s:%u: %s", ep->host, ep->port, strerror(-ret));
		goto out_close;
	}
	ret = listen_start(l, false);
	if (ret)
		goto out_close;
	*out = (struct rb_listener *)l;
	return 0;

out_close:
	if (l->epfd >= 0)
		close(l->epfd);
	if (l->tfd >= 0)
		close(l->tfd);
	rdma_destroy_event_channel(l->ch);
out_free:
	pthread_mutex_destroy(&l->lock);
	free(l);
	return ret;
}

void rd_listener_close(struct rb_listener *rl)
{
	struct rd_listener *l = (struct rd_listener *)rl;

	if (!l)
		return;
	if (l->id)
		rdma_destroy_id(l->id);
	l->id = NULL;
	close(l->epfd);
	close(l->tfd);
	/* Requests handed out keep the channel until accepted or freed. */
	lst_put(l);
}

int rd_listener_fd(struct rb_listener *rl)
{
	return ((struct rd_listener *)rl)->epfd;
}

/* The device under the listener's address went away (the event is acked:
 * destroying an id waits for its events' acks). */
static void listener_down(struct rd_listener *l)
{
	struct itimerspec its = { .it_interval = { 1, 0 }, .it_value = { 1, 0 } };

	rb_err("rdma: listener %s: its RDMA device was removed; listening again once a device "
	       "has that address",
	       l->name);
	rdma_destroy_id(l->id);
	l->id = NULL;
	if (timerfd_settime(l->tfd, 0, &its, NULL) < 0)
		rb_err("rdma: listener %s: retry timer: %s", l->name, strerror(errno));
}

/* Down and the retry timer fired: try to listen again. */
static void listener_retry(struct rd_listener *l)
{
	struct itimerspec off = { 0 };
	uint64_t n;

	if (read(l->tfd, &n, sizeof(n)) != (ssize_t)sizeof(n) || l->id)
		return;
	if (listen_start(l, true) == 0 && timerfd_settime(l->tfd, 0, &off, NULL) < 0)
		rb_err("rdma: listener %s: retry timer: %s", l->name, strerror(errno));
}

/* Turn a CONNECT_REQUEST into a conn in request state; acks the event. */
static int new_request(struct rd_listener *l, struct rdma_cm_event *ev, struct rd_conn **out)
{
	struct rdma_cm_id *id = ev->id;
	const struct rdma_conn_param *p = &ev->param.conn;
	const uint8_t *data;
	struct rd_conn *c;
	size_t len;
	int ret;

	c = conn_alloc(&l->opts, RD_REQUEST);
	if (!c) {
		ret = -ENOMEM;
		goto out_refuse;
	}
	rd_format_addr(rdma_get_peer_addr(id), c->peer, sizeof(c->peer));
	ret = rd_dom_get(id->verbs, &c->dom);
	if (ret) {
		rb_err("rdma %s: connection request: device domain: %s", c->peer, strerror(-ret));
		free(c);
		goto out_refuse;
	}
	if (priv_unframe(p->private_data, p->private_data_len, &data, &len)) {
		memcpy(c->priv, data, len);
		c->priv_len = len;
	} else if (p->private_data && p->private_data_len) {
		/* Not an rdmablk peer: hand over the raw field, the engine rejects it. */
		c->priv_len = p->private_data_len < sizeof(c->priv) ? p->private_data_len
								    : sizeof(c->priv);
		memcpy(c->priv, p->private_data, c->priv_len);
	}
	c->req_init_depth = p->initiator_depth;
	c->req_resp_res = p->responder_resources;
	c->id = id;
	id->context = c;
	c->lst = l;
	lst_hold(l);
	rdma_ack_cm_event(ev);
	rb_dbg("rdma %s: connection request on %s (device %s, %zu bytes private data)", c->peer,
	       l->name, c->dom->name, c->priv_len);
	*out = c;
	return 0;

out_refuse:
	id->context = NULL;
	rdma_ack_cm_event(ev);
	rdma_reject(id, NULL, 0);
	rdma_destroy_id(id);
	return ret;
}

int rd_listener_get(struct rb_listener *rl, struct rb_conn **out, const void **priv,
		    size_t *priv_len)
{
	struct rd_listener *l = (struct rd_listener *)rl;
	struct rdma_cm_event *ev;
	struct rd_conn *c;

	if (!l || !out)
		return -EINVAL;
	if (!l->id)
		listener_retry(l);
	for (;;) {
		if (rdma_get_cm_event(l->ch, &ev)) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return -EAGAIN;
			rb_err("rdma: listener %s: CM event channel: %s", l->name, strerror(errno));
			return -errno;
		}
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			if (new_request(l, ev, &c))
				continue;
			*out = &c->pub;
			if (priv)
				*priv = c->priv;
			if (priv_len)
				*priv_len = c->priv_len;
			return 0;
		}
		if (l->id && ev->id == l->id) {
			bool removed = ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL;

			if (!removed)
				rb_warn("rdma: listener %s: %s", l->name, rdma_event_str(ev->event));
			rdma_ack_cm_event(ev);
			if (removed)
				listener_down(l);
			continue;
		}
		if (ev->id && ev->id->context) {
			/* A request not accepted yet: accept will fail it. */
			c = ev->id->context;
			rb_warn("rdma %s: request died before accept: %s", c->peer,
				rdma_event_str(ev->event));
			if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
				rd_dom_lose(c->dom, "DEVICE_REMOVAL event");
			__atomic_store_n(&c->lost, 1, __ATOMIC_RELEASE);
		}
		rdma_ack_cm_event(ev);
	}
}

/* ---- accept / reject --------------------------------------------------------------- */

static void qp_to_err(struct rd_conn *c)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	int ret;

	if (!c->id || !c->id->qp)
		return;
	ret = ibv_modify_qp(c->id->qp, &a, IBV_QP_STATE);
	if (ret)
		rb_err("rdma %s: qp %u to error state: %s", c->peer, c->qpn, strerror(ret));
}

/* Connection setup failed: what was posted flushes through the CQ. */
static void setup_failed(struct rd_conn *c)
{
	c->state = RD_DEAD;
	c->disconnected = true;
	rd_cq_note_dead(c);
	qp_to_err(c);
	rd_flush_early(c);
}

int rd_accept(struct rb_conn *rc, struct rb_cq *rcq, const struct rb_conn_caps *caps,
	      const void *priv, size_t priv_len)
{
	struct rd_conn *c = to_rconn(rc);
	struct rd_cq *cq = (struct rd_cq *)rcq;
	const struct ibv_device_attr *a = &c->dom->attr;
	struct rdma_conn_param p = { 0 };
	uint8_t buf[RD_PRIV_BUF];
	int ret;

	if (c->state != RD_REQUEST || !cq || priv_len > RD_PRIV_ACCEPT_MAX || (priv_len && !priv))
		return -EINVAL;
	c->cq = cq;
	if (__atomic_load_n(&c->lost, __ATOMIC_ACQUIRE)) {
		ret = -ECONNABORTED;
		goto out_fail;
	}
	/* From here on its events arrive in cq_poll. */
	if (rdma_migrate_id(c->id, cq->cm_ch)) {
		ret = -errno;
		rb_err("rdma %s: move CM id to the completion queue's channel: %s", c->peer,
		       strerror(-ret));
		goto out_fail;
	}
	lst_put(c->lst);
	c->lst = NULL;
	ret = rd_qp_setup(c, cq, caps);
	if (ret)
		goto out_fail;
	set_u8_option(c->id, RDMA_OPTION_ID_ACK_TIMEOUT, c->opts.ack_timeout, "ack timeout",
		      c->peer);
	/* Bounded by our caps, the device and what the request offered. */
	p.responder_resources = min3_u8(caps ? (int)caps->max_dest_rd_atomic : 0,
					a->max_qp_rd_atom, c->req_resp_res);
	p.initiator_depth = min3_u8(caps ? (int)caps->max_rd_atomic : 0, a->max_qp_init_rd_atom,
				    c->req_init_depth);
	p.rnr_retry_count = retry_val(c->opts.rnr_retry, RD_DEFAULT_RNR_RETRY);
	p.retry_count = retry_val(c->opts.retry_count, RD_DEFAULT_RETRY);
	p.flow_control = 1;
	p.private_data = buf;
	p.private_data_len = (uint8_t)priv_frame(buf, priv, priv_len);
	if (rdma_accept(c->id, &p)) {
		ret = -errno;
		rb_err("rdma %s: accept: %s", c->peer, strerror(-ret));
		goto out_fail;
	}
	c->state = RD_ACCEPTED;
	rb_dbg("rdma %s: accepted on qp %u (responder resources %u, initiator depth %u)",
	       c->peer, c->qpn, p.responder_resources, p.initiator_depth);
	return 0;

out_fail:
	/*
	 * Still a request (transport.h): the caller rejects it, which frees
	 * it.  Its receives go without completions: the QP never entered the
	 * error state, and teardown drops it from the qp table, so a stray
	 * CQE for it is discarded.
	 */
	rd_qp_teardown(c);
	c->cq = NULL;
	rd_drop_early(c);
	return ret;
}

int rd_reject(struct rb_conn *rc, const void *priv, size_t priv_len)
{
	struct rd_conn *c = to_rconn(rc);
	uint8_t buf[RD_PRIV_BUF];
	size_t n;
	int ret = 0;

	if (!c)
		return -EINVAL;
	if (priv_len > RD_PRIV_REJECT_MAX || (priv_len && !priv)) {
		ret = -EINVAL;
		priv_len = 0;
	}
	if (c->state == RD_REQUEST) {
		n = priv_frame(buf, priv, priv_len);
		if (rdma_reject(c->id, buf, (uint8_t)n))
			rb_info("rdma %s: reject: %s", c->peer, strerror(errno));
	} else {
		ret = -EINVAL;
	}
	rd_conn_destroy(rc);
	return ret;
}

/* ---- active side ----------------------------------------------------------------- */

/*
 * Address resolution is retried in short steps: the kernel may notice the
 * neighbour (ARP) entry only when a step times out (seen with rxe: the
 * first resolution after boot always took the full timeout).
 */
static int resolve_one(struct rd_conn *c, struct sockaddr *dst, uint64_t deadline, int tmo)
{
	int ret, step;

	rd_format_addr(dst, c->peer, sizeof(c->peer));
	do {
		step = left_ms(deadline);
		step = step > RD_RESOLVE_STEP_MS ? RD_RESOLVE_STEP_MS : step ? step : 1;
		if (rdma_create_id(c->own_ch, &c->id, c, RDMA_PS_TCP)) {
			ret = -errno;
			rb_err("rdma %s: create CM id: %s", c->peer, strerror(-ret));
			return ret;
		}
		set_u8_option(c->id, RDMA_OPTION_ID_TOS, c->opts.tos, "type of service", c->peer);
		if (rdma_resolve_addr(c->id, NULL, dst, step)) {
			ret = -errno;
			rb_warn("rdma %s: resolve address: %s", c->peer, strerror(-ret));
			goto out_destroy;
		}
		ret = expect_event(c, RDMA_CM_EVENT_ADDR_RESOLVED, deadline, tmo,
				   "resolve address (is there an RDMA device with a route to it?)",
				   true);
		if (ret == -EAGAIN) {
			rdma_destroy_id(c->id);
			c->id = NULL;
			if (!left_ms(deadline)) {
				rb_warn("rdma %s: resolve address: timed out after %d ms (no RDMA "
					"device with a route to it, or no ARP answer)",
					c->peer, tmo);
				return -ETIMEDOUT;
			}
		}
	} while (ret == -EAGAIN);
	if (ret)
		goto out_destroy;
	if (rdma_resolve_route(c->id, left_ms(deadline) ?: 1)) {
		ret = -errno;
		rb_warn("rdma %s: resolve route: %s", c->peer, strerror(-ret));
		goto out_destroy;
	}
	ret = expect_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, tmo, "resolve route",
			   false);
	if (ret)
		goto out_destroy;
	return 0;

out_destroy:
	rdma_destroy_id(c->id);
	c->id = NULL;
	return ret;
}

int rd_conn_create(const struct rb_endpoint *ep, const struct rb_transport_opts *opts,
		   struct rb_conn **out)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	struct rd_conn *c;
	uint64_t deadline;
	char port[8];
	int rc, ret = -EHOSTUNREACH, tmo;

	if (!ep || !ep->host[0] || !ep->port || !out)
		return -EINVAL;
	c = conn_alloc(opts, RD_RESOLVED);
	if (!c)
		return -ENOMEM;
	tmo = timeout_ms(&c->opts);
	deadline = now_ms() + (uint64_t)tmo;
	snprintf(c->peer, sizeof(c->peer), "%s:%u", ep->host, ep->port);
	c->own_ch = rdma_create_event_channel();
	if (!c->own_ch) {
		ret = errno ? -errno : -ENODEV;
		rb_err("rdma %s: create CM event channel: %s (is rdma_ucm loaded?)", c->peer,
		       strerror(-ret));
		goto out_free;
	}
	ret = rd_set_nonblock(c->own_ch->fd);
	if (ret)
		goto out_destroy_ch;
	snprintf(port, sizeof(port), "%u", ep->port);
	rc = getaddrinfo(ep->host, port, &hints, &res);
	if (rc) {
		rb_err("rdma %s: %s", c->peer, gai_strerror(rc));
		ret = rc == EAI_SYSTEM ? -errno : -ENOENT;
		goto out_destroy_ch;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		ret = resolve_one(c, ai->ai_addr, deadline, tmo);
		if (!ret || !left_ms(deadline))
			break;
	}
	freeaddrinfo(res);
	if (ret)
		goto out_destroy_ch;
	ret = rd_dom_get(c->id->verbs, &c->dom);
	if (ret) {
		rb_err("rdma %s: device domain: %s", c->peer, strerror(-ret));
		goto out_destroy_id;
	}
	rb_dbg("rdma %s: resolved on device %s", c->peer, c->dom->name);
	*out = &c->pub;
	return 0;

out_destroy_id:
	rdma_destroy_id(c->id);
out_destroy_ch:
	rdma_destroy_event_channel(c->own_ch);
out_free:
	free(c);
	return ret;
}

/* ESTABLISHED or REJECTED (or a failure) on the private channel. */
static int connect_wait(struct rd_conn *c, uint64_t deadline, int tmo, void *rpriv, size_t cap,
			size_t *rpriv_len)
{
	const struct rdma_conn_param *p;
	struct rdma_cm_event *ev;
	const uint8_t *data;
	size_t len;
	int ret;

	ret = wait_event(c->own_ch, deadline, &ev);
	if (ret == -ETIMEDOUT) {
		rb_warn("rdma %s: connect: no answer within %d ms", c->peer, tmo);
		return ret;
	}
	if (ret) {
		rb_err("rdma %s: connect: CM event channel: %s", c->peer, strerror(-ret));
		return ret;
	}
	p = &ev->param.conn;
	switch (ev->event) {
	case RDMA_CM_EVENT_ESTABLISHED:
	case RDMA_CM_EVENT_REJECTED:
		if (ev->event == RDMA_CM_EVENT_REJECTED && ev->status != IB_CM_REJ_CONSUMER_DEFINED) {
			rb_info("rdma %s: connection refused (reject reason %d: no listener on that "
				"port?)",
				c->peer, ev->status);
		} else if (priv_unframe(p->private_data, p->private_data_len, &data, &len) &&
			   rpriv && rpriv_len) {
			*rpriv_len = len < cap ? len : cap;
			memcpy(rpriv, data, *rpriv_len);
		}
		ret = ev->event == RDMA_CM_EVENT_ESTABLISHED ? 0 : -ECONNREFUSED;
		break;
	default:
		ret = event_errno(ev->event, ev->status);
		rb_warn("rdma %s: connect failed: %s (status %d): %s", c->peer,
			rdma_event_str(ev->event), ev->status, strerror(-ret));
		break;
	}
	rdma_ack_cm_event(ev);
	return ret;
}

int rd_connect(struct rb_conn *rc, struct rb_cq *rcq, const struct rb_conn_caps *caps,
	       const void *priv, size_t priv_len, void *rpriv, size_t *rpriv_len)
{
	struct rd_conn *c = to_rconn(rc);
	struct rd_cq *cq = (struct rd_cq *)rcq;
	const struct ibv_device_attr *a;
	struct rdma_conn_param p = { 0 };
	uint8_t buf[RD_PRIV_BUF];
	size_t cap = rpriv_len ? *rpriv_len : 0;
	int tmo, ret;
	uint64_t deadline;

	if (rpriv_len)
		*rpriv_len = 0;
	if (!c || c->state != RD_RESOLVED || !cq || priv_len > RD_PRIV_CONNECT_MAX ||
	    (priv_len && !priv))
		return -EINVAL;
	a = &c->dom->attr;
	tmo = timeout_ms(&c->opts);
	deadline = now_ms() + (uint64_t)tmo;
	ret = rd_qp_setup(c, cq, caps);
	if (ret)
		goto out_fail;
	set_u8_option(c->id, RDMA_OPTION_ID_ACK_TIMEOUT, c->opts.ack_timeout, "ack timeout",
		      c->peer);
	p.initiator_depth = min3_u8(caps ? (int)caps->max_rd_atomic : 0, a->max_qp_init_rd_atom,
				    255);
	p.responder_resources = min3_u8(caps ? (int)caps->max_dest_rd_atomic : 0,
					a->max_qp_rd_atom, 255);
	p.retry_count = retry_val(c->opts.retry_count, RD_DEFAULT_RETRY);
	p.rnr_retry_count = retry_val(c->opts.rnr_retry, RD_DEFAULT_RNR_RETRY);
	p.flow_control = 1;
	p.private_data = buf;
	p.private_data_len = (uint8_t)priv_frame(buf, priv, priv_len);
	if (rdma_connect(c->id, &p)) {
		ret = -errno;
		rb_err("rdma %s: connect: %s", c->peer, strerror(-ret));
		goto out_fail;
	}
	ret = connect_wait(c, deadline, tmo, rpriv, cap, rpriv_len);
	if (ret)
		goto out_fail;
	if (rdma_migrate_id(c->id, cq->cm_ch)) {
		ret = -errno;
		rb_err("rdma %s: move CM id to the completion queue's channel: %s", c->peer,
		       strerror(-ret));
		rdma_disconnect(c->id);
		goto out_fail;
	}
	rdma_destroy_event_channel(c->own_ch);
	c->own_ch = NULL;
	c->state = RD_CONNECTED;
	rb_dbg("rdma %s: connected on qp %u (initiator depth %u, responder resources %u)",
	       c->peer, c->qpn, p.initiator_depth, p.responder_resources);
	return 0;

out_fail:
	setup_failed(c);
	return ret;
}

/* ---- teardown and CM events on the CQ's channel ---------------------------------- */

void rd_disconnect(struct rb_conn *rc)
{
	struct rd_conn *c = to_rconn(rc);
	enum rd_state was;

	if (!c || c->disconnected)
		return;
	c->disconnected = true;
	rd_cq_note_dead(c);
	was = c->state;
	c->state = RD_DEAD;
	if (c->id && c->id->qp) {
		/* rdma_disconnect moves the QP to error first: everything flushes. */
		if ((was == RD_CONNECTED || was == RD_ACCEPTED) && rdma_disconnect(c->id) == 0) {
			rb_dbg("rdma %s: qp %u disconnected", c->peer, c->qpn);
			return;
		}
		qp_to_err(c);
	}
	rd_flush_early(c);
}

void rd_conn_destroy(struct rb_conn *rc)
{
	struct rd_conn *c = to_rconn(rc);
	struct rd_swr *w;

	if (!c)
		return;
	rd_qp_teardown(c);
	while ((w = c->early)) {
		c->early = w->next;
		free(w);
	}
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->own_ch)
		rdma_destroy_event_channel(c->own_ch);
	if (c->lst)
		lst_put(c->lst);
	rd_dom_put(c->dom);
	free(c);
}

void rd_cm_event(struct rd_cq *cq, struct rdma_cm_event *ev)
{
	struct rd_conn *c = ev->id ? ev->id->context : NULL;
	enum rdma_cm_event_type type = ev->event;
	int status = ev->status;

	rdma_ack_cm_event(ev);
	if (!c) {
		rb_warn("rdma %s: %s for an unknown connection", cq->dom->name,
			rdma_event_str(type));
		return;
	}
	switch (type) {
	case RDMA_CM_EVENT_ESTABLISHED:
		if (c->state == RD_ACCEPTED)
			c->state = RD_CONNECTED;
		rb_dbg("rdma %s: qp %u established", c->peer, c->qpn);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (!c->disconnected)
			rb_dbg("rdma %s: qp %u: peer disconnected", c->peer, c->qpn);
		rd_disconnect(&c->pub);
		break;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		rb_dbg("rdma %s: qp %u left timewait", c->peer, c->qpn);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rb_err("rdma %s: qp %u: RDMA device %s was removed", c->peer, c->qpn,
		       cq->dom->name);
		rd_dom_lose(c->dom, "DEVICE_REMOVAL event");
		rd_disconnect(&c->pub);
		break;
	case RDMA_CM_EVENT_ADDR_CHANGE:
		rb_warn("rdma %s: qp %u: local address changed, disconnecting", c->peer, c->qpn);
		rd_disconnect(&c->pub);
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		rb_warn("rdma %s: qp %u: connection setup failed: %s (status %d)", c->peer, c->qpn,
			rdma_event_str(type), status);
		rd_disconnect(&c->pub);
		break;
	default:
		rb_dbg("rdma %s: qp %u: %s (status %d) ignored", c->peer, c->qpn,
		       rdma_event_str(type), status);
		break;
	}
}
