/* SPDX-License-Identifier: MIT */
/*
 * "rdma" transport: the completion queue.
 *
 * cq_fd is an epoll set holding three fds: the CQ's completion channel, an
 * rdma_cm event channel that the cm_ids of all connections on this CQ are
 * migrated to, and an eventfd that is readable while software completions
 * wait.  cq_arm, which the engine calls whenever cq_fd was readable,
 * consumes the completion event (acked, and the CQ re-armed at once, so a
 * completion that lands after the next poll still wakes the caller) and
 * then CM events, but those only when there was no completion event or
 * every RD_CM_EVERY wakeups: asking the set which fd fired would cost a
 * system call per wakeup, and a queued CM event keeps the set readable,
 * so it is never lost, only delayed by a few wakeups.  cq_poll only
 * polls the CQ and the software list: no system call when the provider
 * polls in user space.  Nothing blocks, nothing spins.  A CQ and its
 * connections are used by one thread at a time (the reactor that owns
 * them).
 *
 * Quiet waits: every SEND carries the solicited-event bit, so a caller
 * that says (cq_prepare_wait) it needs no wakeup for its own SEND and
 * WRITE completions gets a CQ armed for solicited completions only: one
 * wakeup per incoming message instead of one more per message sent.  The
 * arm stays "next completion" while RDMA READs are outstanding (the caller
 * waits for their data) or a connection is flushing (rxe raises no
 * solicited event for flushes).  Widening a solicited arm before a wait
 * polls the CQ once more, since completions that landed under the
 * narrower arm raised no event; what that poll finds is kept for cq_poll.
 *
 * wr_id is the rb_cqe pointer with the rb_wc_opcode in its two low bits,
 * because error completions carry no valid opcode; the connection comes
 * from wc.qp_num through a small per-CQ table.  A send-queue error
 * completion (other than a flush) disconnects the connection, so the
 * peer's outstanding WRs flush as well.
 *
 * Software completions: receives posted before the QP exists wait on the
 * connection (see transport_rdma_io.c); if the QP never comes (accept
 * failed) they, like WRs posted on a dead connection whose QP refused
 * them, complete here with RB_WC_FLUSH_ERR, after the hardware ones.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "log.h"
#include "transport_rdma_priv.h"

/* ---- qp number -> connection table --------------------------------------------- */

static uint32_t map_slot(uint32_t qpn, uint32_t cap)
{
	return (qpn * 2654435761u) & (cap - 1);
}

int rd_map_add(struct rd_cq *cq, struct rd_conn *c)
{
	uint32_t i;

	if ((cq->map_n + 1) * 2 > cq->map_cap) {
		uint32_t ncap = cq->map_cap ? cq->map_cap * 2 : 16;
		struct rd_qpmap *n = calloc(ncap, sizeof(*n));

		if (!n)
			return -ENOMEM;
		for (uint32_t j = 0; j < cq->map_cap; j++) {
			if (!cq->map[j].conn)
				continue;
			for (i = map_slot(cq->map[j].qpn, ncap); n[i].conn; i = (i + 1) & (ncap - 1))
				;
			n[i] = cq->map[j];
		}
		free(cq->map);
		cq->map = n;
		cq->map_cap = ncap;
	}
	for (i = map_slot(c->qpn, cq->map_cap); cq->map[i].conn; i = (i + 1) & (cq->map_cap - 1))
		;
	cq->map[i].qpn = c->qpn;
	cq->map[i].conn = c;
	cq->map_n++;
	return 0;
}

static struct rd_conn *map_find(struct rd_cq *cq, uint32_t qpn)
{
	uint32_t i;

	if (cq->last && cq->last->qpn == qpn)
		return cq->last;
	if (!cq->map_cap)
		return NULL;
	for (i = map_slot(qpn, cq->map_cap); cq->map[i].conn; i = (i + 1) & (cq->map_cap - 1)) {
		if (cq->map[i].qpn == qpn) {
			cq->last = cq->map[i].conn;
			return cq->last;
		}
	}
	return NULL;
}

