/* SPDX-License-Identifier: MIT */
/*
 * Initiator queues, set-up and teardown: the queue's memory and its
 * registrations, the connection to the target (CONNECT's private data both
 * ways), reconnecting with the commands in flight sent again, shutdown and
 * release.  The I/O path is in queue.c.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "initiator.h"
#include "log.h"
#include "log_limit.h"

/* A target that breaks every session could make reconnect lines at will. */
static struct rb_log_limit reconnected = RB_LOG_LIMIT_INIT("queue reconnected", RB_LOG_INFO);

static int reg(struct ini_queue *q, void *addr, size_t len, unsigned int access,
	       struct rb_mr **out, const char *what)
{
	int ret = q->ops->reg_mr(q->r->domain, addr, len, access, out);

	if (ret) {
		*out = NULL;
		rb_err("%s: queue %u: register %s (%zu bytes): %s%s", q->s->target, q->qid, what,
		       len, strerror(-ret),
		       ret == -ENOMEM || ret == -EPERM ?
			       " (raise the memlock limit: ulimit -l, or LimitMEMLOCK= in the unit)" :
			       "");
	}
	return ret;
}

static int queue_alloc(struct ini_queue *q)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t stride = (q->buf_size + page - 1) / page * page;
	uint32_t n = q->alloc_depth;
	int ret;

	ret = rb_bufpool_init(&q->pool, stride, n);
	if (ret) {
		rb_err("%s: queue %u: allocate %u buffers of %zu bytes: %s", q->s->target, q->qid,
		       n, stride, strerror(-ret));
		return ret;
	}
	q->slots = calloc(n, sizeof(*q->slots));
	q->recvs = calloc(n, sizeof(*q->recvs));
	q->free_stack = calloc(n, sizeof(*q->free_stack));
	/* Two spare capsules behind the slots': QUEUE_AUTH and its proof. */
	q->caps = rb_alloc_lines((size_t)(n + 2) * sizeof(*q->caps));
	q->rsps = rb_alloc_lines((size_t)n * sizeof(*q->rsps));
	if (!q->slots || !q->recvs || !q->free_stack || !q->caps || !q->rsps) {
		rb_err("%s: queue %u: out of memory", q->s->target, q->qid);
		return -ENOMEM;
	}
	memset(q->caps, 0, (size_t)(n + 2) * sizeof(*q->caps));
	memset(q->rsps, 0, (size_t)n * sizeof(*q->rsps));
	for (uint32_t i = 0; i < n; i++) {
		struct rb_slot *sl = &q->slots[i];

		sl->buf = rb_bufpool_at(&q->pool, i);
		sl->cid = (uint16_t)i;
		sl->q = q;
		q->recvs[i].q = q;
		q->recvs[i].rsp = &q->rsps[i];
	}
	ini_queue_init_cqes(q);
	return 0;
}

/* The queue's memory in the reactor's domain; undone by queue_deregister. */
static int queue_register(struct ini_queue *q)
{
	uint32_t n = q->alloc_depth;
	int ret;

	ret = reg(q, q->pool.base, q->pool.slab_size,
		  RB_ACCESS_REMOTE_READ | RB_ACCESS_REMOTE_WRITE, &q->pool_mr, "data buffers");
	if (!ret)
		ret = reg(q, q->caps, (size_t)(n + 2) * sizeof(*q->caps), RB_ACCESS_LOCAL,
			  &q->caps_mr, "capsules");
	if (!ret)
		ret = reg(q, q->rsps, (size_t)n * sizeof(*q->rsps), RB_ACCESS_LOCAL, &q->rsps_mr,
			  "responses");
	return ret;
}

static void queue_deregister(struct ini_queue *q)
{
	if (q->rsps_mr)
		q->ops->dereg_mr(q->rsps_mr);
	if (q->caps_mr)
		q->ops->dereg_mr(q->caps_mr);
	if (q->pool_mr)
		q->ops->dereg_mr(q->pool_mr);
	q->rsps_mr = q->caps_mr = q->pool_mr = NULL;
}

