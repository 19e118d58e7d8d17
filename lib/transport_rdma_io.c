/* SPDX-License-Identifier: MIT */
/*
 * "rdma" transport: queue pair setup and the data path.
 *
 * The QP is created inside accept/connect, because only they get the caps.
 * The target posts one receive per credit *before* accept (so no RNR can
 * happen): such early receives are kept on the connection and posted right
 * after the QP exists, still before rdma_accept sends the REP.
 *
 * Every WR is signaled; SENDs and WRITEs up to the QP's max_inline_data go
 * inline.  Zero-length sges are dropped (some devices read length 0 as
 * 2 GiB).  While the CQ is corked, send-queue WRs wait on their connection
 * and go to the QP as one list at uncork: one doorbell (a system call on
 * rxe) per connection and round instead of one per WR.  A post that the QP
 * refuses then completes, with the rest of the list, as a flush, and the
 * connection is disconnected.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "transport_rdma_priv.h"

#define RD_DEFAULT_WR 128

/* ---- queue pair ----------------------------------------------------------------- */

static uint32_t clamp_u32(uint32_t v, int max)
{
	return max > 0 && v > (uint32_t)max ? (uint32_t)max : v;
}

static int cq_reserve(struct rd_cq *cq, uint32_t need)
{
	uint64_t want = (uint64_t)cq->used + need;
	int ret;

	if (want <= (uint64_t)cq->cqe)
		return 0;
	if (want > (uint64_t)cq->dom->attr.max_cqe) {
		rb_err("rdma %s: completion queue would need %llu entries, device limit %d",
		       cq->dom->name, (unsigned long long)want, cq->dom->attr.max_cqe);
		return -ENOSPC;
	}
	ret = ibv_resize_cq(cq->cq, (int)want);
	if (ret) {
		rb_err("rdma %s: grow completion queue from %d to %llu entries: %s", cq->dom->name,
		       cq->cqe, (unsigned long long)want, strerror(ret));
		return -ENOSPC;
	}
	cq->cqe = cq->cq->cqe;
	return 0;
}

/* Create the QP on c's cm_id with CQ cq, then post the early receives. */
int rd_qp_setup(struct rd_conn *c, struct rd_cq *cq, const struct rb_conn_caps *caps)
{
	const struct ibv_device_attr *a = &c->dom->attr;
	struct ibv_qp_init_attr qa;
	uint32_t sq, rq, sge, inl;
	struct rd_swr *w;
	int ret;

	c->cq = cq;
	if (cq->dom != c->dom) {
		rb_err("rdma %s: connection is on device %s but its completion queue on %s",
		       c->peer, c->dom->name, cq->dom->name);
		return -EXDEV;
	}
	sq = caps && caps->max_send_wr ? caps->max_send_wr : RD_DEFAULT_WR;
	rq = caps && caps->max_recv_wr ? caps->max_recv_wr : RD_DEFAULT_WR;
	sge = caps && caps->max_sge ? caps->max_sge : RB_MAX_SGE;
	inl = caps ? caps->max_inline : 0;
	if (sge > RB_MAX_SGE)
		return -EINVAL;
	if (rq < c->early.n)
		rq = c->early.n;
	sq = clamp_u32(sq, a->max_qp_wr);
	rq = clamp_u32(rq, a->max_qp_wr);
	sge = clamp_u32(sge, a->max_sge);
	if (rq < c->early.n) {
		rb_err("rdma %s: %u receives posted before accept, device %s allows %u",
		       c->peer, c->early.n, c->dom->name, rq);
		return -ENOSPC;
	}
	ret = cq_reserve(cq, sq + rq);
	if (ret)
		return ret;
	for (;;) {
		memset(&qa, 0, sizeof(qa));
		qa.qp_context = c;
		qa.send_cq = cq->cq;
		qa.recv_cq = cq->cq;
		qa.qp_type = IBV_QPT_RC;
		qa.sq_sig_all = 1;
		qa.cap.max_send_wr = sq;
		qa.cap.max_recv_wr = rq;
		qa.cap.max_send_sge = sge;
		qa.cap.max_recv_sge = sge;
		qa.cap.max_inline_data = inl;
		if (rdma_create_qp(c->id, c->dom->pd, &qa) == 0)
			break;
		ret = -errno;
		/* Inline is a hint: a device without (that much of) it still works. */
		if (inl && ret == -EINVAL) {
			inl = 0;
			continue;
		}
		rb_err("rdma %s: create queue pair (send %u, recv %u, sge %u) on %s: %s", c->peer,
		       sq, rq, sge, c->dom->name, strerror(-ret));
		return ret;
	}
	c->qpn = c->id->qp->qp_num;
	c->max_sge = sge;
	c->max_inline = qa.cap.max_inline_data;
	c->sq_size = qa.cap.max_send_wr;
	c->pend = calloc(c->sq_size, sizeof(*c->pend));
	if (!c->pend) {
		rdma_destroy_qp(c->id);
		return -ENOMEM;
	}
	c->qp_depth = sq + rq;
	cq->used += c->qp_depth;
	ret = rd_map_add(cq, c);
	if (ret) {
		cq->used -= c->qp_depth;
		free(c->pend);
		c->pend = NULL;
		rdma_destroy_qp(c->id);
		return ret;
	}
	c->in_map = true;
	rb_dbg("rdma %s: qp %u on %s: send %u, recv %u, sge %u, inline %u", c->peer, c->qpn,
	       c->dom->name, sq, rq, sge, c->max_inline);
	while ((w = c->early.head)) {
		struct ibv_recv_wr wr = { .wr_id = (uintptr_t)w->cqe | RB_WC_RECV,
					  .sg_list = w->sge,
					  .num_sge = w->nsge },
				   *bad;

		ret = ibv_post_recv(c->id->qp, &wr, &bad);
		if (ret) {
			rb_err("rdma %s: qp %u: post early receive: %s", c->peer, c->qpn,
			       strerror(ret));
			return -ret; /* the caller fails the conn: the rest flushes */
		}
		rb_fifo_pop(&c->early);
		free(w);
	}
	return 0;
}

