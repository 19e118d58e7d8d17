/* SPDX-License-Identifier: MIT */
/*
 * A command's path through the target, from the receive slot it arrives in
 * to its answer: the state machine of enum tgt_req_state, driven by
 * receive, transfer and io_uring completions.  Resource shortages park a
 * request on one pending queue per resource (data buffers: its queue's line
 * in the fair order of pool.c; SQ space per reactor; RDMA READ slots per
 * queue); a command that finds no free request
 * parks its receive slot on the queue.  Admin commands execute in admin.c.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "checked.h"
#include "log.h"
#include "log_limit.h"
#include "target.h"

static void req_start(struct tgt_queue *q, struct tgt_recv *rv, uint32_t byte_len);
static void req_process(struct tgt_req *req);

/* Give the receive slot back to the transport (repost), once its data is used. */
static void req_release_recv(struct tgt_req *req)
{
	struct tgt_recv *rv = req->recv;

	if (!rv)
		return;
	req->recv = NULL;
	if (!req->q->dead)
		tgt_req_post_recv(req->q, rv);
}

static void req_free(struct tgt_req *req)
{
	struct tgt_queue *q = req->q;

	assert(req->wr_pending == 0);
	if (req->buf && req->buf_from_pool)
		tgt_pool_release(req);
	req->buf = NULL;
	req->buf_from_pool = false;
	req_release_recv(req);
	req->state = REQ_FREE;
	req->next = q->free_reqs;
	q->free_reqs = req;
	if (!rb_fifo_empty(&q->parked) && !q->dead) {
		struct tgt_recv *rv = rb_fifo_pop(&q->parked);

		req_start(q, rv, rv->byte_len);
		return;
	}
	if (q->dead)
		tgt_queue_maybe_destroy(q);
}

static void wr_done_common(struct tgt_req *req, struct rb_wc *wc, const char *what)
{
	static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("failed transfers", RB_LOG_ERR);
	struct tgt_queue *q = req->q;

	req->wr_pending--;
	q->wr_outstanding--;
	if (wc->status != RB_WC_SUCCESS) {
		if (wc->status != RB_WC_FLUSH_ERR)
			rb_log_limited(&lim, q->peer, RB_LOG_ERR,
				       "queue %u (peer %s, qp %u): %s for %s cid %u failed: %s "
				       "(status %d)",
				       q->qid, q->peer, q->qpn, what, rb_opcode_name(req->cmd.opcode),
				       rb_from_le16(req->cmd.cid), rb_wc_status_name(wc->status),
				       wc->status);
		tgt_queue_fail(q, "work request error");
	}
}

static void send_done(struct rb_cq *cq, struct rb_wc *wc)
{
	struct tgt_req *req = rb_container_of(wc->cqe, struct tgt_req, send_cqe);
	struct tgt_queue *q = req->q;

	wr_done_common(req, wc, "response send");
	if (req->wr_pending)
		return;
	/*
	 * Close after the DISCONNECT's own answer is delivered (its SEND
	 * completed: acknowledged by the host), not at the first completion
	 * after it: an earlier answer's SEND may complete in the same round,
	 * and closing then would flush the DISCONNECT answer unsent.
	 */
	if (q->disconnect_requested && req->cmd.opcode == RB_OP_DISCONNECT && !q->dead)
		tgt_queue_fail(q, "host sent DISCONNECT");
	if (req->close_after && !q->dead)
		tgt_queue_fail(q, "authentication failed");
	req_free(req);
}

static void write_done(struct rb_cq *cq, struct rb_wc *wc)
{
	struct tgt_req *req = rb_container_of(wc->cqe, struct tgt_req, write_cqe);

	wr_done_common(req, wc, "RDMA WRITE to host");
	if (!req->wr_pending)
		req_free(req);
}

static void read_done(struct rb_cq *cq, struct rb_wc *wc)
{
	struct tgt_req *req = rb_container_of(wc->cqe, struct tgt_req, read_cqe);
	struct tgt_queue *q = req->q;
	struct tgt_req *next;

	q->reads_inflight--;
	wr_done_common(req, wc, "RDMA READ from host");
	/* A freed READ slot lets the next waiting request go. */
	next = rb_fifo_pop(&q->pending_read);
	if (next)
		req_process(next);
	if (q->dead) {
		req_free(req);
		return;
	}
	req->state = REQ_READY_TO_EXECUTE;
	req_process(req);
}