static int check_rep(struct ini_queue *q, const struct rb_cm_rep2 *rep, size_t len,
		     uint32_t want_incap)
{
	struct rb_validate_err err;
	uint32_t incap;
	int over = rb_check_cm_rep(rep, len, (uint16_t)q->alloc_depth, want_incap, &err);

	if (over < 0) {
		rb_err("%s: queue %u: the target's accept data (%zu bytes) refused: field %s = "
		       "%llu; is this an rdmablk target of protocol version %u granting depth "
		       "1..%u?",
		       q->s->target, q->qid, len, err.field, (unsigned long long)err.value,
		       RB_PROTO_VERSION, q->alloc_depth);
		return over;
	}
	q->depth = rb_from_le16(rep->depth);
	/* Never more than asked for, nor more than one slot buffer holds. */
	incap = over & RB_GRANT_OVER_INCAPSULE ? want_incap : rb_from_le32(rep->incapsule);
	if (incap > q->buf_size)
		incap = q->buf_size;
	q->incapsule = incap;
	return 0;
}

static int report_reject(struct ini_queue *q, const uint8_t *rbuf, size_t rlen)
{
	struct rb_cm_rej rej;

	if (rlen >= sizeof(rej)) {
		memcpy(&rej, rbuf, sizeof(rej));
		if (rb_from_le32(rej.magic) == RB_MAGIC &&
		    rb_from_le16(rej.reason) == RB_REJ_BAD_VERSION) {
			rb_err("%s: queue %u: target speaks protocol version %u, this initiator "
			       "version %u: refused",
			       q->s->target, q->qid, rb_from_le16(rej.version), RB_PROTO_VERSION);
			return -EPROTONOSUPPORT;
		}
		if (rb_from_le32(rej.magic) == RB_MAGIC) {
			rb_err("%s: queue %u: connection rejected by the target: %s",
			       q->s->target, q->qid, rb_reject_name(rb_from_le16(rej.reason)));
			return -ECONNREFUSED;
		}
	}
	rb_err("%s: queue %u: connection refused (no rdmablk target listening there?)",
	       q->s->target, q->qid);
	return -ECONNREFUSED;
}

/*
 * Connection, CQ, registrations, receives: everything a queue has on the
 * transport.  `first`: the queue's memory is allocated here too; on a
 * reconnect it is kept (frontends point into it).
 */
static bool auth_answered(void *arg)
{
	const struct ini_queue *q = arg;

	/* A reconnect links a queue still marked dead (until it is re-issued):
	 * only a death during this wait ends it early; else the timeout does. */
	return q->auth_answered || (q->dead && !q->auth_was_dead);
}

/*
 * An authenticated session's I/O queue: the target proved it knows the
 * session key in its accept (checked before anything is posted); our proof
 * goes in QUEUE_AUTH, answered before the queue carries anything else.
 */
static int queue_auth(struct ini_queue *q, const uint8_t nonce_h[RB_AUTH_NONCE_SIZE],
		      const struct rb_cm_rep2 *rep)
{
	uint8_t proof[RB_AUTH_PROOF_MAX];
	int ret;

	ret = rb_auth_queue_proof(&q->s->skey, false, q->qid, nonce_h, rep->nonce, proof);
	if (!ret)
		ret = ini_queue_post_auth(q, proof);
	if (ret) {
		rb_err("%s: queue %u: QUEUE_AUTH: %s", q->s->target, q->qid, strerror(-ret));
		return ret;
	}
	q->auth_was_dead = q->dead;
	ret = ini_reactor_wait(q->r, auth_answered, q, rb_now_ms() + q->timeout_ms);
	if (!q->auth_answered) {
		q->auth_wait = false;
		rb_err("%s: queue %u: QUEUE_AUTH got no answer", q->s->target, q->qid);
		return ret ? ret : -EIO;
	}
	if (q->auth_status) {
		rb_err("%s: queue %u: the target refused the queue's authentication: %s",
		       q->s->target, q->qid, rb_status_name(q->auth_status));
		return -EACCES;
	}
	return 0;
}

