/* SPDX-License-Identifier: MIT */
/*
 * Fair shares of a reactor's data buffers.  A request takes a buffer before
 * it waits for its data, so a host that never lets its data be fetched (or
 * never acknowledges a response) holds buffers it does not use; without a
 * bound, one host could keep the whole pool while the others wait.
 *
 * The unit of sharing is a group: the I/O queues of one session on this
 * reactor (the pool is per reactor), or one admin queue.  While no one else
 * waits a group may take the whole pool (work conserving); while others
 * wait, a group gets a buffer only below its share (the pool over the
 * groups that hold or wait for buffers), and a queue whose transfers are
 * overdue (pool_slow) gets none.  Waiters are served round robin over the
 * groups and over a group's queues, in arrival order within a queue, so a
 * hoarder's many waiting requests do not stand in front of another host's
 * one.  Admin groups are served first and alone may take the last
 * pool_reserve buffers: a host can always connect.  The transfer check
 * (queue.c) bounds how long a buffer waits for its host, shorter under
 * pressure.
 *
 * Fast path (nobody waits): one compare and the counters.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "target.h"

void tgt_pool_init(struct tgt_reactor *r)
{
	uint32_t n = r->pool.count;

	/* 1 in 32 (1..8): room for CONNECTs and LIST_EXPORTS in flight, at a
	 * cost to I/O only when the pool runs out.  None with a tiny pool. */
	r->pool_reserve = n < 4 ? 0 : n / 32 < 1 ? 1 : n / 32 > 8 ? 8 : n / 32;
}

/* Counters move together; users counts groups that hold or wait. */
static void grp_account(struct tgt_reactor *r, struct tgt_pool_grp *g, int dheld, int dwait)
{
	bool was = g->held || g->waiting;

	g->held += (uint32_t)dheld;
	g->waiting += (uint32_t)dwait;
	r->pool_waiting += (uint32_t)dwait;
	if (!was && (g->held || g->waiting))
		r->pool_users++;
	else if (was && !g->held && !g->waiting)
		r->pool_users--;
}

int tgt_pool_join(struct tgt_queue *q)
{
	struct tgt_reactor *r = q->r;
	struct tgt_pool_grp *g;

	if (!q->qid || !q->session) {
		q->own_grp.admin = true;
		q->own_grp.refs = 1;
		q->grp = &q->own_grp;
		return 0;
	}
	for (g = r->grps; g && g->s != q->session; g = g->next)
		;
	if (!g) {
		g = calloc(1, sizeof(*g));
		if (!g)
			return -ENOMEM;
		g->s = q->session;
		g->next = r->grps;
		r->grps = g;
	}
	g->refs++;
	q->grp = g;
	return 0;
}

static void ring_push(struct tgt_reactor *r, struct tgt_pool_grp *g)
{
	int k = g->admin ? 0 : 1;

	g->in_ring = true;
	g->wnext = NULL;
	if (r->wait_tail[k])
		r->wait_tail[k]->wnext = g;
	else
		r->wait_head[k] = g;
	r->wait_tail[k] = g;
}

static void grp_push(struct tgt_pool_grp *g, struct tgt_queue *q)
{
	q->in_grp_ring = true;
	q->wnext = NULL;
	if (g->wq_tail)
		g->wq_tail->wnext = q;
	else
		g->wq_head = q;
	g->wq_tail = q;
}

/* Take q (after prev, NULL: the head) out of g's ring of waiting queues. */
static void wq_unlink(struct tgt_pool_grp *g, struct tgt_queue *prev, struct tgt_queue *q)
{
	if (prev)
		prev->wnext = q->wnext;
	else
		g->wq_head = q->wnext;
	if (g->wq_tail == q)
		g->wq_tail = prev;
	q->wnext = NULL;
	q->in_grp_ring = false;
}

/* Take g (after prev, NULL: the head) out of ring k. */
static void ring_take(struct tgt_reactor *r, int k, struct tgt_pool_grp *prev,
		      struct tgt_pool_grp *g)
{
	if (prev)
		prev->wnext = g->wnext;
	else
		r->wait_head[k] = g->wnext;
	if (r->wait_tail[k] == g)
		r->wait_tail[k] = prev;
	g->wnext = NULL;
	g->in_ring = false;
}

/* Unlink g from its ring (a teardown path: the ring is short). */
static void ring_unlink(struct tgt_reactor *r, struct tgt_pool_grp *g)
{
	int k = g->admin ? 0 : 1;
	struct tgt_pool_grp *prev = NULL, *x;

	for (x = r->wait_head[k]; x && x != g; x = x->wnext)
		prev = x;
	assert(x == g);
	ring_take(r, k, prev, g);
}