/* Linear probing: shift later members of the run back into the hole. */
void rd_map_del(struct rd_cq *cq, struct rd_conn *c)
{
	uint32_t mask = cq->map_cap - 1, i, j, k;

	if (cq->last == c)
		cq->last = NULL;
	if (!cq->map_cap)
		return;
	for (i = map_slot(c->qpn, cq->map_cap); cq->map[i].conn; i = (i + 1) & mask)
		if (cq->map[i].conn == c)
			break;
	if (!cq->map[i].conn)
		return;
	cq->map[i].conn = NULL;
	cq->map_n--;
	for (j = (i + 1) & mask; cq->map[j].conn; j = (j + 1) & mask) {
		k = map_slot(cq->map[j].qpn, cq->map_cap);
		/* Move j into the hole i unless its home k lies cyclically in (i, j]. */
		if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
			cq->map[i] = cq->map[j];
			cq->map[j].conn = NULL;
			i = j;
		}
	}
}

/* A connection went down: its flushes must wake the owner (see quiet waits). */
void rd_cq_note_dead(struct rd_conn *c)
{
	if (c->dying || !c->in_map)
		return;
	c->dying = true;
	c->cq->ndying++;
}

/* An RDMA READ completed (or will never be polled): one fewer to wait for. */
static void read_gone(struct rd_cq *cq)
{
	if (cq->reads_out)
		cq->reads_out--;
}

/* ---- software completions ------------------------------------------------------ */

static void efd_signal(struct rd_cq *cq)
{
	int ret = rb_latch_set(&cq->wake);

	if (ret)
		rb_err("rdma: cq eventfd write: %s", strerror(-ret));
}

static void efd_clear(struct rd_cq *cq)
{
	int ret = rb_latch_clear(&cq->wake);

	if (ret)
		rb_err("rdma: cq eventfd read: %s", strerror(-ret));
}

void rd_sw_complete(struct rd_cq *cq, struct rd_swr *w)
{
	rb_fifo_push(&cq->sw, w);
	efd_signal(cq);
}

/* The QP will never take the early receives: flush them from software. */
void rd_flush_early(struct rd_conn *c)
{
	struct rd_swr *w;

	if (rb_fifo_empty(&c->early))
		return;
	if (!c->cq) {
		rb_warn("rdma %s: %u receives posted before accept cannot complete: no "
			"completion queue was given",
			c->peer, c->early.n);
		return;
	}
	while ((w = rb_fifo_pop(&c->early)))
		rd_sw_complete(c->cq, w);
}

/* A request whose accept failed: its receives go without completions. */
void rd_drop_early(struct rd_conn *c)
{
	struct rd_swr *w;

	while ((w = rb_fifo_pop(&c->early)))
		free(w);
}

void rd_sw_purge(struct rd_cq *cq, struct rd_conn *c)
{
	struct rd_swr *w, *prev = NULL, *next;
	unsigned int n = 0;
	int k = 0;

	for (w = cq->sw.head; w; w = next) {
		next = w->next;
		if (w->conn != c) {
			prev = w;
			continue;
		}
		if (w->opcode == RB_WC_READ)
			read_gone(cq);
		rb_fifo_unlink(&cq->sw, prev, w);
		free(w);
		n++;
	}
	/* Stashed hardware completions of this QP: its number may be reused. */
	for (int i = cq->stash_at; i < cq->nstash; i++) {
		if (c->in_map && cq->stash[i].qp_num == c->qpn) {
			if ((cq->stash[i].wr_id & RD_WRID_OPMASK) == RB_WC_READ)
				read_gone(cq);
			n++;
			continue;
		}
		cq->stash[cq->stash_at + k++] = cq->stash[i];
	}
	cq->nstash = cq->stash_at + k;
	if (n)
		rb_warn("rdma %s: destroyed with %u completions not polled", c->peer, n);
	if (rb_fifo_empty(&cq->sw))
		efd_clear(cq);
}