static int queue_link(struct ini_queue *q, const struct ini_queue_cfg *cfg, bool first)
{
	uint8_t rbuf_store[256] __attribute__((aligned(8)));
	struct ini_session *s = q->s;
	const struct rb_transport_ops *ops = q->ops;
	struct rb_cm_req2 req;
	struct rb_conn_caps caps;
	const struct rb_cm_rep2 *rep = (const void *)rbuf_store;
	uint8_t nonce_h[RB_AUTH_NONCE_SIZE] = { 0 };
	bool auth = q->qid && s->authed;
	uint8_t *rbuf = rbuf_store;
	size_t rlen = sizeof(rbuf_store);
	int ret;

	ret = ops->conn_create(&s->p.ep, &s->p.topts, &q->conn);
	if (ret) {
		q->conn = NULL;
		rb_err("%s: queue %u: cannot reach the target: %s", s->target, q->qid,
		       strerror(-ret));
		return ret;
	}
	q->conn->ctx = q;
	ret = ini_reactor_set_cq(q->r, ops, ops->conn_domain(q->conn), cfg->cq_depth);
	if (ret)
		return ret;
	if (first) {
		ret = queue_alloc(q);
		if (ret)
			return ret;
	}
	ret = queue_register(q);
	if (ret)
		return ret;

	if (auth) {
		ret = rb_auth_nonce(nonce_h);
		if (ret)
			return ret;
	}
	req = (struct rb_cm_req2){
		.magic = rb_le32(RB_MAGIC),
		.version = rb_le16(RB_PROTO_VERSION),
		.qid = rb_le16(q->qid),
		.depth = rb_le16((uint16_t)q->alloc_depth),
		.incapsule = rb_le32(cfg->incapsule),
		.session = rb_le64(cfg->session_id),
	};
	memcpy(req.nonce, nonce_h, sizeof(req.nonce));
	caps = (struct rb_conn_caps){
		.max_send_wr = q->alloc_depth,
		.max_recv_wr = q->alloc_depth,
		.max_sge = 2,
		.max_inline = RB_CAPSULE_SIZE,
		.max_rd_atomic = 0, /* we never READ target memory */
		.max_dest_rd_atomic = 16, /* the target READs write data and CONNECT */
	};
	ret = ops->connect(q->conn, q->r->cq, &caps, &req, sizeof(req), rbuf, &rlen);
	if (ret == -ECONNREFUSED)
		return report_reject(q, rbuf, rlen);
	if (ret) {
		rb_err("%s: queue %u: connect: %s", s->target, q->qid, strerror(-ret));
		return ret;
	}
	q->connected = true;
	ops->conn_peer(q->conn, q->peer, sizeof(q->peer));
	q->qpn = ops->conn_qpn(q->conn);
	ret = check_rep(q, rep, rlen, cfg->incapsule);
	if (ret)
		return ret;
	if (auth && rb_auth_queue_check(&s->skey, true, q->qid, nonce_h, rep->nonce, rep->proof)) {
		rb_err("%s: queue %u: target failed queue authentication (its proof of the session "
		       "key is wrong): refusing it",
		       s->target, q->qid);
		return -EACCES;
	}
	/*
	 * One receive per credit.  The QP only exists once connect() returned
	 * (the transport creates it there), and the target sends nothing
	 * unsolicited, so this is still before any response can arrive: every
	 * receive is posted before our first command goes out.
	 */
	for (uint32_t i = 0; i < q->depth; i++) {
		ret = ini_queue_post_recv(q, &q->recvs[i]);
		if (ret) {
			rb_err("%s: queue %u: post receive: %s", s->target, q->qid, strerror(-ret));
			return ret;
		}
	}
	return auth ? queue_auth(q, nonce_h, rep) : 0;
}

int ini_queue_connect(struct ini_queue *q, struct ini_session *s, struct ini_reactor *r,
		      const struct ini_queue_cfg *cfg)
{
	int ret;

	memset(q, 0, sizeof(*q));
	atomic_init(&q->gone, false);
	q->s = s;
	q->r = r;
	q->ops = s->p.ops;
	q->qid = cfg->qid;
	q->alloc_depth = cfg->depth;
	q->buf_size = cfg->buf_size;
	q->handle = cfg->handle;
	q->timeout_ms = s->p.timeout_ms;
	ini_queue_init_tasks(q);
	snprintf(q->peer, sizeof(q->peer), "%s", s->target);

	ret = queue_link(q, cfg, true);
	if (ret)
		return ret;
	/* Pop order 0, 1, 2...: keeps the hot buffers few. */
	for (uint32_t i = 0; i < q->depth; i++) {
		uint32_t cid = q->depth - 1 - i;

		q->slots[cid].free = true;
		q->free_stack[q->nr_free++] = (uint16_t)cid;
	}
	ret = ini_reactor_add_queue(r, &q->rq);
	if (ret)
		return ret;
#define CONNECTED_FMT "%s: queue %u connected (peer %s, qp %u, depth %u, in-capsule %u, reactor %d)"
	/* A reconnect's admin queue: as often as a target breaks sessions. */
	if (atomic_load(&s->recovering))
		rb_log_limited(&reconnected, s->target, RB_LOG_INFO, CONNECTED_FMT, s->target,
			       q->qid, q->peer, q->qpn, q->depth, q->incapsule, r->id);
	else
		rb_info(CONNECTED_FMT, s->target, q->qid, q->peer, q->qpn, q->depth, q->incapsule,
			r->id);
#undef CONNECTED_FMT
	return 0;
}