/* Post the response (after an RDMA WRITE of read data, if any: RC keeps order). */
void tgt_req_complete(struct tgt_req *req, uint16_t status, uint64_t result)
{
	struct tgt_queue *q = req->q;
	const struct rb_transport_ops *ops = q->cx->ops;
	struct rb_sge sg;
	int ret;

	req->status = status;
	req->result = result;
	req->state = REQ_COMPLETING;
	req->posted_tick = q->r->tick;
	/* Answered (or about to be): the host may reuse this credit now. */
	assert(q->nr_active > 0);
	q->nr_active--;
	/* The receive's in-capsule data is no longer needed: repost it now so
	 * the host's next command, sent as soon as it sees this response, has
	 * a receive waiting. */
	req_release_recv(req);
	if (q->dead) {
		/* An RDMA WRITE of admin data posted to the dead connection
		 * still completes (flushed): write_done frees the request. */
		if (!req->wr_pending)
			req_free(req);
		return;
	}
	req->rsp->cid = req->cmd.cid;
	req->rsp->status = rb_le16(status);
	req->rsp->rsvd = 0;
	req->rsp->result = rb_le64(result);
	sg = (struct rb_sge){ .addr = req->rsp, .length = RB_RESPONSE_SIZE,
			      .lkey = q->rsp_mr->lkey };
	ret = ops->post_send(q->conn, &req->send_cqe, &sg, 1);
	if (ret) {
		rb_err("queue %u (peer %s, qp %u): post response: %s", q->qid, q->peer, q->qpn,
		       strerror(-ret));
		tgt_queue_fail(q, "post send failed");
		if (!req->wr_pending)
			req_free(req);
		return;
	}
	req->wr_pending++;
	q->wr_outstanding++;
}

/* Post the RDMA WRITE of data to the host; 0 or -errno (nothing posted). */
static int transfer_to_host(struct tgt_req *req, uint32_t buf_off, uint32_t len, uint64_t addr,
			    uint32_t key)
{
	struct tgt_queue *q = req->q;
	struct rb_sge sg = { .addr = (char *)req->buf + buf_off, .length = len,
			     .lkey = q->cx->pool_mr->lkey };
	int ret;

	ret = q->cx->ops->post_write(q->conn, &req->write_cqe, &sg, 1, addr, key);
	if (ret) {
		rb_err("queue %u (peer %s, qp %u): post RDMA WRITE: %s", q->qid, q->peer, q->qpn,
		       strerror(-ret));
		return ret;
	}
	req->wr_pending++;
	q->wr_outstanding++;
	return 0;
}

/* Send the response for an executed command, with read data first (a dead
 * queue's is dropped unanswered, like those still in flight). */
static void finish_executed(struct tgt_req *req)
{
	const struct rb_capsule *c = &req->cmd;

	if (req->q->dead) {
		req_free(req);
		return;
	}
	if (req->status == RB_S_SUCCESS && c->opcode == RB_OP_READ &&
	    transfer_to_host(req, 0, rb_from_le32(c->length), rb_from_le64(c->sgl.addr),
			     rb_from_le32(c->sgl.key)))
		req->status = RB_S_TRANSFER_ERROR;
	tgt_req_complete(req, req->status, req->result);
}

/* Admin handlers that produce data call this to WRITE it, then respond. */
void tgt_req_reply_data(struct tgt_req *req, uint32_t buf_off, uint32_t len, uint16_t status,
			uint64_t result)
{
	uint64_t addr = rb_from_le64(req->cmd.sgl.addr) + buf_off;

	if (status == RB_S_SUCCESS && len &&
	    transfer_to_host(req, buf_off, len, addr, rb_from_le32(req->cmd.sgl.key)))
		status = RB_S_TRANSFER_ERROR;
	tgt_req_complete(req, status, result);
}

static void count_op(struct tgt_export *e, const struct rb_capsule *c, int res)
{
	struct tgt_export_stats *s = &e->stats;

	if (res < 0) {
		atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
		return;
	}
	switch (c->opcode) {
	case RB_OP_READ: atomic_fetch_add_explicit(&s->reads, 1, memory_order_relaxed); break;
	case RB_OP_WRITE:
		atomic_fetch_add_explicit(&s->writes, 1, memory_order_relaxed);
		if (c->flags & RB_CMD_F_FUA)
			atomic_fetch_add_explicit(&s->fua_writes, 1, memory_order_relaxed);
		break;
	case RB_OP_FLUSH: atomic_fetch_add_explicit(&s->flushes, 1, memory_order_relaxed); break;
	case RB_OP_DISCARD:
		atomic_fetch_add_explicit(&s->discards, 1, memory_order_relaxed);
		break;
	case RB_OP_WRITE_ZEROES:
		atomic_fetch_add_explicit(&s->write_zeroes, 1, memory_order_relaxed);
		break;
	}
}

