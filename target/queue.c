/* SPDX-License-Identifier: MIT */
/*
 * Target queues: one per transport connection (admin or I/O).  Created on
 * the reactor that will own it, torn down there once every work request
 * and io_uring operation it started has completed.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "checked.h"
#include "log.h"
#include "log_limit.h"
#include "target.h"

#define ADMIN_DEPTH 16
#define QUEUE_MAX_RD 16 /* RDMA READs outstanding */

static void reject_quiet(const struct tgt_conn_msg *m, uint16_t reason)
{
	struct rb_cm_rej rej = rb_cm_rej_make(reason);

	m->ops->reject(m->conn, &rej, sizeof(rej));
}

/* A peer can ask for refusals at will: rate-limited per peer address. */
static void reject(const struct tgt_conn_msg *m, uint16_t reason)
{
	static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("queue connection refused", RB_LOG_WARN);
	char peer[128], addr[TGT_ADDR_MAX];

	m->ops->conn_peer(m->conn, peer, sizeof(peer));
	tgt_peer_addr(peer, addr, sizeof(addr));
	rb_log_limited(&lim, addr, RB_LOG_WARN, "%s peer %s: connection for queue %u rejected: %s",
		       m->ops->name, peer, rb_from_le16(m->req.qid), rb_reject_name(reason));
	reject_quiet(m, reason);
}

#define LINE(n) (((n) + 63) / 64 * 64)

/*
 * A queue's arrays live in one anonymous mapping sized from its granted
 * depth: capsules (+ QUEUE_AUTH slices, registered), responses (registered),
 * requests, receive slots.  Freed, it goes back to the kernel at once; from
 * malloc, thousands of queues closing left their memory in the reactors'
 * arenas (854 MB resident after 556 sessions closed, issue 31).
 */
struct queue_layout {
	size_t capsules, rsps, reqs, recvs, len;
};

static void queue_layout(uint16_t depth, struct queue_layout *l)
{
	size_t page = 4096, nr_reqs = (size_t)depth * 2;

	l->capsules = 0;
	l->rsps = LINE((size_t)depth * (sizeof(struct rb_capsule) + RB_QUEUE_AUTH_SIZE));
	l->reqs = l->rsps + LINE(nr_reqs * sizeof(struct rb_response));
	l->recvs = l->reqs + LINE(nr_reqs * sizeof(struct tgt_req));
	l->len = (l->recvs + depth * sizeof(struct tgt_recv) + page - 1) / page * page;
}

size_t tgt_queue_mem(uint16_t depth)
{
	struct queue_layout l;

	queue_layout(depth, &l);
	return l.len + LINE(sizeof(struct tgt_queue));
}

static struct rb_conn_caps queue_caps(uint16_t depth, uint32_t max_rd)
{
	return (struct rb_conn_caps){
		.max_send_wr = depth * 4u, /* 2 x depth requests: response + RDMA op each */
		.max_recv_wr = depth,
		.max_sge = 2,
		.max_inline = RB_RESPONSE_SIZE,
		.max_rd_atomic = max_rd,
		.max_dest_rd_atomic = 0, /* initiators may not READ target memory */
	};
}

size_t tgt_conn_mem(const struct rb_target_conf *c, const struct rb_transport_ops *ops)
{
	uint16_t depth = c->max_queue_depth > ADMIN_DEPTH ? (uint16_t)c->max_queue_depth :
							    ADMIN_DEPTH;
	struct rb_conn_caps caps = queue_caps(depth, QUEUE_MAX_RD);

	/* A session per admin queue at most, and the hand-off message. */
	return tgt_queue_mem(depth) + ops->conn_mem(&caps) + sizeof(struct tgt_session) +
	       sizeof(struct tgt_conn_msg);
}

