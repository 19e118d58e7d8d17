/* SPDX-License-Identifier: MIT */
/*
 * Admin queue commands: CONNECT (a session, or a discovery session),
 * LIST_EXPORTS, KEEPALIVE, DISCONNECT; and the admin queue's timers
 * (keep-alive, a CONNECT waiting for the session it replaces).
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "checked.h"
#include "log.h"
#include "log_limit.h"
#include "target.h"

static bool host_allowed(const struct rb_export_conf *c, const char *hostid)
{
	if (c->nr_allowed == 0)
		return true;
	for (int i = 0; i < c->nr_allowed; i++)
		if (strcmp(c->allowed[i], hostid) == 0)
			return true;
	return false;
}

static uint16_t min16(uint32_t a, uint32_t b)
{
	return (uint16_t)(a < b ? a : b);
}

/* How long a CONNECT waits for the session it replaces, before it is refused
 * (PREDECESSOR_BUSY) and the host retries: well inside its command timeout. */
#define PREDECESSOR_WAIT_NS (2000ull * 1000000ull)

/* Refusals a peer can ask for at will: rate-limited. */
static struct rb_log_limit refused_connects = RB_LOG_LIMIT_INIT("refused CONNECTs", RB_LOG_WARN);
static struct rb_log_limit auth_required = RB_LOG_LIMIT_INIT("CONNECTs that need "
							     "authentication",
							     RB_LOG_INFO);

/*
 * The export a CONNECT names, with a reference, if the host may use it; NULL
 * for an empty name (a discovery session: LIST_EXPORTS only).  False when the
 * CONNECT was refused (and answered).  Looked up again when a CONNECT that
 * waited for its predecessor goes on: a reload meanwhile may have removed or
 * replaced the export.
 */
static bool connect_export(struct tgt_req *req, struct tgt_export **out)
{
	struct tgt_queue *q = req->q;
	const struct rb_connect_req *cr = req->buf;
	char hb[RB_LOG_ESCAPE_MAX], eb[RB_LOG_ESCAPE_MAX];
	struct tgt_export *e;
	enum rb_status st;

	*out = NULL;
	if (!cr->export_name[0])
		return true;
	e = tgt_export_get(q->r->t, cr->export_name);
	if (!e) {
		rb_log_limited(&refused_connects, q->peer, RB_LOG_WARN,
			       "peer %s host %s: CONNECT to unknown export '%s'", q->peer,
			       TGT_ESC(hb, cr->hostid), TGT_ESC(eb, cr->export_name));
		st = RB_S_UNKNOWN_EXPORT;
	} else if (!host_allowed(&e->conf, cr->hostid)) {
		rb_log_limited(&refused_connects, q->peer, RB_LOG_WARN,
			       "peer %s host %s: not allowed to connect to export '%s'", q->peer,
			       TGT_ESC(hb, cr->hostid), TGT_ESC(eb, cr->export_name));
		tgt_export_put(e);
		st = RB_S_ACCESS_DENIED;
	} else {
		*out = e;
		return true;
	}
	tgt_req_complete(req, st, 0);
	return false;
}

/* Granted I/O queues, depth and keep-alive: the host's asks within our limits. */
static void connect_grant(const struct tgt_target *t, const struct rb_connect_req *cr,
			  uint16_t *nq, uint16_t *depth, uint32_t *kato)
{
	*nq = min16(rb_from_le16(cr->nr_io_queues), t->conf.max_io_queues);
	*depth = min16(rb_from_le16(cr->queue_depth), t->conf.max_queue_depth);
	/* 0 (none) or less than the minimum would let a silent host keep its
	 * session and queues forever: it gets the minimum (0 only if allowed). */
	*kato = rb_from_le32(cr->kato_ms);
	if (*kato < t->conf.min_keepalive_ms || *kato == 0)
		*kato = t->conf.min_keepalive_ms;
	if (*kato > t->conf.keepalive_ms)
		*kato = t->conf.keepalive_ms;
}

/* The grant of a session, as CONNECT (or AUTH SUCCESS) carries it. */
static void connect_fill(const struct tgt_target *t, const struct tgt_session *s,
			 struct rb_connect_rsp *rsp)
{
	const struct tgt_export *e = s->export;