/* Errors by which fallocate says it cannot do this mode here (the range is
 * validated: EINVAL is the mode, or a kernel without IORING_OP_FALLOCATE). */
static bool fallocate_unsupported(int res)
{
	return res == -EOPNOTSUPP || res == -EINVAL || res == -ENOSYS || res == -ENOTTY;
}

static const char *zero_method_name(enum tgt_zero_method m)
{
	switch (m) {
	case TGT_ZM_ZERO_RANGE: return "fallocate ZERO_RANGE";
	case TGT_ZM_PUNCH: return "fallocate PUNCH_HOLE";
	case TGT_ZM_PUNCH_ALLOC: return "fallocate PUNCH_HOLE then allocate";
	case TGT_ZM_WRITE: return "writing zeroes";
	}
	return "?";
}

static unsigned int zero_chain_id(const struct tgt_req *req)
{
	return req->cmd.flags & RB_CMD_F_NO_HOLE ? TGT_ZC_NO_HOLE : TGT_ZC_DEALLOC;
}

static enum tgt_zero_method zero_method(const struct tgt_export *e, const struct tgt_req *req)
{
	return e->backend->zero_chains[zero_chain_id(req)].m[req->z.idx];
}

/* Method z.idx of the chain is unsupported: the next one, for this request
 * and (logged once per step down) for the export's later ones. */
static void zero_step_down(struct tgt_export *e, struct tgt_req *req, int res)
{
	unsigned int id = zero_chain_id(req);
	const struct tgt_zero_chain *ch = &e->backend->zero_chains[id];
	unsigned int next = req->z.idx + 1u, cur = atomic_load(&e->zero_first[id]);

	assert(next < ch->n); /* writing zeroes never counts as unsupported */
	if (cur > next)
		next = cur; /* another request already found more unsupported */
	while (cur < next && !atomic_compare_exchange_weak(&e->zero_first[id], &cur, next))
		;
	if (cur < next)
		rb_warn("export %s: %s not supported (%s); write-zeroes%s uses %s from now on",
			e->conf.name, zero_method_name(ch->m[req->z.idx]), strerror(-res),
			id == TGT_ZC_NO_HOLE ? " with NO_HOLE" : "", zero_method_name(ch->m[next]));
	req->z.idx = (uint8_t)next;
	req->z.step = 0;
}

/*
 * A WRITE_ZEROES step finished with *res: true if the request goes on (next
 * method, the allocating half, the next chunk of zeroes), false when *res is
 * the outcome of the zeroing.
 */
static bool zero_step_done(struct tgt_export *e, struct tgt_req *req, int *res)
{
	uint32_t len = rb_from_le32(req->cmd.length);
	enum tgt_zero_method m = zero_method(e, req);

	if (m == TGT_ZM_WRITE) {
		if (*res < 0)
			return false;
		if (*res == 0) {
			*res = -EIO; /* no progress inside a validated range */
			return false;
		}
		req->z.done += (uint32_t)*res;
		if (req->z.done < len)
			return true;
		*res = 0;
		return false;
	}
	if (*res >= 0) {
		if (m == TGT_ZM_PUNCH_ALLOC && req->z.step == 0) {
			req->z.step = 1;
			return true;
		}
		return false;
	}
	if (!fallocate_unsupported(*res))
		return false;
	zero_step_down(e, req, *res);
	return true;
}

/* Back to READY_TO_EXECUTE for the request's next backend step. */
static void next_step(struct tgt_req *req)
{
	req->state = REQ_READY_TO_EXECUTE;
	req_process(req);
}

