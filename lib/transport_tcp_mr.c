/* SPDX-License-Identifier: MIT */
/*
 * "tcp" transport: the software protection domain and its region table.
 *
 * Every post checks its local sges against the table, and every incoming
 * WRITE or READ_REQ its rkey, from whichever reactor thread owns the
 * connection; regions are registered and deregistered far more rarely,
 * also from any thread (a target queue registers its rings at connect).
 * So lookups take no lock and write no shared memory:
 *
 *  - A key names its slot: (slot + 1) << 16 in the high half, so a lookup
 *    is one index, not a search.  The low half is the slot's generation
 *    (bumped at each registration, from a random start) shifted left by
 *    one, with bit 0 telling the rkey from the lkey: a key of a region
 *    that is gone does not fit the slot's next region, and no lkey is ever
 *    taken for an rkey.  (Hardware keys look the same: index + variant.)
 *  - Slots live in chunks that are never moved or freed before the domain,
 *    so a reader never touches freed memory.
 *  - Each slot is a seqlock: its writer (registrations serialise on a
 *    mutex) makes the count odd, changes the fields, makes it even; a
 *    reader copies the fields and retries if the count moved meanwhile.
 *
 * A region whose dereg_mr has returned is unreachable from then on.  An
 * operation that looked it up before may still be copying: deregistering
 * memory in use is the owner's bug, as with verbs.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "checked.h"
#include "log.h"
#include "transport_tcp_priv.h"

#define TCP_MR_CHUNK 256u			  /* slots per chunk */
#define TCP_MR_MAX (TCP_MR_CHUNK * TCP_MR_CHUNKS) /* slot + 1 fits in 16 bits */
_Static_assert(TCP_MR_MAX <= 0xffffu, "slot + 1 must fit the key's high half");

/* Fields readers load are accessed with __atomic builtins only. */
struct tcp_slot {
	uint32_t seq;  /* odd while the writer changes the slot */
	uint32_t lkey; /* 0: free */
	uint32_t rkey; /* 0: no remote access */
	uint32_t access;
	uint64_t addr;
	uint64_t len;
	/* Writer only (under the domain mutex). */
	uint32_t next_free; /* slot + 1 of the next free one, 0 = none */
	uint16_t gen;
};

/* A consistent copy of a slot. */
struct tcp_region {
	uint64_t addr, len;
	uint32_t lkey, rkey, access;
};

static pthread_mutex_t g_dom_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tcp_domain *g_dom;

/* ---- domain ---------------------------------------------------------------------- */

/* One software domain per process: conn_create has no domain argument, so
 * every domain_open/listen/conn_create shares it (like one PD per device). */
int tcp_dom_get(const struct rb_transport_opts *opts, struct tcp_domain **out)
{
	struct tcp_domain *d;
	int ret = 0;

	(void)opts;
	pthread_mutex_lock(&g_dom_lock);
	if (!g_dom) {
		d = calloc(1, sizeof(*d));
		if (!d) {
			ret = -ENOMEM;
			goto out_unlock;
		}
		ret = -pthread_mutex_init(&d->lock, NULL);
		if (ret) {
			free(d);
			goto out_unlock;
		}
		g_dom = d;
	}
	g_dom->refs++;
	*out = g_dom;
out_unlock:
	pthread_mutex_unlock(&g_dom_lock);
	return ret;
}

void tcp_dom_put(struct tcp_domain *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&g_dom_lock);
	/* Regions hold references: at zero none is left. */
	if (--d->refs == 0) {
		pthread_mutex_destroy(&d->lock);
		for (size_t i = 0; i < TCP_MR_CHUNKS; i++)
			free(d->chunks[i]);
		free(d);
		g_dom = NULL;
	}
	pthread_mutex_unlock(&g_dom_lock);
}

int tcp_domain_open(const struct rb_transport_opts *opts, struct rb_domain **out)
{
	return tcp_dom_get(opts, (struct tcp_domain **)out);
}

void tcp_domain_close(struct rb_domain *d)
{
	tcp_dom_put((struct tcp_domain *)d);
}

/* ---- slots ----------------------------------------------------------------------- */

/* Slot i, or NULL when its chunk does not exist (yet). */
static struct tcp_slot *slot_at(struct tcp_domain *d, uint32_t i)
{
	struct tcp_slot *ch;

	if (i >= TCP_MR_MAX)
		return NULL;
	ch = __atomic_load_n(&d->chunks[i / TCP_MR_CHUNK], __ATOMIC_ACQUIRE);
	return ch ? &ch[i % TCP_MR_CHUNK] : NULL;
}

/* The slot a key names: its high half is slot + 1 (below 1 << 16 wraps out of range). */
static struct tcp_slot *key_slot(struct tcp_domain *d, uint32_t key)
{
	return slot_at(d, (key >> 16) - 1);
}

static void slot_read(const struct tcp_slot *s, struct tcp_region *r)
{
	uint32_t seq;

	for (;;) {
		seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
		if (!(seq & 1)) {
			r->lkey = __atomic_load_n(&s->lkey, __ATOMIC_RELAXED);
			r->rkey = __atomic_load_n(&s->rkey, __ATOMIC_RELAXED);
			r->access = __atomic_load_n(&s->access, __ATOMIC_RELAXED);
			r->addr = __atomic_load_n(&s->addr, __ATOMIC_RELAXED);
			r->len = __atomic_load_n(&s->len, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) == seq)
				return;
		} else {
			/* A writer is between its stores; it may have been preempted. */
			sched_yield();
		}
	}
}