/* ---- completion queue --------------------------------------------------------- */

static struct rd_cq *to_rcq(struct rb_cq *cq)
{
	return (struct rd_cq *)cq;
}

static int epoll_add(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

int rd_cq_create(struct rb_domain *rd, uint32_t depth, struct rb_cq **out)
{
	struct rd_domain *d = (struct rd_domain *)rd;
	struct rd_cq *cq;
	int ret, cqe;

	if (!d || !out)
		return -EINVAL;
	cqe = depth ? (depth > (uint32_t)d->attr.max_cqe ? d->attr.max_cqe : (int)depth) : 1024;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	cq->dom = d;
	cq->epfd = cq->wake.fd = -1;
	cq->ch = ibv_create_comp_channel(d->verbs);
	if (!cq->ch) {
		ret = errno ? -errno : -ENOMEM;
		rb_err("rdma %s: create completion channel: %s", d->name, strerror(-ret));
		goto out_free;
	}
	cq->cq = ibv_create_cq(d->verbs, cqe, cq, cq->ch, 0);
	if (!cq->cq) {
		ret = errno ? -errno : -ENOMEM;
		rb_err("rdma %s: create completion queue (%d entries): %s", d->name, cqe,
		       strerror(-ret));
		goto out_destroy_ch;
	}
	cq->cqe = cq->cq->cqe;
	cq->cm_ch = rdma_create_event_channel();
	if (!cq->cm_ch) {
		ret = errno ? -errno : -ENOMEM;
		rb_err("rdma: create CM event channel: %s", strerror(-ret));
		goto out_destroy_cq;
	}
	ret = rd_set_nonblock(cq->ch->fd);
	if (!ret)
		ret = rd_set_nonblock(cq->cm_ch->fd);
	if (ret)
		goto out_errno;
	ret = rb_latch_open(&cq->wake);
	if (ret)
		goto out_errno;
	cq->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (cq->epfd < 0) {
		ret = -errno;
		goto out_errno;
	}
	ret = epoll_add(cq->epfd, cq->ch->fd);
	if (!ret)
		ret = epoll_add(cq->epfd, cq->cm_ch->fd);
	if (!ret)
		ret = epoll_add(cq->epfd, cq->wake.fd);
	if (ret)
		goto out_errno;
	rd_dom_hold(d);
	*out = (struct rb_cq *)cq;
	return 0;

out_errno:
	rb_err("rdma %s: completion queue setup: %s", d->name, strerror(-ret));
	if (cq->epfd >= 0)
		close(cq->epfd);
	rb_latch_close(&cq->wake);
	rdma_destroy_event_channel(cq->cm_ch);
out_destroy_cq:
	ibv_destroy_cq(cq->cq);
out_destroy_ch:
	ibv_destroy_comp_channel(cq->ch);
out_free:
	free(cq);
	return ret;
}

void rd_cq_destroy(struct rb_cq *rcq)
{
	struct rd_cq *cq = to_rcq(rcq);
	struct rd_swr *w;
	int ret;

	if (!cq)
		return;
	if (cq->map_n || cq->sw.n)
		rb_warn("rdma %s: completion queue destroyed with %u connections attached%s",
			cq->dom->name, cq->map_n, cq->sw.n ? " and completions not polled" : "");
	while ((w = rb_fifo_pop(&cq->sw)))
		free(w);
	close(cq->epfd);
	rb_latch_close(&cq->wake);
	rdma_destroy_event_channel(cq->cm_ch);
	ret = ibv_destroy_cq(cq->cq);
	if (ret)
		rb_err("rdma %s: destroy completion queue: %s", cq->dom->name, strerror(ret));
	ret = ibv_destroy_comp_channel(cq->ch);
	if (ret)
		rb_err("rdma %s: destroy completion channel: %s", cq->dom->name, strerror(ret));
	rd_dom_put(cq->dom);
	free(cq->map);
	free(cq);
}

int rd_cq_fd(struct rb_cq *cq)
{
	return to_rcq(cq)->epfd;
}

/* Consume the completion event (one CQ per channel: at most one per arm).
 * Returns whether there was one. */
static bool comp_event(struct rd_cq *cq)
{
	struct ibv_cq *ecq;
	void *ctx;

	if (ibv_get_cq_event(cq->ch, &ecq, &ctx) == 0) {
		ibv_ack_cq_events(cq->cq, 1);
		cq->armed = false;
		return true;
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		rb_err("rdma %s: completion channel: %s", cq->dom->name, strerror(errno));
	return false;
}

static void cm_events(struct rd_cq *cq)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(cq->cm_ch, &ev) == 0)
		rd_cm_event(cq, ev); /* acks */
	if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		rb_err("rdma: CM event channel: %s", strerror(errno));
}

