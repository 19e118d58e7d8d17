/* SPDX-License-Identifier: MIT */
/*
 * Initiator queues: one transport connection each, owned by one reactor.
 * Command slots (cid = index) carry the per-command state: owner request,
 * deadline, the command as sent, and a buffer in the queue's registered
 * pool.  A slot returns to the free stack only when the frontend released
 * it, its SEND completed and its response arrived (or the queue died).
 * Its command completes to the frontend once both of the latter are in:
 * an answer polled before its SEND's completion is held in the slot
 * (answered), so a frontend that keeps the slot never posts a second
 * SEND on it while the first is still the transport's.  This file is the
 * I/O path; setting a queue up and tearing it down is in queue_conn.c.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checked.h"
#include "initiator.h"
#include "log.h"
#include "log_limit.h"

/* ---- slots ------------------------------------------------------------- */

static void slot_maybe_free(struct ini_queue *q, struct rb_slot *sl)
{
	if (sl->held || sl->send_pending || sl->resp_pending || sl->free)
		return;
	sl->free = true;
	q->free_stack[q->nr_free++] = sl->cid;
	if (!rb_fifo_empty(&q->waiters))
		rb_reactor_defer(q->r, &q->wake_task);
}

static struct rb_slot *slot_alloc(struct ini_queue *q)
{
	struct rb_slot *sl = &q->slots[q->free_stack[--q->nr_free]];

	sl->free = false;
	sl->held = true;
	return sl;
}

uint16_t rb_queue_id(const struct ini_queue *q)
{
	return q->qid;
}

struct ini_reactor *rb_queue_reactor(const struct ini_queue *q)
{
	return q->r;
}

uint32_t rb_queue_depth(const struct ini_queue *q)
{
	return q->depth;
}

uint32_t rb_queue_buf_size(const struct ini_queue *q)
{
	return q->buf_size;
}

bool rb_queue_dead(const struct ini_queue *q)
{
	return q->dead;
}

bool rb_queue_usable(const struct ini_queue *q)
{
	return !atomic_load(&q->gone);
}

static bool op_has_data(uint8_t opcode)
{
	return opcode == RB_OP_READ || opcode == RB_OP_WRITE;
}

unsigned int rb_queue_slots_for(const struct ini_queue *q, uint8_t opcode, uint32_t length)
{
	if (!op_has_data(opcode) || length == 0)
		return 1;
	return (unsigned int)((length + (uint64_t)q->buf_size - 1) / q->buf_size);
}

int rb_queue_slots_get(struct ini_queue *q, unsigned int n, struct rb_slot **out)
{
	/* Recovering: park (rb_queue_slots_wait) until reconnected or given up. */
	if (q->dead)
		return atomic_load(&q->s->recovering) ? -EAGAIN : -EIO;
	if (!n || n > q->depth)
		return -EINVAL;
	/* FIFO: a parked waiter goes first, or big requests would starve.
	 * A stalled target frees nothing: fail now rather than after a wait. */
	if (!rb_fifo_empty(&q->waiters) || q->nr_free < n)
		return q->stalled ? -EIO : -EAGAIN;
	for (unsigned int i = 0; i < n; i++)
		out[i] = slot_alloc(q);
	return 0;
}

/* A slot frees, and a held answer goes out, only once its SEND completed:
 * slot waiters and held answers need that wakeup. */
bool ini_queue_waits_for_send(const struct ini_queue *q)
{
	return !rb_fifo_empty(&q->waiters) || q->nr_answered;
}

void rb_queue_slots_put(struct ini_queue *q, unsigned int n, struct rb_slot **slots)
{
	for (unsigned int i = 0; i < n; i++) {
		slots[i]->held = false;
		slot_maybe_free(q, slots[i]);
	}
}

void rb_queue_slots_wait(struct ini_queue *q, struct rb_slot_waiter *w)
{
	w->deadline_ms = rb_now_ms() + q->timeout_ms;
	w->queued = true;
	rb_fifo_push(&q->waiters, w);
	/* Slots may be free already, or the queue dead: answer from the loop. */
	rb_reactor_defer(q->r, q->dead ? &q->reap_task : &q->wake_task);
}