	memset(rsp, 0, sizeof(*rsp));
	rsp->session = rb_le64(s->id);
	if (e) {
		rsp->size = rb_le64(e->size);
		rsp->block_size = rb_le32(e->block_size);
		rsp->phys_block_size = rb_le32(e->phys_block_size);
		rsp->max_transfer = rb_le32(t->conf.max_transfer);
		rsp->export_flags = rb_le32(e->flags);
		rsp->handle = rb_le32(e->handle);
		rsp->nr_io_queues = rb_le16(s->nr_io_queues);
		rsp->queue_depth = rb_le16(s->queue_depth);
	}
	rsp->kato_ms = rb_le32(s->kato_ms);
}

/* Session ids bind nothing without the key, but are still not for info logs. */
static void session_log(const struct tgt_queue *q, const struct tgt_session *s, const char *how)
{
	static struct rb_log_limit lim = TGT_CONN_LOG_LIMIT("sessions granted");
	char hb[RB_LOG_ESCAPE_MAX], eb[RB_LOG_ESCAPE_MAX];

	rb_log_limited(&lim, s->addr, RB_LOG_INFO,
		       "peer %s host %s: %s%s%s (%u I/O queues, depth %u, kato %u ms)", q->peer,
		       TGT_ESC(hb, s->hostid), s->export ? "export " : "discovery",
		       s->export ? TGT_ESC(eb, s->export->conf.name) : "", how, s->nr_io_queues,
		       s->queue_depth, s->kato_ms);
	rb_dbg("peer %s: session %016llx", q->peer, (unsigned long long)s->id);
}

void tgt_auth_failed(struct tgt_queue *q, const char *hostid, const char *what, const char *why)
{
	static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("authentication failures",
							   RB_LOG_WARN);
	char hb[RB_LOG_ESCAPE_MAX];
	uint64_t n = atomic_fetch_add(&q->r->t->auth_failures, 1) + 1;

	rb_log_limited(&lim, q->peer, RB_LOG_WARN,
		       "peer %s host %s: %s authentication failed: %s (%llu failures so far)",
		       q->peer, TGT_ESC(hb, hostid), what, why, (unsigned long long)n);
}

/* The exchange for the session CONNECT just created; -1 if refused (answered). */
static int auth_start(struct tgt_req *req, struct tgt_session *s,
		      const struct rb_auth_key *host_key, const struct rb_auth_key *tgt_key)
{
	struct tgt_queue *q = req->q;
	const struct rb_connect_req *cr = req->buf;
	struct rb_auth_params p = {
		.hostid = s->hostid,
		.target_id = s->export ? s->export->conf.name : "",
		.session = s->id,
		.host_key = host_key,
		.target_key = tgt_key,
		.hash_mask = RB_AUTH_HASH_MASK_ALL,
		.dh_mask = (uint8_t)tgt_auth_dh_mask(q->r->t),
		.now_ns = q->created_ns,
	};
	int ret;

	q->auth_replaces = rb_from_le64(cr->replaces);
	ret = rb_auth_tgt_new(&p, &q->tauth);
	if (ret) {
		rb_err("peer %s: authentication set-up: %s", q->peer, strerror(-ret));
		tgt_req_complete(req, RB_S_BUSY, 0);
		return -1;
	}
	return 0;
}

/* Creates the session and answers a CONNECT admin_connect validated; takes
 * over the reference to e (NULL: a discovery session).  With need_auth the
 * grant waits for the exchange (AUTH). */
