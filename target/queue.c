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

#include "checked.h"
#include "log.h"
#include "log_limit.h"
#include "target.h"

#define ADMIN_DEPTH 16

static void reject(const struct tgt_conn_msg *m, uint16_t reason)
{
	static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("rejected connections", RB_LOG_WARN);
	struct rb_cm_rej rej = rb_cm_rej_make(reason);
	char peer[128];

	m->ops->conn_peer(m->conn, peer, sizeof(peer));
	rb_log_limited(&lim, peer, RB_LOG_WARN, "%s peer %s: connection for queue %u rejected: %s",
		       m->ops->name, peer, rb_from_le16(m->req.qid), rb_reject_name(reason));
	m->ops->reject(m->conn, &rej, sizeof(rej));
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
	rb_auth_tgt_free(q->tauth);
	q->tauth = NULL;
	if (q->rsp_mr)
		q->cx->ops->dereg_mr(q->rsp_mr);
	if (q->capsule_mr)
		q->cx->ops->dereg_mr(q->capsule_mr);
	free(q->rsps);
	free(q->capsules);
	free(q->reqs);
	free(q->recvs);
	free(q);
}

static int queue_alloc(struct tgt_queue *q)
{
	struct tgt_reactor *r = q->r;
	const struct rb_transport_ops *ops = q->cx->ops;
	int ret;

	/*
	 * Twice as many requests as credits: the host may see a response and
	 * reuse its command id before our SEND completion frees the request
	 * (RC delivers the response before the local completion is polled).
	 * At most depth commands are active (received, not yet answered).
	 */
	q->nr_reqs = (uint32_t)q->depth * 2;
	q->recvs = calloc(q->depth, sizeof(*q->recvs));
	q->reqs = calloc(q->nr_reqs, sizeof(*q->reqs));
	/* Behind the capsules: RB_QUEUE_AUTH_SIZE per receive, where an I/O
	 * queue granted less in-capsule data takes its QUEUE_AUTH proof. */
	q->capsules = rb_alloc_lines((size_t)q->depth * (sizeof(*q->capsules) + RB_QUEUE_AUTH_SIZE));
	q->rsps = rb_alloc_lines((size_t)q->nr_reqs * sizeof(*q->rsps));
	if (!q->recvs || !q->reqs || !q->capsules || !q->rsps)
		return -ENOMEM;
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
	struct tgt_queue *q;
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
	/* rb_check_cm_req() passed it: depth > 0, an admin queue names no session. */
	if (qid == 0) {
		limit = ADMIN_DEPTH;
	} else {
		s = tgt_session_bind(rb_from_le64(cr->session), qid, &reason);
		if (!s) {
			reject(m, reason);
			return -EINVAL;
		}
		limit = s->queue_depth;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		reject(m, RB_REJ_NO_RESOURCES);
		ret = -ENOMEM;
		goto out_unbind;
	}
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
	q->max_rd = 16;
	q->last_cmd_ns = q->created_ns = rb_clock_ns();
	m->ops->conn_peer(m->conn, q->peer, sizeof(q->peer));
	q->cx = cx;
	ret = queue_alloc(q);
	if (ret)
		goto out_reject;
	/* Post a receive for every credit before accepting: RNR cannot happen. */
	for (uint16_t i = 0; i < q->depth; i++) {
		ret = tgt_req_post_recv(q, &q->recvs[i]);
		if (ret)
			break;
	}
	caps = (struct rb_conn_caps){
		.max_send_wr = q->nr_reqs * 2u, /* response + RDMA op each */
		.max_recv_wr = q->depth,
		.max_sge = 2,
		.max_inline = RB_RESPONSE_SIZE,
		.max_rd_atomic = q->max_rd,
		.max_dest_rd_atomic = 0, /* initiators may not READ target memory */
	};
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
	rb_info("%s peer %s: queue %u connected (qp %u, depth %u, in-capsule %u, reactor %d)",
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
	if (q->dead)
		return;
	q->dead = true;
	/* Parked commands are dropped unanswered, like those in flight. */
	memset(&q->parked, 0, sizeof(q->parked));
	rb_info("%s peer %s: queue %u (qp %u) closing: %s", q->cx->ops->name, q->peer, q->qid,
		q->qpn, why);
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
	 * drop them from the reactor's pending lists before freeing. */
	drop_pending(&q->r->pending_buf, q);
	drop_pending(&q->r->pending_exec, q);
	for (uint32_t i = 0; i < q->nr_reqs; i++) {
		struct tgt_req *req = &q->reqs[i];

		if (req->buf && req->buf_from_pool)
			rb_bufpool_put(&q->r->pool, req->buf);
		req->buf = NULL;
	}
	tgt_admin_release_replacing(q);
	if (q->session) {
		if (q->qid)
			tgt_session_unbind(q->session, q->qid);
		tgt_session_put(q->session);
	}
	rb_dbg("queue %u (peer %s) destroyed", q->qid, q->peer);
	q->r->queue_gone = true;
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

/*
 * A host that stops reading, or withholds the acknowledgements of the tcp
 * transport (or never reposts receives over rdma with rnr-retry 7), would
 * keep the pool buffers of its requests forever, and the reactor's other
 * hosts would wait for buffers behind it.  Over rdma a live host cannot
 * hold back acknowledgements, and the retry counters end a dead one; this
 * is the same bound for every transport.
 */
bool tgt_queue_check_transfers(struct tgt_queue *q)
{
	const struct tgt_reactor *r = q->r;
	/* In 1 s ticks, rounded up; after the nudge at 2 (an honest host
	 * acks then) even with the smallest timeout. */
	uint64_t limit = (r->t->conf.transfer_timeout_ms + 999) / 1000;
	bool overdue = false;

	limit = (limit < 2 ? 2 : limit) + 1;

	if (q->dead)
		return false;
	for (uint32_t i = 0; i < q->nr_reqs; i++) {
		const struct tgt_req *req = &q->reqs[i];
		uint64_t age = r->tick - req->posted_tick;

		if (!req->wr_pending ||
		    (req->state != REQ_TRANSFER_FROM_HOST && req->state != REQ_COMPLETING))
			continue;
		if (age >= limit) {
			static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("transfer timeouts",
									   RB_LOG_WARN);

			rb_log_limited(&lim, q->peer, RB_LOG_WARN,
				       "queue %u (peer %s, qp %u): %s cid %u: the host did not "
				       "complete the %s within transfer-timeout (%u ms); closing the "
				       "queue to free its buffers",
				       q->qid, q->peer, q->qpn, rb_opcode_name(req->cmd.opcode),
				       rb_from_le16(req->cmd.cid),
				       req->state == REQ_COMPLETING ? "response" : "data transfer",
				       r->t->conf.transfer_timeout_ms);
			tgt_queue_fail(q, "transfer timeout");
			return false;
		}
		if (age >= 2)
			overdue = true;
	}
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