void rb_queue_slots_cancel(struct ini_queue *q, struct rb_slot_waiter *w)
{
	struct rb_slot_waiter *prev = NULL, *p = q->waiters.head;

	if (!w->queued)
		return;
	while (p && p != w) {
		prev = p;
		p = p->next;
	}
	if (p)
		rb_fifo_unlink(&q->waiters, prev, w);
	w->queued = false;
	w->next = NULL;
}

static struct rb_slot_waiter *waiter_pop(struct ini_queue *q)
{
	struct rb_slot_waiter *w = rb_fifo_pop(&q->waiters);

	w->queued = false;
	return w;
}

static void wake_waiters(struct rb_task *t)
{
	struct ini_queue *q = rb_container_of(t, struct ini_queue, wake_task);

	while (!rb_fifo_empty(&q->waiters) && !q->dead) {
		struct rb_slot_waiter *w;

		if (q->nr_free >= q->waiters.head->n) {
			w = waiter_pop(q);
			for (unsigned int i = 0; i < w->n; i++)
				w->slots[i] = slot_alloc(q);
			w->fn(w, 0);
		} else if (q->stalled) {
			w = waiter_pop(q);
			w->fn(w, -EIO);
		} else {
			break;
		}
	}
}

/* ---- completions -------------------------------------------------------- */

/*
 * What a target can make us log at will (fail every command, answer late,
 * never answer, break the connection after every reconnect): rate-limited
 * per kind, the target URI naming the peer.
 */
static struct rb_log_limit lim_failed = RB_LOG_LIMIT_INIT("I/O failed by the target", RB_LOG_WARN);
static struct rb_log_limit lim_late = RB_LOG_LIMIT_INIT("late answer", RB_LOG_INFO);
static struct rb_log_limit lim_timeout = RB_LOG_LIMIT_INIT("command timeout", RB_LOG_WARN);
static struct rb_log_limit lim_lost = RB_LOG_LIMIT_INIT("queue lost", RB_LOG_ERR);
static struct rb_log_limit lim_no_slot = RB_LOG_LIMIT_INIT("no free command slot", RB_LOG_WARN);
static struct rb_log_limit lim_expired = RB_LOG_LIMIT_INIT("command not re-issued", RB_LOG_WARN);

static void io_chunk_done(struct rb_io *io, int err, uint16_t status, uint64_t result)
{
	if (err && !io->err)
		io->err = err;
	if (status && !io->status)
		io->status = status;
	io->result = result;
	if (--io->pending == 0)
		io->done(io, io->err);
}

static void fail_wc(struct ini_queue *q, const char *what, const struct rb_wc *wc)
{
	char why[160];

	snprintf(why, sizeof(why), "%s completion: %s (vendor error %u)", what,
		 rb_wc_status_name(wc->status), wc->vendor_err);
	ini_queue_fail(q, why);
}

int ini_queue_post_recv(struct ini_queue *q, struct ini_recv *rv)
{
	struct rb_sge sg = { .addr = rv->rsp, .length = RB_RESPONSE_SIZE,
			     .lkey = q->rsps_mr->lkey };
	int ret;

	ret = q->ops->post_recv(q->conn, &rv->cqe, &sg, 1);
	if (ret)
		return ret;
	q->wr_outstanding++;
	return 0;
}

