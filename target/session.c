/* SPDX-License-Identifier: MIT */
/*
 * The session table.  Sessions are control-path objects shared between
 * reactors, so the table takes a mutex; the I/O path never does (a queue
 * holds a reference to its session).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "target.h"

static pthread_mutex_t sessions_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tgt_session *sessions;

static uint64_t new_session_id(void)
{
	uint64_t id = 0;

	/* Unguessable, non-zero: an I/O queue names its session by this id. */
	while (id == 0)
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = (uint64_t)rb_clock_ns();
	return id;
}

/* Under sessions_lock. */
static struct tgt_session *find_locked(uint64_t id)
{
	struct tgt_session *s = sessions;

	while (s && s->id != id)
		s = s->next;
	return s;
}

/* A session that counts against its host id's limit: one whose id needs
 * no proof, or was proven. */
static bool host_counts(const struct tgt_session *s)
{
	return !s->auth_required || s->authed;
}

/* Under sessions_lock: the sessions besides n (in all, from n's address,
 * counting against n's host id).  Sessions ending (dead: a reconnect's
 * predecessor, a lost admin queue) do not count, nor does the one n
 * replaces towards its host. */
struct counts {
	uint32_t all, addr, host;
};

static struct counts count_locked(const struct tgt_session *n, uint64_t replaces)
{
	struct counts k = { 0, 0, 0 };

	for (const struct tgt_session *s = sessions; s; s = s->next) {
		if (s == n || atomic_load(&s->dead))
			continue;
		k.all++;
		if (strcmp(s->addr, n->addr) == 0)
			k.addr++;
		if (s->id != replaces && host_counts(s) && strcmp(s->hostid, n->hostid) == 0)
			k.host++;
	}
	return k;
}

/* Under sessions_lock: RB_S_SUCCESS, or the limit a new session n breaks. */
static uint16_t check_limits_locked(const struct rb_target_conf *c, const struct tgt_session *n)
{
	struct counts k = count_locked(n, 0);

	if (k.all >= c->max_sessions)
		return RB_S_SESSION_LIMIT;
	if (k.addr >= c->max_sessions_per_addr)
		return RB_S_ADDR_SESSION_LIMIT;
	if (host_counts(n) && k.host >= c->max_sessions_per_host)
		return RB_S_HOST_SESSION_LIMIT;
	return RB_S_SUCCESS;
}

struct tgt_session *tgt_session_create(const struct rb_target_conf *c, struct tgt_export *e,
				       const struct tgt_session_req *r, uint16_t *status)
{
	struct tgt_session *s = calloc(1, sizeof(*s));

	*status = RB_S_BUSY;
	if (!s)
		return NULL;
	s->id = new_session_id();
	s->export = e;
	snprintf(s->hostid, sizeof(s->hostid), "%s", r->hostid);
	snprintf(s->addr, sizeof(s->addr), "%s", r->addr);
	s->auth_required = r->auth_required;
	s->nr_io_queues = r->nr_io_queues;
	s->queue_depth = r->queue_depth;
	s->kato_ms = r->kato_ms;
	atomic_init(&s->refs, 1); /* the admin queue's */
	pthread_mutex_lock(&sessions_lock);
	*status = check_limits_locked(c, s);
	if (*status == RB_S_SUCCESS) {
		s->next = sessions;
		sessions = s;
	}
	pthread_mutex_unlock(&sessions_lock);
	if (*status != RB_S_SUCCESS) {
		free(s);
		return NULL;
	}
	return s;
}

struct tgt_session *tgt_session_bind(uint64_t id, uint16_t qid, uint16_t *reason)
{
	struct tgt_session *s;

	pthread_mutex_lock(&sessions_lock);
	s = find_locked(id);
	/* An id alone binds nothing of a session that must authenticate. */
	if (!s || atomic_load(&s->dead) || !s->export || (s->auth_required && !s->authed)) {
		*reason = RB_REJ_NO_SESSION;
		s = NULL;
	} else if (qid == 0 || qid > s->nr_io_queues ||
		   (s->connected_qids[qid / 64] & (1ull << (qid % 64)))) {
		*reason = RB_REJ_BAD_QID;
		s = NULL;
	} else {
		s->connected_qids[qid / 64] |= 1ull << (qid % 64);
		atomic_fetch_add(&s->refs, 1);
	}
	pthread_mutex_unlock(&sessions_lock);
	return s;
}

void tgt_session_unbind(struct tgt_session *s, uint16_t qid)
{
	pthread_mutex_lock(&sessions_lock);
	s->connected_qids[qid / 64] &= ~(1ull << (qid % 64));
	pthread_mutex_unlock(&sessions_lock);
}

uint16_t tgt_session_authenticated(const struct rb_target_conf *c, struct tgt_session *s,
				   const struct rb_auth_skey *sk, uint64_t replaces)
{
	uint16_t st = RB_S_SUCCESS;

	pthread_mutex_lock(&sessions_lock);
	/* Only the host's own limit is new here; the others held at CONNECT. */
	if (count_locked(s, replaces).host >= c->max_sessions_per_host) {
		st = RB_S_HOST_SESSION_LIMIT;
	} else {
		s->skey = *sk;
		s->authed = true;
	}
	pthread_mutex_unlock(&sessions_lock);
	return st;
}

void tgt_session_kill(struct tgt_session *s)
{
	atomic_store(&s->dead, true);
}

void tgt_session_put(struct tgt_session *s)
{
	struct tgt_session **pp;

	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	pthread_mutex_lock(&sessions_lock);
	for (pp = &sessions; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&sessions_lock);
	if (s->export)
		tgt_export_put(s->export);
	rb_auth_skey_clear(&s->skey);
	free(s);
}

/*
 * The session a reconnecting host names in CONNECT: it is ended here, and
 * the reference taken keeps it in the table until its queues, and the
 * commands still executing in them, are gone.  Only the same host id on the
 * same export may end a session; anything else (already gone, after a
 * target restart) is no predecessor.
 */
struct tgt_session *tgt_session_take_predecessor(uint64_t id, const char *hostid,
						 const char *export_name, bool authed)
{
	struct tgt_session *s;
	unsigned int refs;

	pthread_mutex_lock(&sessions_lock);
	s = find_locked(id);
	/* By name: a reload may have replaced the export object meanwhile. */
	if (s && (!s->export || strcmp(s->export->conf.name, export_name) != 0 ||
		  strcmp(s->hostid, hostid) != 0 || s->authed != authed ||
		  (s->auth_required && !s->authed)))
		s = NULL;
	if (s) {
		/* Not one whose last reference is being dropped right now. */
		refs = atomic_load(&s->refs);
		do {
			if (refs == 0) {
				s = NULL;
				break;
			}
		} while (!atomic_compare_exchange_weak(&s->refs, &refs, refs + 1));
	}
	if (s)
		atomic_store(&s->dead, true);
	pthread_mutex_unlock(&sessions_lock);
	return s;
}