void tgt_req_io_done(struct tgt_req *req, int res)
{
	struct tgt_queue *q = req->q;
	struct tgt_export *e = q->session->export;
	const struct rb_capsule *c = &req->cmd;
	uint32_t len = rb_from_le32(c->length);

	assert(req->state == REQ_EXECUTING);
	q->io_inflight--;
	if (c->opcode == RB_OP_WRITE_ZEROES && !req->fua_sync && zero_step_done(e, req, &res) &&
	    !q->dead) {
		next_step(req);
		return;
	}
	/* TRIM is advisory: where the store cannot deallocate, it did its job. */
	if (c->opcode == RB_OP_DISCARD && fallocate_unsupported(res)) {
		if (!atomic_exchange(&e->discard_unsupported, true))
			rb_warn("export %s: discard not supported (%s); discards succeed "
				"without effect from now on",
				e->conf.name, strerror(-res));
		res = 0;
	}
	/* FUA write-zeroes: the zeroing is done; now make it durable. */
	if (res >= 0 && c->opcode == RB_OP_WRITE_ZEROES && (c->flags & RB_CMD_F_FUA) &&
	    !req->fua_sync && !q->dead) {
		req->fua_sync = true;
		next_step(req);
		return;
	}
	count_op(e, c, res);
	if (res < 0) {
		rb_err("export %s: %s offset %llu length %u (peer %s, queue %u): %s",
		       e->conf.name, rb_opcode_name(c->opcode),
		       (unsigned long long)rb_from_le64(c->offset), len, q->peer, q->qid,
		       strerror(-res));
		req->status = rb_errno_status(res);
		if (req->status == RB_S_INVALID_FIELD)
			req->status = RB_S_IO_ERROR;
	} else if ((c->opcode == RB_OP_READ || c->opcode == RB_OP_WRITE) &&
		   (uint32_t)res != len) {
		/* Short transfer inside a validated range: the backing store shrank. */
		rb_err("export %s: short %s at %llu: %d of %u bytes", e->conf.name,
		       rb_opcode_name(c->opcode), (unsigned long long)rb_from_le64(c->offset),
		       res, len);
		req->status = RB_S_IO_ERROR;
	} else {
		req->status = RB_S_SUCCESS;
	}
	req->result = 0;
	finish_executed(req);
}

/* Answered without the backend: a DISCARD the store cannot do (success) or
 * a FAST_ZERO that would have to write (NOT_SUPPORTED, expected: no error
 * logged or counted). */
static void finish_now(struct tgt_req *req, uint16_t status)
{
	struct tgt_export *e = req->q->session->export;

	if (status == RB_S_SUCCESS)
		count_op(e, &req->cmd, 0);
	req->status = status;
	req->result = 0;
	finish_executed(req);
}

/* WRITE_ZEROES: false if it must not go to the backend (FAST_ZERO refused). */
static bool zero_may_run(struct tgt_export *e, struct tgt_req *req)
{
	if (!req->z.started) {
		req->z.started = true;
		req->z.idx = (uint8_t)atomic_load(&e->zero_first[zero_chain_id(req)]);
	}
	if (!(req->cmd.flags & RB_CMD_F_FAST_ZERO) || req->fua_sync)
		return true;
	return e->zero_fast && zero_method(e, req) != TGT_ZM_WRITE;
}

static void prep_write_zeroes(struct tgt_export *e, struct tgt_req *req, struct io_uring_sqe *sqe)
{
	uint64_t off = rb_from_le64(req->cmd.offset);
	uint32_t len = rb_from_le32(req->cmd.length);
	enum tgt_zero_method m = zero_method(e, req);
	uint32_t chunk;

	if (req->fua_sync) {
		e->backend->prep_flush(e, sqe);
		return;
	}
	if (m != TGT_ZM_WRITE) {
		e->backend->prep_zero(e, sqe, m, req->z.step, off, len);
		return;
	}
	/* Ranges are block aligned and the buffer a multiple of any block
	 * size: every chunk suits O_DIRECT. */
	chunk = len - (uint32_t)req->z.done;
	if (chunk > TGT_ZERO_BUF_SIZE)
		chunk = TGT_ZERO_BUF_SIZE;
	e->backend->prep_write(e, sqe, req->q->r->zeroes, chunk, off + req->z.done, TGT_BUF_ZEROES,
			  false);
}

