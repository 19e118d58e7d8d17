/* SPDX-License-Identifier: MIT */
/*
 * NBD server: export description, client placement on I/O queues,
 * accept, and the drain at shutdown.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "checked.h"
#include "deadline.h"
#include "log.h"
#include "log_limit.h"
#include "nbd_priv.h"

/* ---- server ------------------------------------------------------------------- */

int nbd_server_create(struct ini_session *s, unsigned int max_clients, struct nbd_server **out)
{
	const struct rb_export_info *in = rb_session_info(s);
	unsigned int nq = rb_session_nr_queues(s);
	uint32_t min_depth = UINT32_MAX, chunk, budget;
	uint64_t max_payload;
	struct nbd_server *srv;
	int max_id = 0, ret;

	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->s = s;
	srv->max_clients = max_clients;
	snprintf(srv->name, sizeof(srv->name), "%s", in->name);
	chunk = rb_queue_buf_size(rb_session_queue(s, 0));
	for (unsigned int i = 0; i < nq; i++) {
		struct ini_queue *q = rb_session_queue(s, i);

		if (rb_queue_depth(q) < min_depth)
			min_depth = rb_queue_depth(q);
		if (rb_reactor_id(rb_queue_reactor(q)) > max_id)
			max_id = rb_reactor_id(rb_queue_reactor(q));
	}
	/* One request may take half a queue's slots, so two always fit. */
	budget = min_depth / 2 ? min_depth / 2 : 1;
	max_payload = (uint64_t)budget * chunk;
	if (max_payload > NBD_MAX_PAYLOAD)
		max_payload = NBD_MAX_PAYLOAD;
	ret = nbd_export_desc_init(&srv->exp, srv->name, in->size, in->flags, in->block_size,
				   (uint32_t)max_payload);
	if (ret) {
		rb_err("nbd: cannot describe export '%s' (block size %u, max payload %" PRIu64 ")",
		       in->name, in->block_size, max_payload);
		free(srv);
		return ret;
	}
	srv->chunk = chunk;
	srv->max_slots = (srv->exp.max_payload + chunk - 1) / chunk;
	srv->max_reqs = min_depth + 16;
	srv->nr_rctx = (unsigned int)max_id + 1;
	srv->rctx = calloc(srv->nr_rctx, sizeof(*srv->rctx));
	if (!srv->rctx) {
		free(srv);
		return -ENOMEM;
	}
	for (unsigned int i = 0; i < nq; i++) {
		struct ini_reactor *r = rb_queue_reactor(rb_session_queue(s, i));

		srv->rctx[rb_reactor_id(r)].r = r;
		srv->rctx[rb_reactor_id(r)].srv = srv;
	}
	atomic_init(&srv->rr, 0);
	atomic_init(&srv->next_id, 1);
	atomic_init(&srv->draining, false);
	pthread_mutex_init(&srv->lock, NULL);
	pthread_cond_init(&srv->cond, NULL);
	rb_info("nbd: export '%s': %" PRIu64 " bytes, block sizes %u/%u/%u, flags %#x", srv->name,
		srv->exp.size, srv->exp.min_block, srv->exp.pref_block, srv->exp.max_payload,
		srv->exp.tflags);
	*out = srv;
	return 0;
}

const struct nbd_export_desc *nbd_server_export(const struct nbd_server *srv)
{
	return &srv->exp;
}

static struct ini_queue *pick_queue(struct nbd_server *srv)
{
	unsigned int nq = rb_session_nr_queues(srv->s);
	unsigned int start = atomic_fetch_add(&srv->rr, 1);

	for (unsigned int i = 0; i < nq; i++) {
		struct ini_queue *q = rb_session_queue(srv->s, (start + i) % nq);

		if (rb_queue_usable(q))
			return q;
	}
	/* All dead: any queue answers EIO, which is what the client should see. */
	return rb_session_queue(srv->s, start % nq);
}

static void describe_peer(const struct sockaddr_storage *ss, socklen_t len, char *buf,
			  size_t blen, int listen_fd)
{
	/* A Unix peer has no name: use the socket's. */
	if (ss->ss_family == AF_UNIX || len <= sizeof(sa_family_t))
		nbd_listener_name(listen_fd, buf, blen);
	else
		nbd_format_addr((const struct sockaddr *)ss, buf, blen);
}

static void log_refusals(struct nbd_server *srv, const char *desc, uint64_t now)
{
	rb_warn("nbd %s: connection refused: already at nbd-max-clients = %u; %u refused since "
		"the last such message",
		desc, srv->max_clients, srv->refused);
	srv->refused = 0;
	srv->refused_log_ms = now;
}

/* 0: busy (or in the handshake and moving). */
static uint64_t idle_since(const struct nbd_client *c)
{
	uint64_t since = atomic_load(&c->idle_since_ms);

	return since ? since : atomic_load(&c->stall_since_ms);
}

