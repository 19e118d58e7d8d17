/* SPDX-License-Identifier: MIT */
/*
 * "rdma" transport, passive side: listeners, connection requests, accept
 * and reject.  A listener has its own event channel; the requests it
 * yields stay on it until accept migrates their cm_id to the CQ's channel
 * (transport_rdma_cm.c handles their events from then on).  A listener
 * bound to an address whose device is removed listens again once a device
 * has the address (docs/transport-rdma.md).
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "log.h"
#include "log_limit.h"
#include "transport_rdma_priv.h"

static void lst_hold(struct rd_listener *l)
{
	pthread_mutex_lock(&l->lock);
	l->refs++;
	pthread_mutex_unlock(&l->lock);
}

void rd_lst_put(struct rd_listener *l)
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
	rd_set_u8_option(l->id, RDMA_OPTION_ID_TOS, l->opts.tos, "type of service", ep->host);
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
	rd_lst_put(l);
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
	struct rd_conn *c;
	int ret;

	c = rd_conn_alloc(&l->opts, RD_REQUEST);
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
	c->priv_len = rd_priv_take(p->private_data, p->private_data_len, c->priv, sizeof(c->priv));
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
			static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("rdma: requests died "
									   "before accept",
									   RB_LOG_WARN);

			c = ev->id->context;
			rb_log_limited(&lim, c->peer, RB_LOG_WARN,
				       "rdma %s: request died before accept: %s", c->peer,
				       rdma_event_str(ev->event));
			if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
				rd_dom_lose(c->dom, "DEVICE_REMOVAL event");
			__atomic_store_n(&c->lost, 1, __ATOMIC_RELEASE);
		}
		rdma_ack_cm_event(ev);
	}
}

int rd_accept(struct rb_conn *rc, struct rb_cq *rcq, const struct rb_conn_caps *caps,
	      const void *priv, size_t priv_len)
{
	struct rd_conn *c = to_rconn(rc);
	struct rd_cq *cq = (struct rd_cq *)rcq;
	struct rdma_conn_param p;
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
	rd_lst_put(c->lst);
	c->lst = NULL;
	ret = rd_qp_setup(c, cq, caps);
	if (ret)
		goto out_fail;
	rd_set_u8_option(c->id, RDMA_OPTION_ID_ACK_TIMEOUT, c->opts.ack_timeout, "ack timeout",
		      c->peer);
	p = rd_conn_param(&c->dom->attr, &c->opts, caps, c->req_init_depth, c->req_resp_res, buf,
			  priv, priv_len);
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
		n = rd_priv_frame(buf, priv, priv_len);
		if (rdma_reject(c->id, buf, (uint8_t)n))
			rb_info("rdma %s: reject: %s", c->peer, strerror(errno));
	} else {
		ret = -EINVAL;
	}
	rd_conn_destroy(rc);
	return ret;
}