static void execute(struct tgt_req *req)
{
	struct tgt_queue *q = req->q;
	struct tgt_reactor *r = q->r;
	struct tgt_export *e;
	const struct rb_capsule *c = &req->cmd;
	struct io_uring_sqe *sqe;
	uint64_t off = rb_from_le64(c->offset);
	uint32_t len = rb_from_le32(c->length);
	int idx;

	if (q->qid == 0) {
		tgt_admin_execute(req);
		return;
	}
	e = q->session->export;
	if (c->opcode == RB_OP_WRITE && tgt_io_write_inline(e, off, len, c->flags & RB_CMD_F_FUA)) {
		int res;

		req->state = REQ_EXECUTING;
		q->io_inflight++;
		res = e->backend->write_now(e, req->buf, len, off);
		if (res >= 0)
			atomic_fetch_add_explicit(&e->stats.inline_writes, 1,
						  memory_order_relaxed);
		tgt_req_io_done(req, res);
		return;
	}
	if (c->opcode == RB_OP_DISCARD && atomic_load(&e->discard_unsupported)) {
		finish_now(req, RB_S_SUCCESS);
		return;
	}
	if (c->opcode == RB_OP_WRITE_ZEROES && !zero_may_run(e, req)) {
		rb_dbg("export %s: FAST_ZERO write-zeroes at %llu refused: it would write zeroes",
		       e->conf.name, (unsigned long long)off);
		finish_now(req, RB_S_NOT_SUPPORTED);
		return;
	}
	sqe = tgt_reactor_get_sqe(r);
	if (!sqe) {
		rb_fifo_push(&r->pending_exec, req);
		return;
	}
	idx = req->buf_from_pool ? TGT_BUF_POOL : TGT_BUF_INCAP;
	switch (c->opcode) {
	case RB_OP_READ: e->backend->prep_read(e, sqe, req->buf, len, off, idx); break;
	case RB_OP_WRITE:
		e->backend->prep_write(e, sqe, req->buf, len, off, idx, c->flags & RB_CMD_F_FUA);
		break;
	case RB_OP_FLUSH: e->backend->prep_flush(e, sqe); break;
	case RB_OP_DISCARD: e->backend->prep_discard(e, sqe, off, len); break;
	case RB_OP_WRITE_ZEROES: prep_write_zeroes(e, req, sqe); break;
	default: assert(!"validated opcode");
	}
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)req | TGT_UD_REQ);
	req->state = REQ_EXECUTING;
	q->io_inflight++;
}

static bool needs_pool_buffer(const struct rb_capsule *c)
{
	return c->sgl.type == RB_SGL_KEYED;
}

static void post_read_from_host(struct tgt_req *req)
{
	struct tgt_queue *q = req->q;
	const struct rb_capsule *c = &req->cmd;
	struct rb_sge sg = { .addr = req->buf, .length = rb_from_le32(c->sgl.length),
			     .lkey = q->cx->pool_mr->lkey };
	int ret;

	if (q->reads_inflight >= q->max_rd) {
		req->state = REQ_NEED_READ_SLOT;
		rb_fifo_push(&q->pending_read, req);
		return;
	}
	ret = q->cx->ops->post_read(q->conn, &req->read_cqe, &sg, 1, rb_from_le64(c->sgl.addr),
				    rb_from_le32(c->sgl.key));
	if (ret) {
		rb_err("queue %u (peer %s, qp %u): post RDMA READ: %s", q->qid, q->peer, q->qpn,
		       strerror(-ret));
		tgt_req_complete(req, RB_S_TRANSFER_ERROR, 0);
		return;
	}
	req->state = REQ_TRANSFER_FROM_HOST;
	req->posted_tick = q->r->tick;
	req->wr_pending++;
	q->wr_outstanding++;
	q->reads_inflight++;
}

/* Advance a request as far as its resources allow. */
static void req_process(struct tgt_req *req)
{
	const struct rb_capsule *c = &req->cmd;

	switch (req->state) {
	case REQ_NEW:
		if (!needs_pool_buffer(c)) {
			req->state = REQ_READY_TO_EXECUTE;
			req_process(req);
			return;
		}
		req->state = REQ_NEED_BUFFER;
		/* fall through */
	case REQ_NEED_BUFFER:
		/* Given one by tgt_pool_grant, or take one now or wait in line. */
		if (!req->buf && !tgt_pool_take(req))
			return;
		/* Keyed WRITE and admin commands with host data: fetch it first. */
		if (c->opcode == RB_OP_WRITE || c->opcode == RB_OP_CONNECT ||
		    c->opcode == RB_OP_AUTH) {
			post_read_from_host(req);
			return;
		}
		req->state = REQ_READY_TO_EXECUTE;
		execute(req);
		return;
	case REQ_NEED_READ_SLOT:
		post_read_from_host(req);
		return;
	case REQ_READY_TO_EXECUTE:
		execute(req);
		return;
	default:
		assert(!"request in a state that waits for a completion");
	}
}