static void connect_finish(struct tgt_req *req, struct tgt_export *e, bool need_auth,
			   const struct rb_auth_key *host_key, const struct rb_auth_key *tgt_key)
{
	struct tgt_queue *q = req->q;
	struct tgt_target *t = q->r->t;
	const struct rb_connect_req *cr = req->buf;
	struct rb_connect_rsp *rsp = (void *)((char *)req->buf + RB_CONNECT_RSP_OFFSET);
	char hb[RB_LOG_ESCAPE_MAX], eb[RB_LOG_ESCAPE_MAX];
	static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("session limit", RB_LOG_WARN);
	struct tgt_session_req sr = { .hostid = cr->hostid, .auth_required = need_auth };
	struct tgt_session *s;
	char addr[TGT_ADDR_MAX];
	uint16_t nq, depth, st;
	uint32_t kato;

	connect_grant(t, cr, &nq, &depth, &kato);
	tgt_peer_addr(q->peer, addr, sizeof(addr));
	sr.addr = addr;
	sr.nr_io_queues = e ? nq : 0;
	sr.queue_depth = depth;
	sr.kato_ms = kato;
	/* The session takes over the export reference. */
	s = tgt_session_create(&t->conf, e, &sr, &st);
	if (!s) {
		if (st == RB_S_ADDR_SESSION_LIMIT)
			rb_log_limited(&lim, addr, RB_LOG_WARN,
				       "peer %s host %s: CONNECT refused: address %s has "
				       "max-sessions-per-address = %u sessions",
				       q->peer, TGT_ESC(hb, cr->hostid), addr,
				       t->conf.max_sessions_per_addr);
		else if (st == RB_S_SESSION_LIMIT)
			rb_log_limited(&lim, addr, RB_LOG_WARN,
				       "peer %s host %s: CONNECT refused: the target has "
				       "max-sessions = %u sessions",
				       q->peer, TGT_ESC(hb, cr->hostid), t->conf.max_sessions);
		else if (st == RB_S_HOST_SESSION_LIMIT)
			rb_log_limited(&lim, addr, RB_LOG_WARN,
				       "peer %s host %s: CONNECT refused: the host has "
				       "max-sessions-per-host = %u sessions",
				       q->peer, TGT_ESC(hb, cr->hostid),
				       t->conf.max_sessions_per_host);
		if (e)
			tgt_export_put(e);
		tgt_req_complete(req, st, 0);
		return;
	}
	q->session = s;
	if (need_auth) {
		if (auth_start(req, s, host_key, tgt_key))
			return;
		memset(rsp, 0, sizeof(*rsp));
		rsp->session = rb_le64(s->id);
		rsp->auth_flags = rb_le32(RB_CONNECT_AUTH_REQUIRED);
		rb_log_limited(&auth_required, q->peer, RB_LOG_INFO,
			       "peer %s host %s: %s%s: authentication required", q->peer,
			       TGT_ESC(hb, cr->hostid), e ? "export " : "discovery",
			       e ? TGT_ESC(eb, e->conf.name) : "");
		tgt_req_reply_data(req, RB_CONNECT_RSP_OFFSET, sizeof(*rsp), RB_S_SUCCESS, s->id);
		return;
	}
	connect_fill(t, s, rsp);
	session_log(q, s, "");
	tgt_req_reply_data(req, RB_CONNECT_RSP_OFFSET, sizeof(*rsp), RB_S_SUCCESS, s->id);
}

/* The exchange is done: the grant CONNECT held back, in SUCCESS. */
static void auth_finish(struct tgt_req *req)
{
	struct tgt_queue *q = req->q;
	union rb_auth_tgt_msg *out = (void *)((char *)req->buf + RB_AUTH_RSP_OFFSET);

	connect_fill(q->r->t, q->session, &out->succ.connect);
	session_log(q, q->session, ", authenticated");
	tgt_req_reply_data(req, RB_AUTH_RSP_OFFSET, sizeof(*out), RB_S_SUCCESS, 0);
}

/* A CONNECT (or the AUTH ending an exchange) that waited for its predecessor
 * goes on: a reload meanwhile may have removed or replaced a CONNECT's
 * export, so it is looked up again (an authenticated session has its own). */
static void connect_resume(struct tgt_req *req)
{
	struct tgt_export *e;

	if (req->cmd.opcode == RB_OP_AUTH) {
		auth_finish(req);
		return;
	}
	if (connect_export(req, &e))
		connect_finish(req, e, false, NULL, NULL);
}

/* Park req until old (a reference held) has no commands left. */
static void wait_predecessor(struct tgt_req *req, struct tgt_session *old)
{
	struct tgt_queue *q = req->q;

	rb_info("peer %s: the session this one replaces still has commands in flight: waiting "
		"for them",
		q->peer);
	q->connect_req = req;
	q->replacing = old;
	q->replace_deadline_ns = rb_clock_ns() + PREDECESSOR_WAIT_NS;
	req->state = REQ_WAIT_PREDECESSOR;
	q->r->nr_replacing++;
}

