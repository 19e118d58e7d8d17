/* SPDX-License-Identifier: MIT */
/*
 * The tcp transport's region table (lib/transport_tcp_mr.c): keys, bounds
 * and access, slot reuse, the table's limit, and lookups from other
 * threads while regions come and go (they take no lock).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "clock.h"
#include "log.h"
#include "tap.h"
#include "transport.h"
#include "transport_tcp_priv.h"

static const struct rb_transport_ops *T;
static struct rb_domain *D;
static struct tcp_domain *TD;

static bool sge_ok(void *addr, uint32_t len, uint32_t lkey)
{
	struct rb_sge s = {.addr = addr, .length = len, .lkey = lkey};
	uint64_t total;

	return tcp_sges_ok(TD, &s, 1, &total) && total == len;
}

static enum rkey_res rcheck(struct rb_mr *mr, uint32_t rkey, unsigned int need, size_t off,
			    size_t len)
{
	return tcp_rkey_check(TD, rkey, need, (uintptr_t)mr->addr + off, len);
}

static void test_keys(void)
{
	static char a[4096], b[4096], c[4096];
	struct rb_mr *loc, *rd, *rw, *again;
	struct rb_sge two[2];
	uint32_t old_l, old_r;
	uint64_t total;

	ok(!T->reg_mr(D, a, sizeof(a), RB_ACCESS_LOCAL, &loc), "register a local region");
	ok(!T->reg_mr(D, b, sizeof(b), RB_ACCESS_REMOTE_READ, &rd), "register a readable region");
	ok(!T->reg_mr(D, c, sizeof(c), RB_ACCESS_REMOTE_READ | RB_ACCESS_REMOTE_WRITE, &rw),
	   "register a read/write region");
	ok(loc->lkey && !loc->rkey, "local region: lkey, no rkey");
	ok(rd->lkey && rd->rkey && rd->lkey != rd->rkey, "remote region: distinct lkey and rkey");
	ok(loc->lkey != rd->lkey && rd->lkey != rw->lkey && rd->rkey != rw->rkey,
	   "keys differ between regions");
	is_int(T->reg_mr(D, a, 0, RB_ACCESS_LOCAL, &again), -EINVAL, "zero length refused");
	is_int(T->reg_mr(D, (void *)(UINTPTR_MAX - 10), 100, RB_ACCESS_LOCAL, &again), -EINVAL,
	       "region wrapping the address space refused");
	is_int(T->reg_mr(D, a, 1, 0x80, &again), -EINVAL, "unknown access bit refused");

	/* Local sges. */
	ok(sge_ok(a, sizeof(a), loc->lkey), "whole region by lkey");
	ok(sge_ok(a + 100, 200, loc->lkey), "slice by lkey");
	ok(!sge_ok(a + 1, sizeof(a), loc->lkey), "one byte past the end refused");
	ok(!sge_ok(a, 1, rd->lkey), "another region's lkey refused");
	ok(!sge_ok(b, 1, rd->rkey), "an rkey as lkey refused");
	ok(!sge_ok(a, 1, loc->lkey ^ 2), "another generation's lkey refused");
	ok(!sge_ok(a, 1, 0), "lkey 0 refused");
	ok(!sge_ok(a, 1, 0xfffe0000u), "lkey of a slot never used refused");
	two[0] = (struct rb_sge){.addr = a, .length = 10, .lkey = loc->lkey};
	two[1] = (struct rb_sge){.addr = NULL, .length = 0, .lkey = 12345};
	ok(tcp_sges_ok(TD, two, 2, &total) && total == 10, "zero-length sge not checked");

	/* Remote keys. */
	is_int(rcheck(rd, rd->rkey, RB_ACCESS_REMOTE_READ, 0, sizeof(b)), RK_OK, "read by rkey");
	is_int(rcheck(rd, rd->rkey, RB_ACCESS_REMOTE_WRITE, 0, 1), RK_ACCESS,
	       "write to a read-only region");
	is_int(rcheck(rw, rw->rkey, RB_ACCESS_REMOTE_WRITE, 4095, 1), RK_OK, "last byte");
	is_int(rcheck(rw, rw->rkey, RB_ACCESS_REMOTE_WRITE, 4095, 2), RK_BOUNDS, "past the end");
	is_int(tcp_rkey_check(TD, rw->rkey, RB_ACCESS_REMOTE_WRITE, UINT64_MAX - 1, 4), RK_BOUNDS,
	       "address + length overflowing");
	is_int(rcheck(rd, rd->lkey, RB_ACCESS_REMOTE_READ, 0, 1), RK_NOKEY, "lkey as rkey");
	is_int(rcheck(loc, loc->lkey | 1, RB_ACCESS_REMOTE_READ, 0, 1), RK_NOKEY,
	       "rkey form of a local region's lkey");
	is_int(rcheck(rd, rd->rkey + 2, RB_ACCESS_REMOTE_READ, 0, 1), RK_NOKEY,
	       "another generation's rkey");
	is_int(rcheck(rd, 0, RB_ACCESS_REMOTE_READ, 0, 1), RK_NOKEY, "rkey 0");

	/* Deregistered: unreachable; the slot comes back with new keys. */
	old_l = rd->lkey;
	old_r = rd->rkey;
	T->dereg_mr(rd);
	ok(!sge_ok(b, 1, old_l), "lkey of a deregistered region refused");
	is_int(tcp_rkey_check(TD, old_r, RB_ACCESS_REMOTE_READ, (uintptr_t)b, 1), RK_NOKEY,
	       "rkey of a deregistered region refused");
	ok(!T->reg_mr(D, b, sizeof(b), RB_ACCESS_REMOTE_READ, &rd), "register again");
	ok((rd->lkey >> 16) == (old_l >> 16), "the freed slot is reused");
	ok(rd->lkey != old_l && rd->rkey != old_r, "with new keys");
	ok(!sge_ok(b, 1, old_l), "old lkey still refused");
	is_int(tcp_rkey_check(TD, old_r, RB_ACCESS_REMOTE_READ, (uintptr_t)b, 1), RK_NOKEY,
	       "old rkey still refused");
	is_int(rcheck(rd, rd->rkey, RB_ACCESS_REMOTE_READ, 0, 1), RK_OK, "new rkey works");
	T->dereg_mr(loc);
	T->dereg_mr(rd);
	T->dereg_mr(rw);
}