void rd_qp_teardown(struct rd_conn *c)
{
	if (c->cq && c->dirty) {
		struct rd_conn **pp;

		for (pp = &c->cq->dirty; *pp && *pp != c; pp = &(*pp)->dirty_next)
			;
		if (*pp)
			*pp = c->dirty_next;
		c->dirty = false;
	}
	/* Held WRs never reached the QP: dropped, like unpolled completions. */
	if (c->npend)
		rb_warn("rdma %s: destroyed with %u work requests not posted", c->peer, c->npend);
	c->npend = 0;
	free(c->pend);
	c->pend = NULL;
	if (c->cq)
		rd_sw_purge(c->cq, c);
	if (c->dying) {
		c->cq->ndying--;
		c->dying = false;
	}
	if (c->in_map) {
		rd_map_del(c->cq, c);
		c->cq->used -= c->qp_depth;
		c->in_map = false;
	}
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
}

/* ---- data path ------------------------------------------------------------------ */

/* Zero-length sges are dropped: some devices read length 0 as 2 GiB. */
static int fill_sges(struct ibv_sge *s, const struct rb_sge *sg, int nsge, uint64_t *total)
{
	int k = 0;

	*total = 0;
	for (int i = 0; i < nsge; i++) {
		if (!sg[i].length)
			continue;
		s[k].addr = (uintptr_t)sg[i].addr;
		s[k].length = sg[i].length;
		s[k].lkey = sg[i].lkey;
		*total += sg[i].length;
		k++;
	}
	return k;
}

static bool post_args_ok(const struct rd_conn *c, const struct rb_cqe *cqe,
			 const struct rb_sge *sg, int nsge)
{
	uint32_t max = c->id && c->id->qp ? c->max_sge : RB_MAX_SGE;

	return cqe && !((uintptr_t)cqe & RD_WRID_OPMASK) && nsge >= 0 && (uint32_t)nsge <= max &&
	       (!nsge || sg);
}

/* Accept the WR on a dead connection and complete it with a flush. */
static int sw_flush_post(struct rd_conn *c, struct rb_cqe *cqe, enum rb_wc_opcode op)
{
	struct rd_swr *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->conn = c;
	w->cqe = cqe;
	w->opcode = op;
	rd_sw_complete(c->cq, w);
	return 0;
}

int rd_post_recv(struct rb_conn *rc, struct rb_cqe *cqe, const struct rb_sge *sg,
			int nsge)
{
	struct rd_conn *c = to_rconn(rc);
	struct ibv_recv_wr wr = { 0 }, *bad;
	struct ibv_sge s[RB_MAX_SGE];
	struct rd_swr *w;
	uint64_t total;
	int ret;

	if (!post_args_ok(c, cqe, sg, nsge))
		return -EINVAL;
	if (c->id && c->id->qp) {
		wr.wr_id = (uintptr_t)cqe | RB_WC_RECV;
		wr.sg_list = s;
		wr.num_sge = fill_sges(s, sg, nsge, &total);
		ret = ibv_post_recv(c->id->qp, &wr, &bad);
		if (!ret)
			return 0;
		if (c->state == RD_DEAD)
			return sw_flush_post(c, cqe, RB_WC_RECV);
		rb_dbg("rdma %s: qp %u: post receive: %s", c->peer, c->qpn, strerror(ret));
		return -ret;
	}
	if (c->state == RD_DEAD)
		return c->cq ? sw_flush_post(c, cqe, RB_WC_RECV) : -ENOTCONN;
	/* No QP yet (request or resolved): keep it for rd_qp_setup. */
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->conn = c;
	w->cqe = cqe;
	w->opcode = RB_WC_RECV;
	w->nsge = fill_sges(w->sge, sg, nsge, &total);
	rb_fifo_push(&c->early, w);
	return 0;
}

