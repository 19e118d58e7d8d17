/* SPDX-License-Identifier: MIT */
/*
 * target/pool.c alone: fair shares of a reactor's data buffers.  The test
 * stands in for request.c (takes, releases, grants) with queues and
 * sessions that are only addresses.
 */
#include "config.h"

#include <stdlib.h>

#include "tap.h"
#include "target.h"

static struct tgt_reactor r;

static struct tgt_queue *queue(uint16_t qid, struct tgt_session *s)
{
	struct tgt_queue *q = calloc(1, sizeof(*q));

	if (!q)
		abort();
	q->r = &r;
	q->qid = qid;
	q->session = s;
	if (tgt_pool_join(q))
		abort();
	return q;
}

static void reactor(uint32_t buffers)
{
	memset(&r, 0, sizeof(r));
	if (rb_bufpool_init(&r.pool, 4096, buffers))
		abort();
	tgt_pool_init(&r);
}

static struct tgt_req *reqs(struct tgt_queue *q, int n)
{
	struct tgt_req *v = calloc((size_t)n, sizeof(*v));

	for (int i = 0; i < n; i++)
		v[i].q = q;
	return v;
}

/* Queue q goes: its requests' buffers back, its waiters dropped. */
static void drop(struct tgt_queue *q, struct tgt_req *v, int n)
{
	for (int i = 0; i < n; i++)
		if (v[i].buf)
			tgt_pool_release(&v[i]);
	tgt_pool_leave(q);
	free(v);
	free(q);
}

/* Everything back: no users, every buffer free, no groups. */
static void check_empty(void)
{
	is_int(r.pool_users, 0, "no users left");
	is_int(r.pool_waiting, 0, "no waiters left");
	is_int(r.pool.nfree, r.pool.count, "every buffer back");
	ok(r.grps == NULL && !r.wait_head[0] && !r.wait_head[1], "groups freed, rings empty");
	rb_bufpool_fini(&r.pool);
}

/* Take for n requests of v; how many got a buffer at once. */
static int take_n(struct tgt_req *v, int n)
{
	int got = 0;

	for (int i = 0; i < n; i++)
		got += tgt_pool_take(&v[i]);
	return got;
}

static void test_reserve(void)
{
	static const uint32_t in[] = {1, 3, 4, 32, 64, 256, 65536};
	static const uint32_t want[] = {0, 0, 1, 1, 2, 8, 8};

	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		reactor(in[i]);
		is_int(r.pool_reserve, want[i], "%u buffers: %u only admin commands take", in[i],
		       want[i]);
		rb_bufpool_fini(&r.pool);
	}
}

/* A hoarder alone takes all but the reserve; an admin command gets that
 * at once; a second host's one request comes before the hoarder's many. */
static void test_hoarder(void)
{
	struct tgt_session sa, sb;
	struct tgt_queue *a1, *a2, *b1, *adm;
	struct tgt_req *va, *va2, *vb, *vadm, *g;

	reactor(32);
	a1 = queue(1, &sa);
	a2 = queue(2, &sa);
	b1 = queue(1, &sb);
	adm = queue(0, NULL);
	ok(a1->grp == a2->grp && a1->grp != b1->grp && adm->grp == &adm->own_grp,
	   "a session's queues share a group; an admin queue has its own");
	va = reqs(a1, 128);
	va2 = reqs(a2, 128);
	is_int(take_n(va, 128), 31, "alone, a session takes the pool but the reserve");
	is_int(take_n(va2, 128), 0, "then its other queue waits");
	is_int(r.pool_waiting, 128 + 97, "its requests wait");
	ok(!tgt_pool_pressure(a1), "no pressure from its own waiters");
	ok(tgt_pool_grant(&r) == NULL, "no grant of the admin reserve to I/O");

	vadm = reqs(adm, 1);
	is_int(take_n(vadm, 1), 0, "an admin command waits in line...");
	ok(tgt_pool_pressure(a1), "pressure while the admin command waits");
	ok(tgt_pool_grant(&r) == &vadm[0] && vadm[0].buf, "...and is granted the reserve");

	vb = reqs(b1, 2);
	is_int(take_n(vb, 2), 0, "a second host's requests wait");
	ok(tgt_pool_pressure(a1) && tgt_pool_pressure(b1),
	   "pressure on both: each sees the other wait");
	tgt_pool_release(&vadm[0]);
	ok(tgt_pool_grant(&r) == NULL, "a released admin buffer is the reserve again");
	tgt_pool_release(&va[0]);
	g = tgt_pool_grant(&r);
	ok(g == &vb[0], "a buffer the hoarder returns goes to the other host first");
	tgt_pool_release(&va[1]);
	ok(tgt_pool_grant(&r) == &vb[1], "and the next, while it is under its share");
	is_int(b1->grp->held, 2, "group accounting");
	is_int(b1->pool_held, 2, "queue accounting");
	tgt_pool_release(&va[2]);
	g = tgt_pool_grant(&r);
	ok(g && g->q->grp == a1->grp, "no one else waits: the hoarder again (work conserving)");
	is_int(r.pool_users, 2, "two groups hold or wait");

	/* Tear down: a2's waiters dropped first (as a failed queue's are). */
	tgt_pool_drop_waiters(a2);
	tgt_pool_drop_waiters(a2); /* twice: a no-op */
	is_int(a2->grp->waiting, 96, "a1's waiters stay (one of its 97 was served)");
	drop(a1, va, 128);
	drop(a2, va2, 128);
	drop(b1, vb, 2);
	drop(adm, vadm, 1);
	check_empty();
}