/* Across chunks, up to the table's limit and back. */
static void test_many(void)
{
	enum { N = 70000 };
	static char buf[N];
	struct rb_mr **mr = calloc(N, sizeof(*mr));
	uint32_t *lkey = calloc(N, sizeof(*lkey));
	int n = 0, ret = 0, bad = 0;

	if (!mr || !lkey) {
		free(mr);
		free(lkey);
		ok(0, "memory for the region list");
		return;
	}
	while (n < N && !(ret = T->reg_mr(D, buf + n, 1, RB_ACCESS_REMOTE_WRITE, &mr[n]))) {
		lkey[n] = mr[n]->lkey;
		n++;
	}
	is_int(ret, -ENOSPC, "registration past the table's limit: -ENOSPC");
	ok(n > 60000, "%d regions fit first", n);
	for (int i = 0; i < n; i++)
		if (!sge_ok(buf + i, 1, mr[i]->lkey) || sge_ok(buf + i + 1, 1, mr[i]->lkey) ||
		    rcheck(mr[i], mr[i]->rkey, RB_ACCESS_REMOTE_WRITE, 0, 1) != RK_OK)
			bad++;
	is_int(bad, 0, "every region found by its own keys, with its own bounds");
	for (int i = 0; i < n; i += 2)
		T->dereg_mr(mr[i]);
	bad = 0;
	for (int i = 0; i < n; i++)
		if (sge_ok(buf + i, 1, lkey[i]) != (i % 2 == 1))
			bad++;
	is_int(bad, 0, "half deregistered: exactly the other half still found");
	ret = T->reg_mr(D, buf, 1, RB_ACCESS_LOCAL, &mr[0]);
	is_int(ret, 0, "a freed slot is taken again");
	if (!ret)
		T->dereg_mr(mr[0]);
	for (int i = 1; i < n; i += 2)
		T->dereg_mr(mr[i]);
	free(mr);
	free(lkey);
}