/* Wake for every completion, or (quiet and nothing unsolicited awaited)
 * only for incoming messages. */
static bool need_all(const struct rd_cq *cq)
{
	return !cq->quiet || cq->reads_out || cq->ndying;
}

static int req_notify(struct rd_cq *cq, bool solicited_only)
{
	int ret = ibv_req_notify_cq(cq->cq, solicited_only);

	if (ret) {
		rb_err("rdma %s: arm completion queue: %s", cq->dom->name, strerror(ret));
		return -ret;
	}
	cq->armed = true;
	cq->armed_sol = solicited_only;
	return 0;
}

/* get event -> re-arm (the drain is the caller's cq_poll); CM events when
 * no completion event woke us, or every RD_CM_EVERY wakeups. */
int rd_cq_arm(struct rb_cq *rcq)
{
	struct rd_cq *cq = to_rcq(rcq);
	bool comp = comp_event(cq);
	int ret;

	if (!cq->armed) {
		ret = req_notify(cq, !need_all(cq));
		if (ret)
			return ret;
	}
	if (!comp || ++cq->cm_skipped >= RD_CM_EVERY) {
		cq->cm_skipped = 0;
		cm_events(cq);
	}
	return 0;
}

/*
 * Before the owner waits: widen a solicited-only arm if something that
 * raises no solicited event is now awaited, and catch what landed before.
 */
int rd_cq_prepare_wait(struct rb_cq *rcq, bool quiet)
{
	struct rd_cq *cq = to_rcq(rcq);
	int ret, k;

	cq->quiet = quiet;
	if (cq->stash_at < cq->nstash)
		return 1;
	if (cq->armed && !(cq->armed_sol && need_all(cq)))
		return 0;
	ret = req_notify(cq, !need_all(cq));
	if (ret)
		return ret;
	k = ibv_poll_cq(cq->cq, RD_POLL_BATCH, cq->stash);
	if (k < 0) {
		rb_err("rdma %s: poll completion queue failed", cq->dom->name);
		return -EIO;
	}
	cq->stash_at = 0;
	cq->nstash = k;
	return k > 0;
}

static enum rb_wc_status map_status(enum ibv_wc_status st, unsigned int op)
{
	switch (st) {
	case IBV_WC_SUCCESS: return RB_WC_SUCCESS;
	case IBV_WC_WR_FLUSH_ERR: return RB_WC_FLUSH_ERR;
	case IBV_WC_LOC_LEN_ERR: return RB_WC_LOC_LEN_ERR;
	case IBV_WC_REM_ACCESS_ERR: return RB_WC_REM_ACCESS_ERR;
	case IBV_WC_RETRY_EXC_ERR: return RB_WC_RETRY_EXC_ERR;
	case IBV_WC_RNR_RETRY_EXC_ERR: return RB_WC_RNR_RETRY_EXC_ERR;
	case IBV_WC_REM_OP_ERR:
	case IBV_WC_REM_INV_REQ_ERR: return RB_WC_REM_OP_ERR;
	/* rxe reports a SEND longer than the receive this way (responder
	 * class C error); mlx5 says LOC_LEN_ERR. */
	case IBV_WC_LOC_QP_OP_ERR: return op == RB_WC_RECV ? RB_WC_LOC_LEN_ERR : RB_WC_GENERAL_ERR;
	default: return RB_WC_GENERAL_ERR;
	}
}