static void admin_connect(struct tgt_req *req)
{
	struct tgt_queue *q = req->q;
	struct tgt_target *t = q->r->t;
	const struct rb_connect_req *cr = req->buf;
	struct tgt_export *e; /* NULL: a discovery session */
	struct tgt_session *old;
	struct rb_validate_err err;
	struct rb_auth_key hk, tk;
	uint64_t old_id = rb_from_le64(cr->replaces);
	enum rb_status st;
	uint16_t nq, depth;
	uint32_t kato;
	bool need, has_hk, has_tk;

	if (q->session || q->replacing) {
		rb_log_limited(&refused_connects, q->peer, RB_LOG_WARN,
			       "queue 0 (peer %s): second CONNECT refused", q->peer);
		tgt_req_complete(req, RB_S_INVALID_FIELD, 0);
		return;
	}
	st = rb_check_connect_req(cr, &err);
	if (st != RB_S_SUCCESS) {
		rb_log_limited(&refused_connects, q->peer, RB_LOG_WARN,
			       "queue 0 (peer %s): CONNECT refused: %s (field %s = %llu)", q->peer,
			       rb_status_name(st), err.field, (unsigned long long)err.value);
		tgt_req_complete(req, st, 0);
		return;
	}
	if (!connect_export(req, &e))
		return;
	connect_grant(t, cr, &nq, &depth, &kato);
	if (e && (nq == 0 || depth == 0)) {
		tgt_export_put(e);
		tgt_req_complete(req, RB_S_INVALID_FIELD, 0);
		return;
	}
	need = tgt_auth_policy(t, cr->hostid, e, &hk, &has_hk, &tk, &has_tk);
	if (need) {
		/* `replaces` waits for the exchange's end: acted on in AUTH. */
		connect_finish(req, e, true, has_hk ? &hk : NULL, has_tk ? &tk : NULL);
		rb_auth_key_clear(&hk);
		rb_auth_key_clear(&tk);
		return;
	}
	rb_auth_key_clear(&tk);
	/*
	 * A reconnecting host re-issues the commands its previous session left
	 * unanswered.  Any of them still executing here could land after the
	 * re-issued copy and a later write to the same blocks, so the new
	 * session starts only once the old one's commands have all finished.
	 */
	old = old_id && e ? tgt_session_take_predecessor(old_id, cr->hostid, cr->export_name, false) :
			    NULL;
	if (old && atomic_load(&old->refs) > 1) {
		tgt_export_put(e); /* connect_resume looks it up again */
		wait_predecessor(req, old);
		return;
	}
	if (old) {
		rb_info("peer %s: CONNECT replaces a previous session of this host", q->peer);
		tgt_session_put(old);
	}
	connect_finish(req, e, false, NULL, NULL);
}

/* An AUTH step failed: answer with st, then close the admin queue. */
static void auth_fail(struct tgt_req *req, enum rb_status st, const char *why)
{
	struct tgt_queue *q = req->q;

	tgt_auth_failed(q, q->session ? q->session->hostid : "", "admin queue", why);
	rb_auth_tgt_free(q->tauth);
	q->tauth = NULL;
	req->close_after = true;
	tgt_req_complete(req, st, 0);
}