/* ---- lookups while regions come and go --------------------------------------------- */

/* Registrations (a slot's keys repeat after 32768), a count, not a time: the
 * readers keep pace however the threads are scheduled; 60 s at most. */
#define CHURN_MAX 20000
#define LOOKUPS_MIN (CHURN_MAX / 10)

static struct rb_mr *stable;
static char stable_buf[8192], churn_buf[2][4096];
/* rkey << 32 | index of its buffer in churn_buf, 0 = none yet */
static _Atomic uint64_t live, dead;
static atomic_bool stop;
static atomic_long lookups, wrong;

static void *reader(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		uint64_t l = atomic_load(&live), d = atomic_load(&dead);
		enum rkey_res r;

		if (!sge_ok(stable_buf + 4096, 4096, stable->lkey) ||
		    tcp_rkey_check(TD, stable->rkey, RB_ACCESS_REMOTE_READ, (uintptr_t)stable_buf,
				   sizeof(stable_buf)) != RK_OK)
			atomic_fetch_add(&wrong, 1);
		/* Gone before this lookup began: never found. */
		if (d && tcp_rkey_check(TD, (uint32_t)(d >> 32), RB_ACCESS_REMOTE_WRITE,
					(uintptr_t)churn_buf[d & 1], 4096) != RK_NOKEY)
			atomic_fetch_add(&wrong, 1);
		/* Maybe gone by now, but never half of one region, half of another. */
		if (l) {
			r = tcp_rkey_check(TD, (uint32_t)(l >> 32), RB_ACCESS_REMOTE_WRITE,
					   (uintptr_t)churn_buf[l & 1], 4096);
			if (r != RK_OK && r != RK_NOKEY)
				atomic_fetch_add(&wrong, 1);
		}
		atomic_fetch_add(&lookups, 1);
	}
	return NULL;
}

static void test_concurrent(void)
{
	pthread_t th[2];
	uint64_t t0, now = 0;
	long churns = 0;
	int nth = 0;

	if (T->reg_mr(D, stable_buf, sizeof(stable_buf), RB_ACCESS_REMOTE_READ, &stable)) {
		ok(0, "register the stable region");
		return;
	}
	for (; nth < 2; nth++)
		if (pthread_create(&th[nth], NULL, reader, NULL))
			break;
	ok(nth == 2, "reader threads started");
	t0 = rb_clock_ms();
	do {
		struct rb_mr *mr;
		uint64_t v;

		/* Each region on the other buffer than the last: the slot is the same,
		 * so a torn read (new key, old bounds) would be out of bounds. */
		if (T->reg_mr(D, churn_buf[churns & 1], 4096, RB_ACCESS_REMOTE_WRITE, &mr))
			break;
		v = (uint64_t)mr->rkey << 32 | (uint64_t)(churns & 1);
		atomic_store(&live, v);
		T->dereg_mr(mr);
		atomic_store(&dead, v);
		churns++;
		/* The readers keep up (a tenth as many rounds), so they have run
		 * during the churn whatever else the machine runs. */
		do {
			now = rb_clock_ms();
			if (atomic_load(&lookups) >= churns / 10)
				break;
			sched_yield();
		} while (now - t0 < 60000);
	} while (churns < CHURN_MAX && now - t0 < 60000);
	atomic_store(&stop, true);
	while (nth > 0)
		pthread_join(th[--nth], NULL);
	ok(churns == CHURN_MAX, "%ld regions came and went meanwhile", churns);
	ok(atomic_load(&lookups) >= LOOKUPS_MIN, "%ld rounds of lookups", atomic_load(&lookups));
	is_int(atomic_load(&wrong), 0, "no lookup saw a wrong answer");
	T->dereg_mr(stable);
}

int main(void)
{
	struct rb_transport_opts opts;

	rb_transport_opts_init(&opts);
	T = rb_transport_find("tcp");
	if (!T || T->domain_open(&opts, &D)) {
		printf("Bail out! no tcp domain\n");
		return 1;
	}
	TD = (struct tcp_domain *)D;
	test_keys();
	test_many();
	test_concurrent();
	T->domain_close(D);
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