void tgt_req_kick_pending(struct tgt_reactor *r)
{
	struct tgt_req *req;

	while ((req = tgt_pool_grant(r)))
		req_process(req);
	while (!rb_fifo_empty(&r->pending_exec) && io_uring_sq_space_left(&r->ring)) {
		req = rb_fifo_pop(&r->pending_exec);
		req_process(req);
	}
}

/* A receive slot completed: a capsule arrived, or the connection is gone. */
static void recv_done(struct rb_cq *cq, struct rb_wc *wc)
{
	static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("failed receives", RB_LOG_ERR);
	struct tgt_recv *rv = rb_container_of(wc->cqe, struct tgt_recv, cqe);
	struct tgt_queue *q = rv->q;

	q->wr_outstanding--;
	if (wc->status != RB_WC_SUCCESS) {
		if (wc->status != RB_WC_FLUSH_ERR)
			rb_log_limited(&lim, q->peer, RB_LOG_ERR,
				       "queue %u (peer %s, qp %u): receive failed: %s (status %d)",
				       q->qid, q->peer, q->qpn, rb_wc_status_name(wc->status),
				       wc->status);
		/* A host that sent DISCONNECT may close as soon as it has the
		 * answer, before our own close: that is no error. */
		tgt_queue_fail(q, q->disconnect_requested ? "host sent DISCONNECT" :
							    "receive error");
		tgt_queue_maybe_destroy(q);
		return;
	}
	if (q->dead) {
		tgt_queue_maybe_destroy(q);
		return;
	}
	q->r->arrivals++;
	req_start(q, rv, wc->byte_len);
}

int tgt_req_post_recv(struct tgt_queue *q, struct tgt_recv *rv)
{
	struct rb_sge sg[2] = {
		{ .addr = rv->capsule, .length = RB_CAPSULE_SIZE, .lkey = q->capsule_mr->lkey },
		{ .addr = rv->incap, .length = q->recv_data,
		  .lkey = q->incap_aux ? q->capsule_mr->lkey : q->cx->incap_mr->lkey },
	};
	int ret;

	if (q->dead)
		return -ENOTCONN;
	rv->cqe.done = recv_done;
	ret = q->cx->ops->post_recv(q->conn, &rv->cqe, sg, q->recv_data ? 2 : 1);
	if (ret) {
		rb_err("queue %u (peer %s, qp %u): post receive: %s", q->qid, q->peer, q->qpn,
		       strerror(-ret));
		if (q->accepted)
			tgt_queue_fail(q, "post receive failed");
		return ret;
	}
	q->wr_outstanding++;
	return 0;
}

static void validate_ctx(const struct tgt_queue *q, uint32_t byte_len,
			 struct rb_validate_ctx *ctx)
{
	const struct rb_target_conf *conf = &q->r->t->conf;
	const struct tgt_export *e = q->session ? q->session->export : NULL;

	memset(ctx, 0, sizeof(*ctx));
	ctx->admin = q->qid == 0;
	ctx->auth = 1; /* version 2: AUTH and QUEUE_AUTH exist */
	ctx->incapsule = q->incapsule;
	ctx->received = byte_len - RB_CAPSULE_SIZE;
	ctx->max_transfer = conf->max_transfer;
	if (e && !ctx->admin) {
		ctx->handle = e->handle;
		ctx->size = e->size;
		ctx->block_size = e->block_size;
		ctx->export_flags = e->flags;
	}
}

/*
 * The first command of an authenticated session's I/O queue: QUEUE_AUTH
 * with the host's proof, checked before anything else is served.  Any
 * other first command, a wrong proof, or a second QUEUE_AUTH: refused.
 */