static void admin_auth(struct tgt_req *req)
{
	struct tgt_queue *q = req->q;
	struct tgt_session *s = q->session, *old;
	const union rb_auth_host_msg *in = req->buf;
	union rb_auth_tgt_msg *out = (void *)((char *)req->buf + RB_AUTH_RSP_OFFSET);
	struct rb_auth_skey sk;
	enum rb_status st;

	if (!q->tauth) {
		/* Before CONNECT, after the exchange, or where none is needed. */
		auth_fail(req, RB_S_AUTH_OUT_OF_STATE, "AUTH with no exchange running");
		return;
	}
	memset(out, 0, sizeof(*out));
	st = rb_auth_tgt_step(q->tauth, rb_clock_ns(), in, out);
	if (st != RB_S_SUCCESS) {
		char why[160];

		snprintf(why, sizeof(why), "%s (%s)", rb_status_name(st),
			 rb_auth_tgt_why(q->tauth));
		auth_fail(req, st, why);
		return;
	}
	if (!rb_auth_tgt_done(q->tauth)) {
		tgt_req_reply_data(req, RB_AUTH_RSP_OFFSET, sizeof(*out), RB_S_SUCCESS, 0);
		return;
	}
	if (rb_auth_tgt_session_key(q->tauth, &sk)) {
		auth_fail(req, RB_S_AUTH_FAILED, "session key derivation failed");
		return;
	}
	rb_auth_tgt_free(q->tauth);
	q->tauth = NULL;
	st = tgt_session_authenticated(&q->r->t->conf, s, &sk, q->auth_replaces);
	rb_auth_skey_clear(&sk);
	if (st != RB_S_SUCCESS) {
		/* Proven, but the host has its share of sessions: no failure of
		 * authentication (not counted as one), a refusal. */
		static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("session limit", RB_LOG_WARN);
		char addr[TGT_ADDR_MAX], hb[RB_LOG_ESCAPE_MAX];

		tgt_peer_addr(q->peer, addr, sizeof(addr));
		rb_log_limited(&lim, addr, RB_LOG_WARN,
			       "peer %s host %s: authenticated, but refused: the host has "
			       "max-sessions-per-host = %u sessions",
			       q->peer, TGT_ESC(hb, s->hostid), q->r->t->conf.max_sessions_per_host);
		req->close_after = true;
		tgt_req_complete(req, st, 0);
		return;
	}
	old = q->auth_replaces && s->export ?
		      tgt_session_take_predecessor(q->auth_replaces, s->hostid,
						   s->export->conf.name, true) :
		      NULL;
	if (old && atomic_load(&old->refs) > 1) {
		wait_predecessor(req, old);
		return;
	}
	if (old) {
		rb_info("peer %s: authenticated session replaces a previous one of this host",
			q->peer);
		tgt_session_put(old);
	}
	auth_finish(req);
}

void tgt_admin_release_replacing(struct tgt_queue *q)
{
	if (!q->replacing)
		return;
	tgt_session_put(q->replacing);
	q->replacing = NULL;
	q->connect_req = NULL;
	assert(q->r->nr_replacing > 0);
	q->r->nr_replacing--;
}

void tgt_admin_poll_replacing(struct tgt_reactor *r, uint64_t now_ns)
{
	struct tgt_queue *q, *next;

	for (q = r->queues; q; q = next) {
		struct tgt_req *req = q->connect_req;
		bool quiet;

		next = q->next; /* answering may destroy a dead queue */
		if (!q->replacing)
			continue;
		assert(req->state == REQ_WAIT_PREDECESSOR);
		quiet = atomic_load(&q->replacing->refs) == 1; /* ours only */
		if (!quiet && !q->dead && now_ns < q->replace_deadline_ns)
			continue;
		tgt_admin_release_replacing(q);
		if (q->dead) {
			tgt_req_complete(req, RB_S_ABORTED, 0);
		} else if (quiet) {
			rb_info("peer %s: the session replaced has finished its commands", q->peer);
			connect_resume(req);
		} else {
			rb_warn("peer %s: the session replaced still has commands in flight after "
				"%llu ms: refused, the host retries",
				q->peer, PREDECESSOR_WAIT_NS / 1000000ull);
			/* After AUTH the exchange is spent: the host starts over. */
			req->close_after = req->cmd.opcode == RB_OP_AUTH;
			tgt_req_complete(req, RB_S_PREDECESSOR_BUSY, 0);
		}
	}
}

struct list_ctx {
	const struct tgt_target *t;
	const char *hostid;
	bool authed;
	struct rb_export_entry *ent;
	uint32_t cap, n, total;
};

static void list_one(const struct tgt_export *e, void *arg)
{
	struct list_ctx *l = arg;
	struct rb_export_entry *ent = &l->ent[l->n];

	/* Hosts see only what they may connect to: protected exports only
	 * after the exchange. */
	if (!host_allowed(&e->conf, l->hostid) ||
	    (!l->authed && tgt_auth_export_required(l->t, e)))
		return;
	l->total++;
	if (l->n == l->cap)
		return;
	memset(ent, 0, sizeof(*ent));
	ent->size = rb_le64(e->size);
	ent->block_size = rb_le32(e->block_size);
	ent->export_flags = rb_le32(e->flags);
	snprintf(ent->name, sizeof(ent->name), "%s", e->conf.name);
	l->n++;
}

