/* SPDX-License-Identifier: MIT */
/*
 * "rdma" transport connection management (librdmacm, RDMA_PS_TCP): the
 * active side, teardown, and CM events on the CQ's channel (the passive
 * side is in transport_rdma_listen.c).
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

#include "clock.h"
#include "log.h"
#include "log_limit.h"
#include "transport_rdma_priv.h"

#define IB_CM_REJ_CONSUMER_DEFINED 28

static int timeout_ms(const struct rb_transport_opts *o)
{
	return o->connect_timeout_ms > 0 ? o->connect_timeout_ms : RD_DEFAULT_TIMEOUT_MS;
}

static int left_ms(uint64_t deadline)
{
	uint64_t now = rb_clock_ms();

	return now >= deadline ? 0 : (int)(deadline - now);
}

void rd_set_u8_option(struct rdma_cm_id *id, int name, int v, const char *what,
		       const char *who)
{
	uint8_t u = (uint8_t)v;

	if (v < 0)
		return;
	if (rdma_set_option(id, RDMA_OPTION_ID, name, &u, sizeof(u)))
		rb_warn("rdma %s: set %s %d: %s", who, what, v, strerror(errno));
}

struct rd_conn *rd_conn_alloc(const struct rb_transport_opts *opts, enum rd_state st)
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
		rd_set_u8_option(c->id, RDMA_OPTION_ID_TOS, c->opts.tos, "type of service", c->peer);
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
	c = rd_conn_alloc(opts, RD_RESOLVED);
	if (!c)
		return -ENOMEM;
	tmo = timeout_ms(&c->opts);
	deadline = rb_clock_ms() + (uint64_t)tmo;
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
		rb_warn("rdma %s: connect: no answer within %d ms (target host down, packets lost, "
			"or its device's connection manager not answering)",
			c->peer, tmo);
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
		} else if (rd_priv_unframe(p->private_data, p->private_data_len, &data, &len) &&
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
	struct rdma_conn_param p;
	uint8_t buf[RD_PRIV_BUF];
	size_t cap = rpriv_len ? *rpriv_len : 0;
	int tmo, ret;
	uint64_t deadline;

	if (rpriv_len)
		*rpriv_len = 0;
	if (!c || c->state != RD_RESOLVED || !cq || priv_len > RD_PRIV_CONNECT_MAX ||
	    (priv_len && !priv))
		return -EINVAL;
	tmo = timeout_ms(&c->opts);
	deadline = rb_clock_ms() + (uint64_t)tmo;
	ret = rd_qp_setup(c, cq, caps);
	if (ret)
		goto out_fail;
	rd_set_u8_option(c->id, RDMA_OPTION_ID_ACK_TIMEOUT, c->opts.ack_timeout, "ack timeout",
		      c->peer);
	p = rd_conn_param(&c->dom->attr, &c->opts, caps, 255, 255, buf, priv, priv_len);
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

/* Events a peer can cause at will: rate-limited. */
static struct rb_log_limit setup_failed_log = RB_LOG_LIMIT_INIT("rdma: failed connection setups",
								RB_LOG_WARN);
static struct rb_log_limit unknown_conn = RB_LOG_LIMIT_INIT("rdma: CM events for unknown "
							    "connections",
							    RB_LOG_WARN);

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
	while ((w = rb_fifo_pop(&c->early)))
		free(w);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->own_ch)
		rdma_destroy_event_channel(c->own_ch);
	if (c->lst)
		rd_lst_put(c->lst);
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
		rb_log_limited(&unknown_conn, NULL, RB_LOG_WARN, "rdma %s: %s for an unknown connection",
			       cq->dom->name, rdma_event_str(type));
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
		rb_log_limited(&setup_failed_log, c->peer, RB_LOG_WARN,
			       "rdma %s: qp %u: connection setup failed: %s (status %d)", c->peer,
			       c->qpn, rdma_event_str(type), status);
		rd_disconnect(&c->pub);
		break;
	default:
		rb_dbg("rdma %s: qp %u: %s (status %d) ignored", c->peer, c->qpn,
		       rdma_event_str(type), status);
		break;
	}
}