static void queue_auth(struct tgt_req *req, struct tgt_recv *rv)
{
	struct tgt_queue *q = req->q;
	struct tgt_session *s = q->session;

	if (!q->auth_pending) {
		tgt_req_complete(req, RB_S_AUTH_OUT_OF_STATE, 0);
		return;
	}
	req->close_after = true;
	if (req->cmd.opcode != RB_OP_QUEUE_AUTH) {
		tgt_auth_failed(q, s->hostid, "I/O queue",
				"a command before QUEUE_AUTH (session id without its key?)");
		tgt_req_complete(req, RB_S_AUTH_REQUIRED, 0);
		return;
	}
	if (rb_auth_queue_check(&s->skey, false, q->qid, q->nonce_h, q->nonce_t, rv->incap)) {
		tgt_auth_failed(q, s->hostid, "I/O queue", "wrong queue proof");
		tgt_req_complete(req, RB_S_AUTH_FAILED, 0);
		return;
	}
	req->close_after = false;
	q->auth_pending = false;
	rb_dbg("queue %u (peer %s, qp %u): authenticated", q->qid, q->peer, q->qpn);
	tgt_req_complete(req, RB_S_SUCCESS, 0);
}

/* A capsule arrived in receive slot rv: the one entry point for host input. */
static void req_start(struct tgt_queue *q, struct tgt_recv *rv, uint32_t byte_len)
{
	/* A host can send these as fast as its link goes: rate-limited. */
	static struct rb_log_limit violation = RB_LOG_LIMIT_INIT("protocol violations",
								  RB_LOG_ERR);
	static struct rb_log_limit rejected = RB_LOG_LIMIT_INIT("rejected capsules",
								 RB_LOG_WARN);
	struct rb_validate_ctx ctx;
	struct rb_validate_err err;
	struct tgt_req *req;
	enum rb_status st;

	if (byte_len < RB_CAPSULE_SIZE) {
		rb_log_limited(&violation, q->peer, RB_LOG_ERR,
			       "queue %u (peer %s, qp %u): truncated capsule of %u bytes; closing",
			       q->qid, q->peer, q->qpn, byte_len);
		tgt_queue_fail(q, "protocol violation");
		tgt_queue_maybe_destroy(q);
		return;
	}
	if (q->nr_active >= q->depth) {
		/* More commands than credits: the host ignored the queue depth. */
		rb_log_limited(&violation, q->peer, RB_LOG_ERR,
			       "queue %u (peer %s, qp %u): more than %u outstanding commands; "
			       "closing",
			       q->qid, q->peer, q->qpn, q->depth);
		tgt_queue_fail(q, "protocol violation");
		tgt_queue_maybe_destroy(q);
		return;
	}
	req = q->free_reqs;
	if (!req) {
		/* Every request is answered but waits for its SEND completion
		 * (not yet polled): wait for one, in arrival order. */
		rv->byte_len = byte_len;
		rb_fifo_push(&q->parked, rv);
		return;
	}
	q->free_reqs = req->next;
	req->next = NULL;
	q->nr_active++;
	req->cmd = *rv->capsule;
	req->recv = rv;
	req->state = REQ_NEW;
	req->status = RB_S_SUCCESS;
	req->result = 0;
	req->buf = NULL;
	req->buf_from_pool = false;
	req->fua_sync = false;
	req->close_after = false;
	memset(&req->z, 0, sizeof(req->z));
	req->send_cqe.done = send_done;
	req->read_cqe.done = read_done;
	req->write_cqe.done = write_done;
	q->last_cmd_ns = rb_clock_ns();

	if (atomic_load(&q->r->stopping)) {
		tgt_req_complete(req, RB_S_ABORTED, 0);
		return;
	}
	if (q->qid && !q->session) {
		tgt_req_complete(req, RB_S_INVALID_QUEUE, 0);
		return;
	}
	if (q->auth_pending && req->cmd.opcode != RB_OP_QUEUE_AUTH) {
		queue_auth(req, rv);
		return;
	}
	validate_ctx(q, byte_len, &ctx);
	st = rb_validate_capsule(&req->cmd, &ctx, &err);
	if (st != RB_S_SUCCESS) {
		rb_log_limited(&rejected, q->peer, RB_LOG_WARN,
			       "queue %u (peer %s, qp %u): %s cid %u rejected: %s (field %s = %llu)",
			       q->qid, q->peer, q->qpn, rb_opcode_name(req->cmd.opcode),
			       rb_from_le16(req->cmd.cid), rb_status_name(st), err.field,
			       (unsigned long long)err.value);
		tgt_req_complete(req, st, 0);
		return;
	}
	if (req->cmd.opcode == RB_OP_QUEUE_AUTH) {
		queue_auth(req, rv);
		return;
	}
	if (req->cmd.sgl.type == RB_SGL_INCAPSULE) {
		req->buf = rv->incap; /* recv stays held until the write executes */
	} else {
		req_release_recv(req);
	}
	req_process(req);
}