/* Post the held WRs as one list; what the QP refuses completes as a flush. */
static void post_pending(struct rd_conn *c)
{
	struct ibv_send_wr *bad = NULL;
	uint32_t n = c->npend, done;
	int ret;

	if (!n)
		return;
	for (uint32_t i = 0; i + 1 < n; i++)
		c->pend[i].wr.next = &c->pend[i + 1].wr;
	c->pend[n - 1].wr.next = NULL;
	c->npend = 0;
	ret = ibv_post_send(c->id->qp, &c->pend[0].wr, &bad);
	done = n;
	if (ret) /* bad is the first WR not posted (wr is rd_pend's first member) */
		done = bad ? (uint32_t)((struct rd_pend *)(void *)bad - c->pend) : 0;
	if (done > n)
		done = 0;
	c->sq_out += done;
	if (!ret)
		return;
	if (c->state != RD_DEAD)
		rb_err("rdma %s: qp %u: post %u of %u held work requests: %s", c->peer, c->qpn,
		       n - done, n, strerror(ret));
	for (uint32_t i = done; i < n; i++) {
		uint64_t id = c->pend[i].wr.wr_id;

		if (sw_flush_post(c, (struct rb_cqe *)(uintptr_t)(id & ~RD_WRID_OPMASK),
				  (enum rb_wc_opcode)(id & RD_WRID_OPMASK)))
			rb_err("rdma %s: out of memory: a work request will never complete",
			       c->peer);
	}
	if (c->state != RD_DEAD)
		rd_disconnect(&c->pub);
}

void rd_cq_cork(struct rb_cq *rcq, bool on)
{
	struct rd_cq *cq = (struct rd_cq *)rcq;
	struct rd_conn *c;

	cq->corked = on;
	if (on)
		return;
	while ((c = cq->dirty)) {
		cq->dirty = c->dirty_next;
		c->dirty = false;
		post_pending(c);
	}
}

static int post_sq(struct rb_conn *rc, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
		   enum ibv_wr_opcode op, enum rb_wc_opcode rop, uint64_t raddr, uint32_t rkey)
{
	struct rd_conn *c = to_rconn(rc);
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_sge s[RB_MAX_SGE];
	bool hold;
	uint64_t total;
	int ret;

	if (!post_args_ok(c, cqe, sg, nsge))
		return -EINVAL;
	if (!c->id || !c->id->qp)
		return c->state == RD_DEAD && c->cq ? sw_flush_post(c, cqe, rop) : -ENOTCONN;
	hold = c->cq->corked && c->state != RD_DEAD && c->pend;
	/* Held: what the QP would say once they are all posted. */
	if (hold && c->sq_out + c->npend >= c->sq_size)
		return -ENOMEM;
	wr.wr_id = (uintptr_t)cqe | rop;
	wr.sg_list = hold ? c->pend[c->npend].s : s;
	wr.num_sge = fill_sges(wr.sg_list, sg, nsge, &total);
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	/* Every message may end the peer's wait (see quiet waits in _cq.c). */
	if (op == IBV_WR_SEND)
		wr.send_flags |= IBV_SEND_SOLICITED;
	if (op != IBV_WR_RDMA_READ && total && total <= c->max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	if (op != IBV_WR_SEND) {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (hold) {
		c->pend[c->npend++].wr = wr;
		if (!c->dirty) {
			c->dirty = true;
			c->dirty_next = c->cq->dirty;
			c->cq->dirty = c;
		}
		return 0;
	}
	/* Keep posting order: what is held goes first. */
	post_pending(c);
	ret = ibv_post_send(c->id->qp, &wr, &bad);
	if (!ret) {
		c->sq_out++;
		return 0;
	}
	if (c->state == RD_DEAD)
		return sw_flush_post(c, cqe, rop);
	rb_dbg("rdma %s: qp %u: post %s: %s", c->peer, c->qpn, rd_op_name(rop), strerror(ret));
	return -ret;
}

int rd_post_send(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge)
{
	return post_sq(c, cqe, sg, nsge, IBV_WR_SEND, RB_WC_SEND, 0, 0);
}

int rd_post_read(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
			uint64_t raddr, uint32_t rkey)
{
	int ret = post_sq(c, cqe, sg, nsge, IBV_WR_RDMA_READ, RB_WC_READ, raddr, rkey);

	/* Its completion (or flush) will come: the CQ must wake for it. */
	if (!ret)
		to_rconn(c)->cq->reads_out++;
	return ret;
}

int rd_post_write(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg,
			 int nsge, uint64_t raddr, uint32_t rkey)
{
	return post_sq(c, cqe, sg, nsge, IBV_WR_RDMA_WRITE, RB_WC_WRITE, raddr, rkey);
}