static void recv_done(struct rb_cq *cq, struct rb_wc *wc)
{
	struct ini_recv *rv = rb_container_of(wc->cqe, struct ini_recv, cqe);
	struct ini_queue *q = rv->q;
	struct rb_response rsp;
	struct rb_slot *sl;
	struct rb_io *io;
	uint16_t cid, status;
	char why[96];
	int ret;

	q->wr_outstanding--;
	if (wc->status != RB_WC_SUCCESS) {
		fail_wc(q, "receive", wc);
		return;
	}
	q->r->arrivals++;
	/*
	 * A response that arrived before the connection died is still an
	 * answer (a flushed SEND can be polled first): use it, but only
	 * check and re-post while the queue lives.
	 */
	if (wc->byte_len != RB_RESPONSE_SIZE) {
		snprintf(why, sizeof(why), "response of %u bytes (want %u)", wc->byte_len,
			 RB_RESPONSE_SIZE);
		ini_queue_fail(q, why);
		return;
	}
	/* Copy out, then give the slot back to the transport at once. */
	memcpy(&rsp, rv->rsp, sizeof(rsp));
	ret = q->dead || q->no_repost ? 0 : ini_queue_post_recv(q, rv);
	if (ret) {
		snprintf(why, sizeof(why), "re-post receive: %s", strerror(-ret));
		ini_queue_fail(q, why);
	}
	if (q->auth_wait) {
		/* Nothing else is sent before QUEUE_AUTH is answered. */
		q->auth_wait = false;
		q->auth_answered = true;
		q->auth_status = rb_from_le16(rsp.status);
		return;
	}
	cid = rb_from_le16(rsp.cid);
	if (cid >= q->depth || !q->slots[cid].resp_pending) {
		snprintf(why, sizeof(why), "response for command id %u, which is not outstanding",
			 cid);
		ini_queue_fail(q, why); /* no-op if the reap got there first */
		return;
	}
	sl = &q->slots[cid];
	status = rb_from_le16(rsp.status);
	if (q->stalled) {
		q->stalled = false;
		rb_info("%s: queue %u: target answering again", q->s->target, q->qid);
	}
	/* Settle the slot before any callback: done() may reuse it at once. */
	sl->resp_pending = false;
	q->nr_inflight--;
	io = sl->io;
	sl->io = NULL;
	if (sl->timed_out) {
		sl->timed_out = false;
		rb_log_limited(&lim_late, q->s->target, RB_LOG_INFO,
			       "%s: queue %u: late answer (%s) for timed-out %s cid %u; slot released",
			       q->s->target, q->qid, rb_status_name(status),
			       rb_opcode_name(sl->opcode), cid);
	} else if (io) {
		/* Admin failures are reported by the caller, with context. */
		if (status && q->qid)
			rb_log_limited(&lim_failed, q->s->target, RB_LOG_WARN,
				       "%s: queue %u: %s offset %" PRIu64 " length %u failed: %s",
				       q->s->target, q->qid, rb_opcode_name(sl->opcode), sl->offset,
				       sl->length, rb_status_name(status));
		if (sl->send_pending) {
			/*
			 * The answer overtook our SEND's own completion (the
			 * ACK travels apart from it).  The capsule is the
			 * transport's until then and a frontend holding the
			 * slot would post a second SEND for it, past the send
			 * queue's depth: answer with the send completion, as
			 * nvme-rdma does.
			 */
			sl->io = io;
			sl->answered = true;
			q->nr_answered++;
			sl->ans_status = status;
			sl->ans_result = rb_from_le64(rsp.result);
			return;
		}
		io_chunk_done(io, status ? -rb_status_errno(status) : 0, status,
			      rb_from_le64(rsp.result));
	}
	slot_maybe_free(q, sl);
}

/* The answer kept by recv_done, once the slot's SEND has completed. */
static void deliver_answer(struct ini_queue *q, struct rb_slot *sl)
{
	struct rb_io *io = sl->io;
	uint16_t status = sl->ans_status;

	sl->io = NULL;
	sl->answered = false;
	q->nr_answered--;
	io_chunk_done(io, status ? -rb_status_errno(status) : 0, status, sl->ans_result);
}

static void send_done(struct rb_cq *cq, struct rb_wc *wc)
{
	struct rb_slot *sl = rb_container_of(wc->cqe, struct rb_slot, send_cqe);
	struct ini_queue *q = sl->q;

	q->wr_outstanding--;
	sl->send_pending = false;
	if (wc->status != RB_WC_SUCCESS)
		fail_wc(q, "send", wc);
	/* Even flushed: the target has answered, so the command went through. */
	if (sl->answered)
		deliver_answer(q, sl);
	slot_maybe_free(q, sl);
}

static void auth_send_done(struct rb_cq *cq, struct rb_wc *wc)
{
	struct ini_queue *q = rb_container_of(wc->cqe, struct ini_queue, auth_send_cqe);

	q->wr_outstanding--;
	if (wc->status != RB_WC_SUCCESS)
		fail_wc(q, "QUEUE_AUTH send", wc);
}