static void evict_task(struct rb_task *t)
{
	struct nbd_rctx *rc = rb_container_of(t, struct nbd_rctx, evict_task);

	atomic_store(&rc->evict_posted, false);
	for (struct nbd_client *c = rc->clients, *next; c; c = next) {
		next = c->next;
		if (atomic_load(&c->evict))
			nbd_client_close(c, "idle at nbd-max-clients: place given to a new client");
	}
}

/*
 * At the cap, the client idle longest (no request for NBD_IDLE_EVICT_MS or
 * more after the handshake, or not reading what we send that long) makes
 * room: it is marked, its reactor closes it, and it no longer counts.
 * Under srv->lock.  Returns it, or NULL if none is idle long enough.
 */
static const struct nbd_client *evict_idle(struct nbd_server *srv, uint64_t now)
{
	struct nbd_client *victim = NULL;
	uint64_t oldest = 0;

	for (struct nbd_client *c = srv->accepted; c; c = c->anext) {
		uint64_t since = idle_since(c);

		if (c->evicting || !since || now < since + NBD_IDLE_EVICT_MS)
			continue;
		if (!victim || since < oldest) {
			victim = c;
			oldest = since;
		}
	}
	if (!victim)
		return NULL;
	victim->evicting = true;
	srv->nr_evicting++;
	atomic_store(&victim->evict, true);
	/* One task per reactor at a time; it closes every marked client. */
	if (!atomic_exchange(&victim->rc->evict_posted, true)) {
		victim->rc->evict_task.fn = evict_task;
		rb_reactor_post(victim->rc->r, &victim->rc->evict_task);
	}
	return victim;
}

/*
 * A client over the cap is accepted and closed at once, so it sees EOF
 * instead of hanging in the backlog -- unless an idle client gives it its
 * place.  However many come, one refusal line a second at most, counting
 * the refusals since the last line.
 */
static bool refuse_over_cap(struct nbd_server *srv, int fd, const char *desc)
{
	static struct rb_log_limit evicted = RB_LOG_LIMIT_INIT("nbd idle client closed at "
							       "nbd-max-clients",
							       RB_LOG_WARN);
	const struct nbd_client *victim = NULL;
	unsigned int open;
	uint64_t now = rb_now_ms(), id = 0, idle_ms = 0;
	char vdesc[sizeof(victim->desc)];

	pthread_mutex_lock(&srv->lock);
	open = srv->nr_accepted - srv->nr_evicting;
	if (open >= srv->max_clients)
		victim = evict_idle(srv, now);
	if (victim) {
		id = victim->id;
		idle_ms = now - idle_since(victim);
		memcpy(vdesc, victim->desc, sizeof(vdesc));
	}
	pthread_mutex_unlock(&srv->lock);
	if (victim) {
		rb_log_limited(&evicted, desc, RB_LOG_WARN,
			       "nbd %s: at nbd-max-clients = %u: closing client %" PRIu64
			       " (%s), idle or not reading its replies for %" PRIu64
			       " ms, to serve a new one",
			       desc, srv->max_clients, id, vdesc, idle_ms);
		return false;
	}
	if (open < srv->max_clients)
		return false;
	srv->refused++;
	if (!srv->refused_log_ms || now >= srv->refused_log_ms + 1000)
		log_refusals(srv, desc, now);
	close(fd);
	return true;
}

int nbd_server_accept(struct nbd_server *srv, int listen_fd)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char desc[128];
		int fd, one = 1;

		fd = accept4(listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			/* The connection stays in the backlog: the caller's
			 * level-triggered loop would come straight back. */
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				return -errno;
			rb_warn("nbd: accept: %s", strerror(errno));
			return 0;
		}
		describe_peer(&ss, sl, desc, sizeof(desc), listen_fd);
		if (refuse_over_cap(srv, fd, desc))
			continue;
		if ((ss.ss_family == AF_INET || ss.ss_family == AF_INET6) &&
		    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
			rb_dbg("nbd %s: TCP_NODELAY: %s", desc, strerror(errno));
		nbd_server_add_client(srv, fd, pick_queue(srv), true, desc);
	}
}

static void drain_task(struct rb_task *t)
{
	struct nbd_rctx *rc = rb_container_of(t, struct nbd_rctx, drain_task);

	for (struct nbd_client *c = rc->clients, *next; c; c = next) {
		next = c->next;
		nbd_client_drain(c);
	}
}

static void force_task(struct rb_task *t)
{
	struct nbd_rctx *rc = rb_container_of(t, struct nbd_rctx, force_task);

	for (struct nbd_client *c = rc->clients, *next; c; c = next) {
		next = c->next;
		nbd_client_close(c, "server shutting down (drain timed out)");
	}
}

