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
 * 2 GiB).
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
	if (rq < c->nearly)
		rq = c->nearly;
	sq = clamp_u32(sq, a->max_qp_wr);
	rq = clamp_u32(rq, a->max_qp_wr);
	sge = clamp_u32(sge, a->max_sge);
	if (rq < c->nearly) {
		rb_err("rdma %s: %u receives posted before accept, device %s allows %u",
		       c->peer, c->nearly, c->dom->name, rq);
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
	c->qp_depth = sq + rq;
	cq->used += c->qp_depth;
	ret = rd_map_add(cq, c);
	if (ret) {
		cq->used -= c->qp_depth;
		rdma_destroy_qp(c->id);
		return ret;
	}
	c->in_map = true;
	rb_dbg("rdma %s: qp %u on %s: send %u, recv %u, sge %u, inline %u", c->peer, c->qpn,
	       c->dom->name, sq, rq, sge, c->max_inline);
	while ((w = c->early)) {
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
		c->early = w->next;
		c->nearly--;
		free(w);
	}
	c->early_tail = NULL;
	return 0;
}

void rd_qp_teardown(struct rd_conn *c)
{
	if (c->cq)
		rd_sw_purge(c->cq, c);
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
	if (c->early_tail)
		c->early_tail->next = w;
	else
		c->early = w;
	c->early_tail = w;
	c->nearly++;
	return 0;
}

static int post_sq(struct rb_conn *rc, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
		   enum ibv_wr_opcode op, enum rb_wc_opcode rop, uint64_t raddr, uint32_t rkey)
{
	struct rd_conn *c = to_rconn(rc);
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_sge s[RB_MAX_SGE];
	uint64_t total;
	int ret;

	if (!post_args_ok(c, cqe, sg, nsge))
		return -EINVAL;
	if (!c->id || !c->id->qp)
		return c->state == RD_DEAD && c->cq ? sw_flush_post(c, cqe, rop) : -ENOTCONN;
	wr.wr_id = (uintptr_t)cqe | rop;
	wr.sg_list = s;
	wr.num_sge = fill_sges(s, sg, nsge, &total);
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op != IBV_WR_RDMA_READ && total && total <= c->max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	if (op != IBV_WR_SEND) {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	ret = ibv_post_send(c->id->qp, &wr, &bad);
	if (!ret)
		return 0;
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
	return post_sq(c, cqe, sg, nsge, IBV_WR_RDMA_READ, RB_WC_READ, raddr, rkey);
}

int rd_post_write(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg,
			 int nsge, uint64_t raddr, uint32_t rkey)
{
	return post_sq(c, cqe, sg, nsge, IBV_WR_RDMA_WRITE, RB_WC_WRITE, raddr, rkey);
}