/* Waiters are served round robin over groups, and over a group's queues. */
static void test_round_robin(void)
{
	struct tgt_session s[4];
	struct tgt_queue *q[4], *q0b;
	struct tgt_req *v[4], *vb, *g;
	const char *want = "abcabc", *want_q = "12121";
	char got[8] = "", gotq[8] = "";

	reactor(64); /* reserve 2 */
	for (int i = 0; i < 4; i++) {
		q[i] = queue(1, &s[i]);
		v[i] = reqs(q[i], 62);
	}
	is_int(take_n(v[3], 62), 62, "d fills the pool");
	for (int i = 0; i < 3; i++)
		is_int(take_n(v[i], 2), 0, "%c waits", 'a' + i);
	for (int i = 0; i < 6; i++) {
		tgt_pool_release(&v[3][i]);
		g = tgt_pool_grant(&r);
		got[i] = g ? (char)('a' + (g->q == q[1]) + 2 * (g->q == q[2])) : '-';
	}
	is_str(got, want, "groups take turns");

	/* Within a group: its queues take turns, each in arrival order. */
	q0b = queue(2, &s[0]);
	vb = reqs(q0b, 2);
	is_int(take_n(&v[0][2], 3), 0, "queue 1 of a: three wait");
	is_int(take_n(vb, 2), 0, "queue 2 of a: two wait");
	for (int i = 0; i < 5; i++) {
		tgt_pool_release(&v[3][6 + i]);
		g = tgt_pool_grant(&r);
		gotq[i] = g ? (g->q == q0b ? '2' : g->q == q[0] ? '1' : 'x') : '-';
	}
	is_str(gotq, want_q, "a group's queues take turns");
	ok(v[0][2].buf && v[0][3].buf && v[0][4].buf, "in arrival order");
	drop(q0b, vb, 2);
	for (int i = 0; i < 4; i++)
		drop(q[i], v[i], 62);
	check_empty();
}

/* Shares: with others waiting, a group at its share waits; a slow queue
 * waits behind everyone, but alone still gets buffers. */
static void test_share_and_slow(void)
{
	struct tgt_session sa, sb, sc;
	struct tgt_queue *a, *b, *c;
	struct tgt_req *va, *vb, *vc, *g;

	reactor(32); /* 31 for I/O */
	a = queue(1, &sa);
	b = queue(1, &sb);
	c = queue(1, &sc);
	va = reqs(a, 40);
	vb = reqs(b, 40);
	vc = reqs(c, 40);
	is_int(take_n(va, 10), 10, "a takes 10");
	is_int(take_n(vb, 21), 21, "b takes the rest");
	is_int(take_n(va + 10, 5), 0, "a waits for 5 more");
	is_int(take_n(vc, 1), 0, "c waits for one");
	/* Three users: a share is 31 / 3 = 10.  a, first in line but at its
	 * share, waits while c does; then it is served (work conserving). */
	tgt_pool_release(&vb[0]);
	ok(tgt_pool_grant(&r) == &vc[0], "a at its share waits while c waits");
	tgt_pool_release(&vb[1]);
	ok(tgt_pool_grant(&r) == &va[10], "no one else waits: a (work conserving)");

	/* a under its share but slow (overdue transfers): c goes first. */
	for (int i = 0; i < 5; i++)
		tgt_pool_release(&va[i]);
	a->pool_slow = true;
	is_int(take_n(vc + 1, 1), 0, "c waits again");
	ok(tgt_pool_grant(&r) == &vc[1], "c before slow a");
	g = tgt_pool_grant(&r);
	ok(g == &va[11], "slow a, alone waiting, still gets a buffer");
	ok(tgt_pool_grant(&r) == &va[12], "and the next");
	drop(a, va, 40);
	drop(b, vb, 40);
	drop(c, vc, 40);
	check_empty();
}

int main(void)
{
	test_reserve();
	test_hoarder();
	test_round_robin();
	test_share_and_slow();
	return tap_done();
}