/* Bytes the client sent that we have not read yet. */
static bool input_pending(const struct nbd_client *c)
{
	int n = 0;

	return ioctl(c->fd, FIONREAD, &n) == 0 && n > 0;
}

/* After a recovery, what clients sent meanwhile gets this long to be read
 * before it counts against them. */
#define NBD_HS_GRACE_MS 3000u

static void hs_task(struct rb_task *t)
{
	static struct rb_log_limit hs_limit = RB_LOG_LIMIT_INIT("nbd handshake limit",
								 RB_LOG_WARN);
	struct nbd_rctx *rc = rb_container_of(t, struct nbd_rctx, hs_task);
	uint64_t now = rb_now_ms();

	atomic_store(&rc->hs_posted, false);
	if (rb_session_recovering(rc->srv->s))
		rc->hs_grace_ms = now + NBD_HS_GRACE_MS;
	for (struct nbd_client *c = rc->clients, *next; c; c = next) {
		next = c->next;
		if (c->closed || c->st >= CS_TX_HDR || now - c->start_ms < NBD_HANDSHAKE_LIMIT_MS)
			continue;
		/*
		 * Input left unread while a recovery held this reactor (it may
		 * run this task, not read clients) is our wait, not the
		 * client's: a grace after it.  Otherwise the limit holds whatever
		 * the socket's state: input also piles up when the client does
		 * not read our replies (we stop reading it then) or floods
		 * options, and that must not keep it open.
		 */
		if (now < rc->hs_grace_ms && input_pending(c))
			continue;
		rb_log_limited(&hs_limit, c->desc, RB_LOG_WARN,
			       "nbd client %" PRIu64 " (%s): handshake not finished after %u ms; "
			       "closing it",
			       c->id, c->desc, NBD_HANDSHAKE_LIMIT_MS);
		nbd_client_close(c, "handshake limit");
	}
}

void nbd_server_tick(struct nbd_server *srv)
{
	uint64_t now = rb_now_ms();

	/* Refusals since the last warning, once the flood is over. */
	if (srv->refused && now >= srv->refused_log_ms + 1000)
		log_refusals(srv, "listeners", now);
	if (atomic_load(&srv->draining))
		return;
	for (unsigned int i = 0; i < srv->nr_rctx; i++) {
		struct nbd_rctx *rc = &srv->rctx[i];

		/* One at a time: a parked reactor must not get the task twice. */
		if (rc->r && !atomic_exchange(&rc->hs_posted, true)) {
			rc->hs_task.fn = hs_task;
			rb_reactor_post(rc->r, &rc->hs_task);
		}
	}
}

static bool wait_clients(struct nbd_server *srv, uint32_t ms)
{
	struct timespec ts = rb_deadline_ts(CLOCK_REALTIME, ms);
	bool idle;

	pthread_mutex_lock(&srv->lock);
	while (srv->nr_clients && pthread_cond_timedwait(&srv->cond, &srv->lock, &ts) == 0)
		;
	idle = srv->nr_clients == 0;
	pthread_mutex_unlock(&srv->lock);
	return idle;
}

void nbd_server_shutdown(struct nbd_server *srv, uint32_t ms)
{
	unsigned int left;

	pthread_mutex_lock(&srv->lock);
	atomic_store(&srv->draining, true);
	left = srv->nr_clients;
	pthread_mutex_unlock(&srv->lock);
	if (left)
		rb_info("nbd: waiting up to %u ms for %u client(s) to finish", ms, left);
	for (unsigned int i = 0; i < srv->nr_rctx; i++) {
		srv->rctx[i].drain_task.fn = drain_task;
		if (srv->rctx[i].r)
			rb_reactor_post(srv->rctx[i].r, &srv->rctx[i].drain_task);
	}
	if (wait_clients(srv, ms))
		return;
	rb_warn("nbd: clients still busy after %u ms; closing them", ms);
	for (unsigned int i = 0; i < srv->nr_rctx; i++) {
		srv->rctx[i].force_task.fn = force_task;
		if (srv->rctx[i].r)
			rb_reactor_post(srv->rctx[i].r, &srv->rctx[i].force_task);
	}
	wait_clients(srv, 1000);
}

void nbd_server_free(struct nbd_server *srv)
{
	if (!srv)
		return;
	/* rb_session_close ran every outstanding done(): clients are freed
	 * unless one was stranded; then leak it rather than crash. */
	for (unsigned int i = 0; i < srv->nr_rctx; i++)
		if (srv->rctx[i].clients)
			rb_warn("nbd: client %" PRIu64 " still referenced at exit",
				srv->rctx[i].clients->id);
	pthread_cond_destroy(&srv->cond);
	pthread_mutex_destroy(&srv->lock);
	free(srv->rctx);
	free(srv);
}