/* false: completion of a QP not on this CQ (never handed out). */
static bool map_wc(struct rd_cq *cq, const struct ibv_wc *iw, struct rb_wc *w)
{
	struct rd_conn *c = map_find(cq, iw->qp_num);
	unsigned int op = (unsigned int)(iw->wr_id & RD_WRID_OPMASK);

	if (op == RB_WC_READ)
		read_gone(cq);
	if (!c) {
		rb_warn("rdma %s: completion for unknown qp %u dropped (status %s)", cq->dom->name,
			iw->qp_num, ibv_wc_status_str(iw->status));
		return false;
	}
	if (op != RB_WC_RECV && c->sq_out)
		c->sq_out--;
	*w = (struct rb_wc){
		.cqe = (struct rb_cqe *)(uintptr_t)(iw->wr_id & ~RD_WRID_OPMASK),
		.conn = &c->pub,
		.opcode = (enum rb_wc_opcode)op,
		.status = map_status(iw->status, op),
		.byte_len = op == RB_WC_RECV && iw->status == IBV_WC_SUCCESS ? iw->byte_len : 0,
		.vendor_err = iw->vendor_err,
	};
	if (iw->status != IBV_WC_SUCCESS && iw->status != IBV_WC_WR_FLUSH_ERR) {
		if (!c->disconnected)
			rb_err("rdma %s: qp %u: %s failed: %s (vendor error 0x%x)", c->peer,
			       c->qpn, rd_op_name(op), ibv_wc_status_str(iw->status), iw->vendor_err);
		/*
		 * The QP is in error now.  A failed receive was NAKed to the
		 * requester, which gets its own error completion; a DREQ now
		 * could overtake that NAK and turn it into a flush.  A send
		 * queue error may be invisible to the peer: tell it.
		 */
		if (op != RB_WC_RECV)
			rd_disconnect(&c->pub);
	}
	return true;
}

int rd_cq_poll(struct rb_cq *rcq, struct rb_wc *wc, int n)
{
	struct rd_cq *cq = to_rcq(rcq);
	struct ibv_wc iw[RD_POLL_BATCH];
	int got = 0, k;

	if (!cq || !wc || n <= 0)
		return -EINVAL;
	while (got < n && cq->stash_at < cq->nstash)
		if (map_wc(cq, &cq->stash[cq->stash_at++], &wc[got]))
			got++;
	while (got < n) {
		int want = n - got < RD_POLL_BATCH ? n - got : RD_POLL_BATCH;

		k = ibv_poll_cq(cq->cq, want, iw);
		if (k < 0) {
			rb_err("rdma %s: poll completion queue failed", cq->dom->name);
			return got ? got : -EIO;
		}
		for (int i = 0; i < k; i++)
			if (map_wc(cq, &iw[i], &wc[got]))
				got++;
		if (k < want)
			break;
	}
	while (got < n && cq->sw.head) {
		struct rd_swr *w = rb_fifo_pop(&cq->sw);

		if (w->opcode == RB_WC_READ)
			read_gone(cq);
		wc[got++] = (struct rb_wc){ .cqe = w->cqe,
					    .conn = &w->conn->pub,
					    .opcode = w->opcode,
					    .status = RB_WC_FLUSH_ERR };
		free(w);
	}
	if (rb_fifo_empty(&cq->sw))
		efd_clear(cq);
	return got;
}