int ini_queue_post_auth(struct ini_queue *q, const uint8_t proof[RB_QUEUE_AUTH_SIZE])
{
	/* The two spare capsule slots behind the slots' own (queue_alloc). */
	struct rb_capsule *c = &q->caps[q->alloc_depth];
	void *data = &q->caps[q->alloc_depth + 1];
	struct rb_sge sg[2] = {
		{ .addr = c, .length = RB_CAPSULE_SIZE, .lkey = q->caps_mr->lkey },
		{ .addr = data, .length = RB_QUEUE_AUTH_SIZE, .lkey = q->caps_mr->lkey },
	};
	int ret;

	memset(c, 0, sizeof(*c));
	c->opcode = RB_OP_QUEUE_AUTH;
	c->handle = rb_le32(q->handle);
	c->length = rb_le32(RB_QUEUE_AUTH_SIZE);
	c->sgl.type = RB_SGL_INCAPSULE;
	c->sgl.length = rb_le32(RB_QUEUE_AUTH_SIZE);
	memcpy(data, proof, RB_QUEUE_AUTH_SIZE);
	q->auth_send_cqe.done = auth_send_done;
	q->auth_wait = true;
	q->auth_answered = false;
	ret = q->ops->post_send(q->conn, &q->auth_send_cqe, sg, 2);
	if (ret) {
		q->auth_wait = false;
		return ret;
	}
	q->wr_outstanding++;
	return 0;
}

/* After death: everything still waiting for an answer fails with EIO. */
void ini_queue_fail_inflight(struct ini_queue *q)
{
	if (!q->slots)
		return;
	for (uint32_t i = 0; i < q->alloc_depth; i++) {
		struct rb_slot *sl = &q->slots[i];
		struct rb_io *io;
		bool timed_out = sl->timed_out;

		/* A dead queue posts nothing more: the answer may go now. */
		if (sl->answered) {
			deliver_answer(q, sl);
			slot_maybe_free(q, sl);
			continue;
		}
		if (!sl->resp_pending)
			continue;
		sl->resp_pending = false;
		sl->timed_out = false;
		q->nr_inflight--;
		io = sl->io;
		sl->io = NULL;
		if (io && !timed_out)
			io_chunk_done(io, -EIO, 0, 0);
		slot_maybe_free(q, sl);
	}
	while (!rb_fifo_empty(&q->waiters)) {
		struct rb_slot_waiter *w = waiter_pop(q);

		w->fn(w, -EIO);
	}
}

/*
 * A session being recovered keeps its I/O commands for re-issue
 * (recover.c); admin commands are never re-issued, and the recovery's own
 * CONNECT waits for this to fail it when the target never answers it.
 * Otherwise drain before fail: a queue may be failed from outside its CQ
 * (a timeout, the session's loss seen on another reactor, a shutdown)
 * while answers wait there unpolled, and an answer that arrived is an
 * answer, not EIO.  Only what is still unanswered after that fails.
 */
static bool keeps_cmds(const struct ini_queue *q)
{
	return q->qid && atomic_load(&q->s->recovering);
}

static void reap(struct rb_task *t)
{
	struct ini_queue *q = rb_container_of(t, struct ini_queue, reap_task);

	if (keeps_cmds(q))
		return;
	ini_reactor_poll(q->r);
	if (!keeps_cmds(q))
		ini_queue_fail_inflight(q);
}

static void kill_task(struct rb_task *t)
{
	ini_queue_fail(rb_container_of(t, struct ini_queue, kill_task),
		       "session lost (admin queue gone)");
}

void ini_queue_fail(struct ini_queue *q, const char *why)
{
	if (q->dead)
		return;
	q->dead = true;
	atomic_store(&q->gone, true);
	if (q->connected && !q->s->closing)
		rb_log_limited(&lim_lost, q->s->target, RB_LOG_ERR,
			       "%s: queue %u (peer %s, qp %u) lost: %s; %s", q->s->target, q->qid,
			       q->peer, q->qpn, why,
			       q->s->p.ctrl_loss_tmo_ms ? "the session reconnects" :
							  "its I/O fails with EIO");
	if (q->conn && !q->disconnected) {
		q->disconnected = true;
		q->ops->disconnect(q->conn);
	}
	rb_reactor_defer(q->r, &q->reap_task);
	if (q->connected)
		ini_session_queue_died(q->s, q);
}