static void admin_list(struct tgt_req *req)
{
	struct tgt_queue *q = req->q;
	struct list_ctx l = {
		.ent = req->buf,
		.cap = rb_from_le32(req->cmd.length) / sizeof(struct rb_export_entry),
	};

	if (!q->session) {
		tgt_req_complete(req, RB_S_INVALID_QUEUE, 0);
		return;
	}
	l.t = q->r->t;
	l.hostid = q->session->hostid;
	l.authed = q->session->authed;
	tgt_exports_foreach(q->r->t, list_one, &l);
	/* result: entries written (low 32 bits), entries visible (high 32). */
	tgt_req_reply_data(req, 0, l.n * (uint32_t)sizeof(*l.ent), RB_S_SUCCESS,
			   (uint64_t)l.total << 32 | l.n);
}

void tgt_admin_execute(struct tgt_req *req)
{
	struct tgt_queue *q = req->q;

	/* KEEPALIVE alone does not keep a discovery session open. */
	if (req->cmd.opcode != RB_OP_KEEPALIVE)
		q->last_work_ns = rb_clock_ns();

	/* Until the exchange is done: AUTH and DISCONNECT only. */
	if (q->tauth && req->cmd.opcode != RB_OP_AUTH && req->cmd.opcode != RB_OP_DISCONNECT) {
		tgt_req_complete(req, RB_S_AUTH_REQUIRED, 0);
		return;
	}
	switch (req->cmd.opcode) {
	case RB_OP_CONNECT: admin_connect(req); return;
	case RB_OP_AUTH: admin_auth(req); return;
	case RB_OP_LIST_EXPORTS: admin_list(req); return;
	case RB_OP_KEEPALIVE:
		tgt_req_complete(req, q->session ? RB_S_SUCCESS : RB_S_INVALID_QUEUE, 0);
		return;
	case RB_OP_DISCONNECT:
		q->disconnect_requested = true;
		tgt_req_complete(req, RB_S_SUCCESS, 0);
		return;
	default: tgt_req_complete(req, RB_S_INVALID_OPCODE, 0);
	}
}

/*
 * A discovery session answers LIST_EXPORTS, then has nothing to do: it ends
 * discovery-timeout after its last command but KEEPALIVE, and at the latest
 * 10 x discovery-timeout after its queue connected (thousands of them held
 * open were 145 MB, issue 31).  True if q was closed (and may be freed).
 */
static bool discovery_over(struct tgt_queue *q, uint64_t now_ns)
{
	uint64_t idle = (uint64_t)q->r->t->conf.discovery_timeout_ms * 1000000ull;
	const char *why;

	if (now_ns - q->created_ns >= 10 * idle)
		why = "discovery session lifetime (10 x discovery-timeout) over";
	else if (now_ns - q->last_work_ns >= idle)
		why = "discovery session idle for discovery-timeout";
	else
		return false;
	tgt_queue_fail(q, why); /* logs why */
	tgt_queue_maybe_destroy(q);
	return true;
}

void tgt_admin_check_keepalive(struct tgt_queue *q, uint64_t now_ns)
{
	/* Any peer can connect and say nothing. */
	static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("keep-alive timeout", RB_LOG_WARN);
	uint64_t limit;

	if (q->dead)
		return;
	if (q->tauth && now_ns >= rb_auth_tgt_deadline_ns(q->tauth)) {
		tgt_auth_failed(q, q->session->hostid, "admin queue",
				"exchange not done within the time allowed");
		tgt_queue_fail(q, "authentication timed out");
		tgt_queue_maybe_destroy(q);
		return;
	}
	if (q->session && !q->session->export && discovery_over(q, now_ns))
		return;
	/* A command in progress (waiting for a buffer, say) is the target's
	 * to finish, bounded by transfer-timeout where the host's part is
	 * late: the host is not idle, and its time starts with the answer. */
	if (q->nr_active) {
		q->last_cmd_ns = now_ns;
		return;
	}
	/* Before CONNECT: a host gets 10 s to identify itself. */
	limit = q->session ? (uint64_t)q->session->kato_ms * 1000000ull : 10000000000ull;
	if (limit && now_ns - q->last_cmd_ns > limit) {
		char addr[TGT_ADDR_MAX];

		tgt_peer_addr(q->peer, addr, sizeof(addr));
		rb_log_limited(&lim, addr, RB_LOG_WARN,
			       "queue 0 (peer %s): no command for %llu ms: keep-alive timeout",
			       q->peer, (unsigned long long)(limit / 1000000ull));
		tgt_queue_fail(q, "keep-alive timeout");
		tgt_queue_maybe_destroy(q);
	}
}