void tgt_pool_drop_waiters(struct tgt_queue *q)
{
	struct tgt_pool_grp *g = q->grp;
	struct tgt_queue *prev = NULL, *x;

	if (!g || !q->in_grp_ring)
		return;
	grp_account(q->r, g, 0, -(int)q->pool_wait.n);
	memset(&q->pool_wait, 0, sizeof(q->pool_wait));
	for (x = g->wq_head; x && x != q; x = x->wnext)
		prev = x;
	assert(x == q);
	wq_unlink(g, prev, q);
	if (!g->wq_head && g->in_ring)
		ring_unlink(q->r, g);
}

void tgt_pool_leave(struct tgt_queue *q)
{
	struct tgt_reactor *r = q->r;
	struct tgt_pool_grp *g = q->grp, **pp;

	if (!g)
		return;
	tgt_pool_drop_waiters(q);
	assert(q->pool_held == 0);
	q->grp = NULL;
	if (--g->refs || g == &q->own_grp)
		return;
	assert(!g->held && !g->waiting && !g->in_ring);
	for (pp = &r->grps; *pp != g; pp = &(*pp)->next)
		;
	*pp = g->next;
	free(g);
}

static void give(struct tgt_reactor *r, struct tgt_req *req)
{
	struct tgt_queue *q = req->q;

	req->buf = rb_bufpool_get(&r->pool);
	assert(req->buf);
	req->buf_from_pool = true;
	q->pool_held++;
	grp_account(r, q->grp, 1, 0);
}

bool tgt_pool_take(struct tgt_req *req)
{
	struct tgt_queue *q = req->q;
	struct tgt_reactor *r = q->r;
	struct tgt_pool_grp *g = q->grp;

	/* Nobody waits: first come first served.  Otherwise get in line,
	 * and tgt_pool_grant decides whose turn it is. */
	if (!r->pool_waiting && r->pool.nfree > (g->admin ? 0 : r->pool_reserve)) {
		give(r, req);
		return true;
	}
	rb_fifo_push(&q->pool_wait, req);
	grp_account(r, g, 0, 1);
	if (!q->in_grp_ring)
		grp_push(g, q);
	if (!g->in_ring)
		ring_push(r, g);
	return false;
}

void tgt_pool_release(struct tgt_req *req)
{
	struct tgt_queue *q = req->q;

	rb_bufpool_put(&q->r->pool, req->buf);
	req->buf = NULL;
	req->buf_from_pool = false;
	assert(q->pool_held > 0);
	q->pool_held--;
	grp_account(q->r, q->grp, -1, 0);
}

/* Strictness levels of a grant, strictest first: the group under its share
 * and the queue not slow; the queue not slow; anyone (work conserving). */
enum { LVL_SHARE, LVL_NOT_SLOW, LVL_ANY, LVL_NR };

static bool grp_may_take(const struct tgt_reactor *r, const struct tgt_pool_grp *g, int lvl)
{
	uint32_t usable = r->pool.count - (g->admin ? 0 : r->pool_reserve), share;

	if (r->pool.nfree <= (g->admin ? 0 : r->pool_reserve))
		return false;
	if (lvl != LVL_SHARE || r->pool_waiting == g->waiting)
		return true;
	share = r->pool_users ? usable / r->pool_users : usable;
	return g->held < (share ? share : 1);
}

/* The next of g's queues to serve at lvl, rotated to the tail; NULL: none. */
static struct tgt_queue *grp_pick(const struct tgt_reactor *r, struct tgt_pool_grp *g, int lvl)
{
	bool strict = lvl != LVL_ANY && r->pool_waiting > g->waiting;
	struct tgt_queue *q, *prev = NULL;

	for (q = g->wq_head; q; prev = q, q = q->wnext)
		if (!strict || !q->pool_slow)
			break;
	if (!q)
		return NULL;
	/* Out of the ring; back at its tail if it still waits (caller). */
	wq_unlink(g, prev, q);
	return q;
}

struct tgt_req *tgt_pool_grant(struct tgt_reactor *r)
{
	if (!r->pool_waiting || !r->pool.nfree)
		return NULL;
	for (int lvl = 0; lvl < LVL_NR; lvl++) {
		for (int k = 0; k < 2; k++) {
			struct tgt_pool_grp *g, *prev = NULL;

			for (g = r->wait_head[k]; g; prev = g, g = g->wnext) {
				struct tgt_queue *q;
				struct tgt_req *req;

				if (!grp_may_take(r, g, lvl) || !(q = grp_pick(r, g, lvl)))
					continue;
				req = rb_fifo_pop(&q->pool_wait);
				grp_account(r, g, 0, -1);
				if (!rb_fifo_empty(&q->pool_wait))
					grp_push(g, q);
				/* The group goes to the ring's tail, or leaves it. */
				ring_take(r, k, prev, g);
				if (g->wq_head)
					ring_push(r, g);
				give(r, req);
				return req;
			}
		}
	}
	return NULL;
}