/* ---- submission ---------------------------------------------------------- */

/* The slot now carries this chunk of io, unanswered. */
static void slot_take_cmd(struct ini_queue *q, struct rb_slot *sl, struct rb_io *io, uint64_t off,
			  uint32_t len, uint64_t deadline)
{
	sl->io = io;
	sl->opcode = io->opcode;
	sl->flags = io->flags;
	sl->offset = off;
	sl->length = len;
	sl->deadline_ms = deadline;
	sl->timed_out = false;
	sl->resp_pending = true;
	q->nr_inflight++;
}

/*
 * The queue died and its session is reconnecting: the command stays in its
 * slot as if it had been sent and lost, so the reconnect re-issues it (or
 * the give-up fails it) with the rest.  A frontend that holds its slots
 * across requests (ublk) submits between the loss and the parking of the
 * reactors, when rb_queue_slots_get would have made it wait.
 */
static void park_cmd(struct ini_queue *q, struct rb_slot *sl, struct rb_io *io, uint64_t off,
		     uint32_t len, uint64_t deadline)
{
	assert(!sl->send_pending && !sl->answered && !sl->resp_pending);
	slot_take_cmd(q, sl, io, off, len, deadline);
}

static bool recovering(const struct ini_queue *q)
{
	return atomic_load(&q->s->recovering);
}

static int post_cmd(struct ini_queue *q, struct rb_slot *sl, struct rb_io *io, uint64_t off,
		    uint32_t len, uint64_t deadline)
{
	struct rb_capsule *c = &q->caps[sl->cid];
	struct rb_sge sg[2];
	int nsge = 1, ret;
	uint8_t op = io->opcode;

	/* recv_done holds a slot's answer until its last SEND completed. */
	assert(!sl->send_pending && !sl->answered);
	memset(c, 0, sizeof(*c));
	c->opcode = op;
	c->flags = io->flags;
	c->cid = rb_le16(sl->cid);
	c->handle = rb_le32(q->handle);
	c->offset = rb_le64(off);
	c->length = rb_le32(len);
	sg[0] = (struct rb_sge){ .addr = c, .length = RB_CAPSULE_SIZE, .lkey = q->caps_mr->lkey };
	if (op == RB_OP_WRITE && len <= q->incapsule) {
		/* Small write: capsule + data in one SEND, no RDMA READ round trip. */
		c->sgl.type = RB_SGL_INCAPSULE;
		c->sgl.length = rb_le32(len);
		sg[1] = (struct rb_sge){ .addr = sl->buf, .length = len,
					 .lkey = q->pool_mr->lkey };
		nsge = 2;
	} else if (op == RB_OP_WRITE || op == RB_OP_READ || op == RB_OP_CONNECT ||
		   op == RB_OP_LIST_EXPORTS || op == RB_OP_AUTH) {
		c->sgl.type = RB_SGL_KEYED;
		c->sgl.addr = rb_le64((uint64_t)(uintptr_t)sl->buf);
		c->sgl.length = rb_le32(len);
		c->sgl.key = rb_le32(q->pool_mr->rkey);
	} else {
		c->sgl.type = RB_SGL_NONE;
	}

	slot_take_cmd(q, sl, io, off, len, deadline);
	sl->send_pending = true;
	q->wr_outstanding++;
	ret = q->ops->post_send(q->conn, &sl->send_cqe, sg, nsge);
	if (ret) {
		sl->io = NULL;
		sl->send_pending = false;
		sl->resp_pending = false;
		q->nr_inflight--;
		q->wr_outstanding--;
	}
	return ret;
}