/* Under the domain mutex. */
static void slot_write(struct tcp_slot *s, const struct tcp_region *r)
{
	uint32_t seq = s->seq;

	__atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&s->lkey, r->lkey, __ATOMIC_RELAXED);
	__atomic_store_n(&s->rkey, r->rkey, __ATOMIC_RELAXED);
	__atomic_store_n(&s->access, r->access, __ATOMIC_RELAXED);
	__atomic_store_n(&s->addr, r->addr, __ATOMIC_RELAXED);
	__atomic_store_n(&s->len, r->len, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
}

/* Under the domain mutex: index of a free slot, adding a chunk if needed. */
static int slot_alloc(struct tcp_domain *d, uint32_t *out)
{
	struct tcp_slot *ch;
	uint16_t gen;
	uint32_t c;

	if (d->free_head) {
		*out = d->free_head - 1;
		d->free_head = slot_at(d, *out)->next_free;
		return 0;
	}
	c = d->nslots / TCP_MR_CHUNK;
	if (c >= TCP_MR_CHUNKS)
		return -ENOSPC;
	ch = calloc(TCP_MR_CHUNK, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	/* Random first generations: keys are not the same in every process. */
	if (getrandom(&gen, sizeof(gen), GRND_NONBLOCK) != (ssize_t)sizeof(gen))
		gen = (uint16_t)(uintptr_t)ch;
	for (uint32_t i = 0; i < TCP_MR_CHUNK; i++) {
		ch[i].gen = (uint16_t)(gen + i * 7919u);
		ch[i].next_free = i + 1 < TCP_MR_CHUNK ? d->nslots + i + 2 : 0;
	}
	__atomic_store_n(&d->chunks[c], ch, __ATOMIC_RELEASE);
	d->free_head = d->nslots + 2; /* slot nslots is taken now; the next is free */
	*out = d->nslots;
	d->nslots += TCP_MR_CHUNK;
	return 0;
}

/* ---- registration ---------------------------------------------------------------- */

int tcp_reg_mr(struct rb_domain *dom, void *addr, size_t len, unsigned int access,
	       struct rb_mr **out)
{
	struct tcp_domain *d = (struct tcp_domain *)dom;
	struct tcp_region r;
	struct tcp_slot *s;
	struct rb_mr *mr;
	uint32_t i, key;
	uintptr_t end;
	int ret;

	if (!d || !addr || !len || (access & ~(RB_ACCESS_REMOTE_READ | RB_ACCESS_REMOTE_WRITE)) ||
	    rb_add_overflow((uintptr_t)addr, len, &end))
		return -EINVAL;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -ENOMEM;
	pthread_mutex_lock(&d->lock);
	ret = slot_alloc(d, &i);
	if (ret) {
		pthread_mutex_unlock(&d->lock);
		rb_err("tcp: reg_mr of %zu bytes: %s%s", len, strerror(-ret),
		       ret == -ENOSPC ? " (too many registered regions)" : "");
		free(mr);
		return ret;
	}
	s = slot_at(d, i);
	s->gen = (uint16_t)((s->gen + 1) & 0x7fff);
	key = (i + 1) << 16 | (uint32_t)s->gen << 1;
	r = (struct tcp_region){.addr = (uintptr_t)addr,
				.len = len,
				.lkey = key,
				.rkey = access ? key | 1 : 0,
				.access = access};
	slot_write(s, &r);
	pthread_mutex_unlock(&d->lock);
	/* A region keeps its domain alive, as an MR keeps its PD busy. */
	pthread_mutex_lock(&g_dom_lock);
	d->refs++;
	pthread_mutex_unlock(&g_dom_lock);
	*mr = (struct rb_mr){.addr = addr,
			     .length = len,
			     .lkey = r.lkey,
			     .rkey = r.rkey,
			     .access = access,
			     .domain = dom};
	*out = mr;
	return 0;
}

void tcp_dereg_mr(struct rb_mr *mr)
{
	struct tcp_domain *d;
	struct tcp_slot *s;

	if (!mr)
		return;
	d = (struct tcp_domain *)mr->domain;
	pthread_mutex_lock(&d->lock);
	s = key_slot(d, mr->lkey);
	slot_write(s, &(struct tcp_region){0});
	s->next_free = d->free_head;
	d->free_head = mr->lkey >> 16; /* slot + 1 */
	pthread_mutex_unlock(&d->lock);
	tcp_dom_put(d);
	free(mr);
}

/* ---- lookups (any thread, no lock) ----------------------------------------------- */

/* Local sges must lie inside a region registered with that lkey. */
bool tcp_sges_ok(struct tcp_domain *d, const struct rb_sge *sg, int nsge, uint64_t *total)
{
	struct tcp_region r;
	const struct tcp_slot *s;
	uint64_t sum = 0;
	bool ok = true;

	for (int i = 0; ok && i < nsge; i++) {
		if (!sg[i].length)
			continue;
		s = key_slot(d, sg[i].lkey);
		ok = false;
		if (s) {
			slot_read(s, &r);
			ok = r.lkey == sg[i].lkey &&
			     rb_region_ok((uintptr_t)sg[i].addr, sg[i].length, r.addr, r.len);
		}
		sum += sg[i].length;
	}
	*total = sum;
	return ok;
}

enum rkey_res tcp_rkey_check(struct tcp_domain *d, uint32_t rkey, unsigned int need, uint64_t addr,
			     uint64_t len)
{
	const struct tcp_slot *s = rkey ? key_slot(d, rkey) : NULL;
	struct tcp_region r;

	if (!s)
		return RK_NOKEY;
	slot_read(s, &r);
	if (r.rkey != rkey)
		return RK_NOKEY;
	if (!(r.access & need))
		return RK_ACCESS;
	if (!rb_region_ok(addr, len, r.addr, r.len))
		return RK_BOUNDS;
	return RK_OK;
}