static void queue_free_mem(struct tgt_queue *q)
{
	struct tgt_reactor *r = q->r;

	if (q->recvs && !q->incap_aux) {
		for (uint16_t i = 0; i < q->depth; i++)
			if (q->recvs[i].incap)
				rb_bufpool_put(&r->incap, q->recvs[i].incap);
	}
	if (q->recvs && q->incap_aux)
		for (uint16_t i = 0; i < q->depth; i++)
			q->recvs[i].incap = NULL; /* slices of aux, not the pool's */
	tgt_pool_leave(q);
	rb_auth_tgt_free(q->tauth);
	q->tauth = NULL;
	if (q->rsp_mr)
		q->cx->ops->dereg_mr(q->rsp_mr);
	if (q->capsule_mr)
		q->cx->ops->dereg_mr(q->capsule_mr);
	if (q->region)
		munmap(q->region, q->region_len);
	if (q->counted)
		tgt_conn_release(q->peer);
	free(q);
}

static int queue_alloc(struct tgt_queue *q)
{
	struct tgt_reactor *r = q->r;
	const struct rb_transport_ops *ops = q->cx->ops;
	struct queue_layout l;
	uint8_t *base;
	int ret;

	/*
	 * Twice as many requests as credits: the host may see a response and
	 * reuse its command id before our SEND completion frees the request
	 * (RC delivers the response before the local completion is polled).
	 * At most depth commands are active (received, not yet answered).
	 */
	q->nr_reqs = (uint32_t)q->depth * 2;
	queue_layout(q->depth, &l);
	base = mmap(NULL, l.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return -ENOMEM;
	q->region = base;
	q->region_len = l.len;
	/* Behind the capsules: RB_QUEUE_AUTH_SIZE per receive, where an I/O
	 * queue granted less in-capsule data takes its QUEUE_AUTH proof. */
	q->capsules = (struct rb_capsule *)(base + l.capsules);
	q->rsps = (struct rb_response *)(base + l.rsps);
	q->reqs = (struct tgt_req *)(base + l.reqs);
	q->recvs = (struct tgt_recv *)(base + l.recvs);
	q->aux = (uint8_t *)(q->capsules + q->depth);
	ret = ops->reg_mr(q->cx->domain, q->capsules,
			  (size_t)q->depth * (sizeof(*q->capsules) + RB_QUEUE_AUTH_SIZE),
			  RB_ACCESS_LOCAL, &q->capsule_mr);
	if (ret)
		return ret;
	ret = ops->reg_mr(q->cx->domain, q->rsps, (size_t)q->nr_reqs * sizeof(*q->rsps),
			  RB_ACCESS_LOCAL, &q->rsp_mr);
	if (ret)
		return ret;
	/* In-capsule data is an optimisation: a queue that finds the pool
	 * short still connects, and its writes go by RDMA READ instead. */
	if (q->incapsule && r->incap.nfree < q->depth) {
		static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("queues without in-capsule "
								   "buffers",
								   RB_LOG_WARN);

		rb_log_limited(&lim, q->peer, RB_LOG_WARN,
			       "%s peer %s: queue %u: %u of the reactor's %u in-capsule buffers "
			       "free, %u needed: this queue gets no in-capsule writes (raise "
			       "buffers = %u to give more)",
			       ops->name, q->peer, q->qid, r->incap.nfree, r->incap.count, q->depth,
			       r->t->conf.buffers);
		q->incapsule = 0;
	}
	q->recv_data = q->incapsule;
	if (q->qid && q->incapsule < RB_QUEUE_AUTH_SIZE) {
		q->incap_aux = true;
		q->recv_data = RB_QUEUE_AUTH_SIZE;
	}
	for (uint16_t i = 0; i < q->depth; i++) {
		struct tgt_recv *rv = &q->recvs[i];

		rv->q = q;
		rv->capsule = &q->capsules[i];
		if (q->incap_aux) {
			rv->incap = q->aux + (size_t)i * RB_QUEUE_AUTH_SIZE;
		} else if (q->incapsule) {
			rv->incap = rb_bufpool_get(&r->incap);
			if (!rv->incap)
				return -ENOBUFS;
		}
	}
	for (uint32_t i = 0; i < q->nr_reqs; i++) {
		struct tgt_req *req = &q->reqs[i];

		req->q = q;
		req->rsp = &q->rsps[i];
		req->state = REQ_FREE;
		req->next = q->free_reqs;
		q->free_reqs = req;
	}
	return 0;
}

int tgt_queue_create(struct tgt_reactor *r, struct tgt_conn_msg *m, struct tgt_cqctx *cx)
{
	const struct rb_target_conf *conf = &r->t->conf;
	const struct rb_cm_req2 *cr = &m->req;
	uint16_t qid = rb_from_le16(cr->qid), reason = RB_REJ_NONE;
	uint32_t want_depth = rb_from_le16(cr->depth), limit;
	struct rb_cm_rep2 rep;
	struct rb_conn_caps caps;
	struct tgt_session *s = NULL;
	static struct rb_log_limit lim_conn = TGT_CONN_LOG_LIMIT("queues connected");
	struct tgt_queue *q;
	char peer[128], addr[TGT_ADDR_MAX];
	int ret;

	/* Set before the reactors are told to stop: none takes a queue then. */
	if (atomic_load(&r->t->draining)) {
		reject(m, RB_REJ_SHUTTING_DOWN);
		return -ESHUTDOWN;
	}
	if (!cx) {
		reject(m, RB_REJ_NO_RESOURCES); /* cqctx_get logged why */
		return -ENODEV;
	}
	m->ops->conn_peer(m->conn, peer, sizeof(peer));
	reason = tgt_conn_admit(conf, m->ops->name, peer);
	if (reason != RB_REJ_NONE) {
		reject_quiet(m, reason); /* tgt_conn_admit logged why */
		return -EBUSY;
	}
	/* rb_check_cm_req() passed it: depth > 0, an admin queue names no session. */
	if (qid == 0) {
		limit = ADMIN_DEPTH;
	} else {
		s = tgt_session_bind(rb_from_le64(cr->session), qid, &reason);
		if (!s) {
			reject(m, reason);
			tgt_conn_release(peer);
			return -EINVAL;
		}
		limit = s->queue_depth;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		reject(m, RB_REJ_NO_RESOURCES);
		tgt_conn_release(peer);
		ret = -ENOMEM;
		goto out_unbind;
	}
	q->counted = true; /* released with its memory */
	q->r = r;
	q->conn = m->conn;
	q->conn->ctx = q;
	q->qid = qid;
	q->session = s;
	q->depth = (uint16_t)(want_depth < limit ? want_depth : limit);
	q->incapsule = rb_from_le32(cr->incapsule);
	if (q->incapsule > conf->incapsule)
		q->incapsule = conf->incapsule;
	if (qid == 0)
		q->incapsule = 0; /* admin commands carry data by key only */
	q->max_rd = QUEUE_MAX_RD;
	q->last_cmd_ns = q->last_work_ns = q->created_ns = rb_clock_ns();
	memcpy(q->peer, peer, sizeof(q->peer));
	q->cx = cx;
	ret = tgt_pool_join(q);
	if (!ret)
		ret = queue_alloc(q);
	if (ret)
		goto out_reject;
	/* Post a receive for every credit before accepting: RNR cannot happen. */
	for (uint16_t i = 0; i < q->depth; i++) {
		ret = tgt_req_post_recv(q, &q->recvs[i]);
		if (ret)
			break;
	}
	caps = queue_caps(q->depth, q->max_rd);
	rep = (struct rb_cm_rep2){ .magic = rb_le32(RB_MAGIC),
				   .version = rb_le16(RB_PROTO_VERSION),
				   .depth = rb_le16(q->depth),
				   .incapsule = rb_le32(q->incapsule) };
	/* An authenticated session's queue: our nonce and proof now, the
	 * host's proof in its first command (QUEUE_AUTH). */
	if (!ret && s && s->authed) {
		memcpy(q->nonce_h, cr->nonce, sizeof(q->nonce_h));
		ret = rb_auth_nonce(q->nonce_t);
		if (!ret)
			ret = rb_auth_queue_proof(&s->skey, true, qid, q->nonce_h, q->nonce_t,
						  rep.proof);
		memcpy(rep.nonce, q->nonce_t, sizeof(rep.nonce));
		q->auth_pending = true;
		q->auth_deadline_ns = q->created_ns + RB_AUTH_TIMEOUT_MS * 1000000ull;
	}
	if (!ret)
		ret = m->ops->accept(m->conn, q->cx->cq, &caps, &rep, sizeof(rep));
	if (ret) {
		rb_err("%s peer %s: accept queue %u failed: %s", m->ops->name, q->peer, qid,
		       strerror(-ret));
		/* Still a request: rejecting frees it, and receives posted on a
		 * request are dropped without completions. */
		goto out_reject;
	}
	q->accepted = true;
	q->qpn = m->ops->conn_qpn(m->conn);
	q->next = r->queues;
	r->queues = q;
	tgt_peer_addr(q->peer, addr, sizeof(addr));
	rb_log_limited(&lim_conn, addr, RB_LOG_INFO,
		       "%s peer %s: queue %u connected (qp %u, depth %u, in-capsule %u, reactor %d)",
		       m->ops->name, q->peer, qid, q->qpn, q->depth, q->incapsule, r->id);
	return 0;

out_reject:
	reject(m, RB_REJ_NO_RESOURCES);
	queue_free_mem(q);
out_unbind:
	if (s) {
		tgt_session_unbind(s, qid);
		tgt_session_put(s);
	}
	return ret;
}

void tgt_queue_fail(struct tgt_queue *q, const char *why)
{
	static struct rb_log_limit lim = TGT_CONN_LOG_LIMIT("queues closing");
	char addr[TGT_ADDR_MAX];

	if (q->dead)
		return;
	q->dead = true;
	/* Parked commands are dropped unanswered, like those in flight. */
	memset(&q->parked, 0, sizeof(q->parked));
	tgt_pool_drop_waiters(q);
	tgt_peer_addr(q->peer, addr, sizeof(addr));
	rb_log_limited(&lim, addr, RB_LOG_INFO, "%s peer %s: queue %u (qp %u) closing: %s",
		       q->cx->ops->name, q->peer, q->qid, q->qpn, why);
	/* Admin queue loss ends the session (NVMe-oF controller semantics). */
	if (q->qid == 0 && q->session)
		tgt_session_kill(q->session);
	q->cx->ops->disconnect(q->conn);
}

static void unlink_queue(struct tgt_queue *q)
{
	struct tgt_queue **pp = &q->r->queues;

	while (*pp && *pp != q)
		pp = &(*pp)->next;
	if (*pp)
		*pp = q->next;
}

/* Unlink q's requests from a reactor pending list. */
static void drop_pending(struct tgt_req_fifo *f, const struct tgt_queue *q)
{
	struct tgt_req *prev = NULL, *req, *next;

	for (req = f->head; req; req = next) {
		next = req->next;
		if (req->q == q)
			rb_fifo_unlink(f, prev, req);
		else
			prev = req;
	}
}

void tgt_queue_maybe_destroy(struct tgt_queue *q)
{
	if (!q->dead || q->wr_outstanding || q->io_inflight)
		return;
	unlink_queue(q);
	/* Requests waiting for a pool buffer or SQ space are not in flight:
	 * drop them from the pending lists before freeing. */
	tgt_pool_drop_waiters(q);
	drop_pending(&q->r->pending_exec, q);
	for (uint32_t i = 0; i < q->nr_reqs; i++) {
		struct tgt_req *req = &q->reqs[i];

		if (req->buf && req->buf_from_pool)
			tgt_pool_release(req);
		req->buf = NULL;
	}
	tgt_pool_leave(q); /* before its session may go */
	tgt_admin_release_replacing(q);
	if (q->session) {
		if (q->qid)
			tgt_session_unbind(q->session, q->qid);
		tgt_session_put(q->session);
	}
	rb_dbg("queue %u (peer %s) destroyed", q->qid, q->peer);
	q->r->queue_gone = true;
	q->r->trim_pending = true;
	q->cx->ops->conn_destroy(q->conn);
	queue_free_mem(q);
}

static bool queue_idle(const struct tgt_queue *q)
{
	for (uint32_t i = 0; i < q->nr_reqs; i++)
		if (q->reqs[i].state != REQ_FREE)
			return false;
	return true;
}

/* A timeout in 1 s ticks, rounded up; after the nudge at 2 (an honest host
 * acks then) even with the smallest timeout. */
static uint64_t timeout_ticks(uint32_t ms)
{
	uint64_t t = (ms + 999ull) / 1000;

	return (t < 2 ? 2 : t) + 1;
}

/*
 * A host that stops reading, or withholds the acknowledgements of the tcp
 * transport (or never reposts receives over rdma with rnr-retry 7), or
 * never lets its write data be fetched, would keep the pool buffers of its
 * requests forever, and the reactor's other hosts would wait for buffers
 * behind it.  Over rdma a live host cannot hold back acknowledgements, and
 * the retry counters end a dead one; this is the same bound for every
 * transport.  While others wait for buffers (pool.c), a buffer waits for
 * its host only pressure-timeout: an honest host answers a fetch and acks
 * a response in milliseconds, and is asked for its acks at once then.
 */
bool tgt_queue_check_transfers(struct tgt_queue *q)
{
	static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("transfer timeout", RB_LOG_WARN);
	const struct rb_target_conf *c = &q->r->t->conf;
	const struct tgt_reactor *r = q->r;
	uint64_t limit = timeout_ticks(c->transfer_timeout_ms), plimit = limit;
	bool overdue = false, slow = false, pressure;

	if (q->dead)
		return false;
	pressure = tgt_pool_pressure(q);
	if (pressure && c->pressure_timeout_ms < c->transfer_timeout_ms)
		plimit = timeout_ticks(c->pressure_timeout_ms);
	for (uint32_t i = 0; i < q->nr_reqs; i++) {
		const struct tgt_req *req = &q->reqs[i];
		uint64_t age = r->tick - req->posted_tick;
		bool held = req->buf && req->buf_from_pool;

		if (!req->wr_pending ||
		    (req->state != REQ_TRANSFER_FROM_HOST && req->state != REQ_COMPLETING))
			continue;
		if (age >= (held ? plimit : limit)) {
			bool by_pressure = held && plimit < limit;

			rb_log_limited(&lim, q->peer, RB_LOG_WARN,
				       "queue %u (peer %s, qp %u): %s cid %u: the host did not "
				       "complete the %s within %s (%u ms)%s; closing the queue to "
				       "free its %u buffers",
				       q->qid, q->peer, q->qpn, rb_opcode_name(req->cmd.opcode),
				       rb_from_le16(req->cmd.cid),
				       req->state == REQ_COMPLETING ? "response" : "data transfer",
				       by_pressure ? "pressure-timeout" : "transfer-timeout",
				       by_pressure ? c->pressure_timeout_ms :
						     c->transfer_timeout_ms,
				       by_pressure ? " while other hosts wait for buffers" : "",
				       q->pool_held);
			tgt_queue_fail(q, by_pressure ? "pressure timeout" : "transfer timeout");
			return false;
		}
		if (age >= 2) {
			overdue = true;
			slow = slow || held;
		}
	}
	q->pool_slow = slow;
	return overdue;
}

void tgt_queue_check_auth(struct tgt_queue *q, uint64_t now_ns)
{
	if (q->dead || !q->auth_pending || now_ns < q->auth_deadline_ns)
		return;
	tgt_auth_failed(q, q->session->hostid, "I/O queue", "no QUEUE_AUTH in time");
	tgt_queue_fail(q, "authentication timed out");
	tgt_queue_maybe_destroy(q);
}

void tgt_queue_drain(struct tgt_reactor *r, bool force)
{
	struct tgt_queue *q, *next;

	for (q = r->queues; q; q = next) {
		next = q->next;
		if (!q->dead && (force || queue_idle(q)))
			tgt_queue_fail(q, force ? "shutdown (drain timed out)" : "shutdown");
		tgt_queue_maybe_destroy(q);
	}
}