int rb_queue_submit(struct ini_queue *q, struct rb_io *io)
{
	unsigned int n, posted = 0;
	uint64_t deadline;
	char why[96];

	if (q->dead && !recovering(q))
		return -EIO;
	n = rb_queue_slots_for(q, io->opcode, io->length);
	if (!io->done || !io->slots || io->nr_slots != n)
		return -EINVAL;
	deadline = rb_now_ms() + (io->timeout_ms ? io->timeout_ms : q->timeout_ms);
	io->err = 0;
	io->status = 0;
	io->result = 0;
	io->pending = n + 1; /* +1: done() cannot run before the loop ends */
	for (unsigned int i = 0; i < n; i++) {
		uint64_t off = io->offset;
		uint32_t len = io->length;
		int ret;

		if (op_has_data(io->opcode)) {
			uint64_t done = (uint64_t)i * q->buf_size;

			off += done;
			len = io->length - done < q->buf_size ? (uint32_t)(io->length - done) :
								 q->buf_size;
		}
		io->slots[i]->give_up_ms = deadline + q->s->p.ctrl_loss_tmo_ms;
		ret = q->dead ? -ENOTCONN : post_cmd(q, io->slots[i], io, off, len, deadline);
		if (ret && !q->dead) {
			snprintf(why, sizeof(why), "post %s: %s", rb_opcode_name(io->opcode),
				 strerror(-ret));
			ini_queue_fail(q, why);
		}
		if (ret && !recovering(q)) {
			io->err = -EIO;
			io->pending -= n - i;
			break;
		}
		if (ret)
			park_cmd(q, io->slots[i], io, off, len, deadline);
		posted++;
	}
	io->pending--;
	/* Nothing went out: report synchronously, done() never runs.  If some
	 * chunks did go out, the reap fails them and done() runs later. */
	return posted ? 0 : -EIO;
}

/* ---- timeouts ------------------------------------------------------------ */

void ini_queue_tick(struct ini_queue *q, uint64_t now)
{
	if (!q->dead && (q->nr_inflight || q->nr_answered)) {
		for (uint32_t i = 0; i < q->depth; i++) {
			struct rb_slot *sl = &q->slots[i];
			struct rb_io *io;

			if (sl->answered && now >= sl->deadline_ms) {
				/* Answered, but our own SEND never completed (over tcp: the
				 * target never acknowledged the capsule).  The connection
				 * is what fails; its flush delivers the answer. */
				rb_log_limited(&lim_timeout, q->s->target, RB_LOG_WARN,
					       "%s: queue %u: %s cid %u answered, but its command "
					       "SEND did not complete in time",
					       q->s->target, q->qid, rb_opcode_name(sl->opcode),
					       sl->cid);
				ini_queue_fail(q, "command SEND not completed");
				return;
			}
			if (!sl->resp_pending || sl->timed_out || now < sl->deadline_ms)
				continue;
			if (q->s->p.ctrl_loss_tmo_ms) {
				/* NVMe-oF error recovery: the connection is what failed,
				 * not the command; reconnect and send it again. */
				rb_log_limited(&lim_timeout, q->s->target, RB_LOG_WARN,
					       "%s: queue %u: %s cid %u offset %" PRIu64
					       " length %u not answered in time; reconnecting to "
					       "send it again",
					       q->s->target, q->qid, rb_opcode_name(sl->opcode),
					       sl->cid, sl->offset, sl->length);
				ini_queue_fail(q, "command timeout");
				return;
			}
			/* Fail the request, keep the slot: the target may still
			 * answer and RDMA into the buffer. */
			sl->timed_out = true;
			io = sl->io;
			sl->io = NULL;
			rb_log_limited(&lim_timeout, q->s->target, RB_LOG_WARN,
				       "%s: queue %u: %s cid %u offset %" PRIu64 " length %u not "
				       "answered in time; failing it with EIO (slot stays reserved)",
				       q->s->target, q->qid, rb_opcode_name(sl->opcode), sl->cid,
				       sl->offset, sl->length);
			if (!q->stalled) {
				q->stalled = true;
				rb_warn("%s: queue %u: target not answering; requests that find no "
					"free slot fail with EIO until it does",
					q->s->target, q->qid);
				if (!rb_fifo_empty(&q->waiters))
					rb_reactor_defer(q->r, &q->wake_task);
			}
			if (io)
				io_chunk_done(io, -EIO, 0, 0);
		}
	}
	/* Waiters share one timeout, so the oldest expires first. */
	while (!rb_fifo_empty(&q->waiters) && now >= q->waiters.head->deadline_ms) {
		struct rb_slot_waiter *w = waiter_pop(q);

		rb_log_limited(&lim_no_slot, q->s->target, RB_LOG_WARN,
			       "%s: queue %u: no free command slot within %u ms", q->s->target,
			       q->qid, q->timeout_ms);
		w->fn(w, -ETIMEDOUT);
	}
}