int ini_queue_reconnect(struct ini_queue *q, const struct ini_queue_cfg *cfg)
{
	uint32_t old_depth = q->depth, n = 0;
	uint64_t deadline = rb_now_ms() + q->timeout_ms;
	int ret;

	if (q->conn || q->wr_outstanding)
		return -EBUSY;
	q->handle = cfg->handle;
	q->connected = q->disconnected = q->no_repost = false;
	q->qpn = 0;
	ret = queue_link(q, cfg, false);
	if (ret)
		return ret;
	if (q->depth != old_depth) {
		rb_err("%s: queue %u: the target now grants depth %u instead of %u", q->s->target,
		       q->qid, q->depth, old_depth);
		return -EPROTO;
	}
	q->dead = false;
	q->stalled = false;
	atomic_store(&q->gone, false);
	ret = ini_queue_reissue_all(q, deadline, &n);
	if (ret)
		return ret;
	rb_log_limited(&reconnected, q->s->target, RB_LOG_INFO,
		       "%s: queue %u reconnected (peer %s, qp %u); %u commands re-issued",
		       q->s->target, q->qid, q->peer, q->qpn, n);
	return 0;
}

void ini_queue_shutdown(struct ini_queue *q)
{
	if (!q->conn)
		return;
	q->dead = true;
	atomic_store(&q->gone, true);
	if (!q->disconnected) {
		q->disconnected = true;
		q->ops->disconnect(q->conn);
	}
	rb_reactor_defer(q->r, &q->reap_task);
}

bool ini_queue_quiet(const struct ini_queue *q)
{
	return !q->conn || !q->connected || q->wr_outstanding == 0;
}

/*
 * The queue's device was removed: once nothing is outstanding, give back
 * its registrations and connection (the kernel's removal of the device
 * waits for that) but keep its memory, which frontends may still point
 * at.  The queue stays dead: its I/O fails with EIO until the session is
 * closed.  Returns true when it holds nothing on the transport any more.
 */
bool ini_queue_release_transport(struct ini_queue *q)
{
	if (!q->conn)
		return true;
	if (!q->dead)
		ini_queue_fail(q, "its RDMA device was removed");
	if (q->connected && q->wr_outstanding > 0)
		return false;
	queue_deregister(q);
	q->ops->conn_destroy(q->conn);
	q->conn = NULL;
	return true;
}

bool ini_queue_free(struct ini_queue *q)
{
	if (q->conn && q->connected && q->wr_outstanding > 0) {
		unsigned int sends = 0;

		for (uint32_t i = 0; i < q->alloc_depth; i++)
			sends += q->slots[i].send_pending;
		/* The transport may still complete into this memory. */
		rb_warn("%s: queue %u (qp %u): %d work requests (%u sends, %d receives) never "
			"completed after disconnect; leaking the queue's memory",
			q->s->target, q->qid, q->qpn, q->wr_outstanding, sends,
			q->wr_outstanding - (int)sends);
		return false;
	}
	/* Regions first: the connection holds the domain they live in. */
	queue_deregister(q);
	if (q->conn) {
		q->ops->conn_destroy(q->conn);
		q->conn = NULL;
	}
	rb_bufpool_fini(&q->pool);
	free(q->rsps);
	free(q->caps);
	free(q->free_stack);
	free(q->recvs);
	free(q->slots);
	q->rsps = NULL;
	q->caps = NULL;
	q->free_stack = NULL;
	q->recvs = NULL;
	q->slots = NULL;
	return true;
}