/* ---- for queue_conn.c ----------------------------------------------------- */

/* ---- what the reactor asks of the queue (reactor.h) ---------------------- */

static void rq_tick(struct ini_reactor_queue *rq, uint64_t now_ms)
{
	ini_queue_tick(rb_container_of(rq, struct ini_queue, rq), now_ms);
}

static bool rq_waits_for_send(const struct ini_reactor_queue *rq)
{
	return ini_queue_waits_for_send(rb_container_of(rq, const struct ini_queue, rq));
}

static bool rq_release_transport(struct ini_reactor_queue *rq)
{
	return ini_queue_release_transport(rb_container_of(rq, struct ini_queue, rq));
}

static const struct ini_reactor_queue_ops queue_reactor_ops = {
	.tick = rq_tick,
	.waits_for_send = rq_waits_for_send,
	.release_transport = rq_release_transport,
};

void ini_queue_init_tasks(struct ini_queue *q)
{
	q->rq.ops = &queue_reactor_ops;
	q->reap_task.fn = reap;
	q->wake_task.fn = wake_waiters;
	q->kill_task.fn = kill_task;
}

void ini_queue_init_cqes(struct ini_queue *q)
{
	for (uint32_t i = 0; i < q->alloc_depth; i++) {
		q->slots[i].send_cqe.done = send_done;
		q->recvs[i].cqe.done = recv_done;
	}
}

/* Send a command again, as it was, with a new deadline. */
static int reissue(struct ini_queue *q, struct rb_slot *sl, uint64_t deadline)
{
	struct rb_io *io = sl->io;
	int ret;

	sl->resp_pending = false;
	q->nr_inflight--;
	ret = post_cmd(q, sl, io, sl->offset, sl->length, deadline);
	if (ret) {
		/* Still the io's: the next attempt, or the give-up, settles it. */
		sl->io = io;
		sl->resp_pending = true;
		q->nr_inflight++;
	}
	return ret;
}

int ini_queue_reissue_all(struct ini_queue *q, uint64_t deadline, uint32_t *n)
{
	uint64_t now = rb_now_ms();
	unsigned int expired = 0;
	int ret;

	*n = 0;
	for (uint32_t i = 0; i < q->depth; i++) {
		struct rb_slot *sl = &q->slots[i];

		if (!sl->resp_pending)
			continue;
		if (sl->timed_out || !sl->io) {
			/* Its request already failed: only the slot was waiting. */
			sl->resp_pending = false;
			sl->timed_out = false;
			sl->io = NULL;
			q->nr_inflight--;
			slot_maybe_free(q, sl);
			continue;
		}
		if (now >= sl->give_up_ms) {
			/* Sent and lost again and again: it fails, the session goes on. */
			struct rb_io *io = sl->io;

			sl->resp_pending = false;
			sl->io = NULL;
			q->nr_inflight--;
			io_chunk_done(io, -EIO, 0, 0);
			slot_maybe_free(q, sl);
			expired++;
			continue;
		}
		ret = reissue(q, sl, deadline);
		if (ret) {
			rb_err("%s: queue %u: re-issue cid %u: %s", q->s->target, q->qid, sl->cid,
			       strerror(-ret));
			return ret;
		}
		(*n)++;
	}
	if (expired)
		rb_log_limited(&lim_expired, q->s->target, RB_LOG_WARN,
			       "%s: queue %u: %u commands unanswered for their timeout + "
			       "ctrl-loss-tmo across reconnects; failed with EIO instead of re-issued",
			       q->s->target, q->qid, expired);
	return 0;
}
