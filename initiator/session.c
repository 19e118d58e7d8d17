/* SPDX-License-Identifier: MIT */
/*
 * Session setup and teardown: admin queue, CONNECT, I/O queues,
 * keep-alive, DISCONNECT, and discovery (LIST_EXPORTS).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checked.h"
#include "initiator.h"
#include "log.h"
#include "log_limit.h"

/* ---- accessors ----------------------------------------------------------- */

const struct rb_export_info *rb_session_info(const struct ini_session *s)
{
	return &s->info;
}

const char *rb_session_target(const struct ini_session *s)
{
	return s->target;
}

bool rb_session_recovering(const struct ini_session *s)
{
	return atomic_load(&s->recovering);
}

unsigned int rb_session_nr_queues(const struct ini_session *s)
{
	return s->nr_queues;
}

struct ini_queue *rb_session_queue(struct ini_session *s, unsigned int i)
{
	return i < s->nr_queues ? &s->queues[i] : NULL;
}

/* ---- synchronous admin commands (no reactor thread running) ---------- */

struct sync_cmd {
	struct rb_io io;
	bool done;
};

static void sync_done(struct rb_io *io, int err)
{
	rb_container_of(io, struct sync_cmd, io)->done = true;
}

static bool sync_cond(void *arg)
{
	return ((struct sync_cmd *)arg)->done;
}

/*
 * Run one admin command on the calling thread.  Returns 0 or -errno; a
 * failed target status is in *status (0 if the command got no answer).
 */
static int admin_sync(struct ini_session *s, struct rb_slot *sl, uint8_t op, uint32_t len,
		      uint32_t timeout_ms, uint16_t *status, uint64_t *result)
{
	struct ini_reactor *r = s->admin.r;
	struct sync_cmd c;
	int ret;

	memset(&c, 0, sizeof(c));
	c.io.opcode = op;
	c.io.length = len;
	c.io.nr_slots = 1;
	c.io.slots = &sl;
	c.io.done = sync_done;
	c.io.timeout_ms = timeout_ms;
	*status = 0;
	*result = 0;
	ret = rb_queue_submit(&s->admin, &c.io);
	if (ret)
		return ret;
	/* The command's own deadline fires first; this is a backstop. */
	ret = ini_reactor_wait(r, sync_cond, &c, rb_now_ms() + timeout_ms + 2000);
	if (!c.done) {
		/* c lives on this stack: make sure nothing refers to it after return. */
		ini_queue_fail(&s->admin, "admin command never completed");
		ini_reactor_progress(r);
		if (!c.done)
			rb_fatal("admin %s still pending after its queue failed",
				 rb_opcode_name(op));
	}
	*status = c.io.status;
	*result = c.io.result;
	return ret ? ret : c.io.err;
}

/* ---- keep-alive (reactor 0) ----------------------------------------------- */

static void ka_done(struct rb_io *io, int err)
{
	static struct rb_log_limit ka_failed = RB_LOG_LIMIT_INIT("keep-alive failed", RB_LOG_ERR);
	struct ini_session *s = rb_container_of(io, struct ini_session, ka_io);

	s->ka_busy = false;
	rb_queue_slots_put(&s->admin, 1, &s->ka_slot);
	s->ka_next_ms = rb_now_ms() + s->ka_ms / 2;
	if (err && !s->admin.dead && !s->closing) {
		rb_log_limited(&ka_failed, s->target, RB_LOG_ERR, "%s: keep-alive failed: %s",
			       s->target,
			       io->status ? rb_status_name(io->status) :
					    "no answer within the keep-alive timeout");
		ini_queue_fail(&s->admin, "keep-alive failed");
	}
}

/* Reactor 0's tick hook: the keep-alive. */
static void session_tick(void *arg, uint64_t now)
{
	struct ini_session *s = arg;
	int ret;

	/* Summaries of rate-limited lines, also once a flood has stopped. */
	if (now >= s->log_flush_ms + 1000) {
		s->log_flush_ms = now;
		rb_log_limits_flush();
	}
	if (!s->ka_ms || !s->connected || s->closing || s->ka_busy || s->admin.dead ||
	    now < s->ka_next_ms)
		return;
	if (rb_queue_slots_get(&s->admin, 1, &s->ka_slot))
		return; /* admin slots busy: next tick */
	memset(&s->ka_io, 0, sizeof(s->ka_io));
	s->ka_io.opcode = RB_OP_KEEPALIVE;
	s->ka_io.nr_slots = 1;
	s->ka_io.slots = &s->ka_slot;
	s->ka_io.done = ka_done;
	s->ka_io.timeout_ms = s->ka_ms;
	ret = rb_queue_submit(&s->admin, &s->ka_io);
	if (ret) {
		rb_queue_slots_put(&s->admin, 1, &s->ka_slot);
		return;
	}
	s->ka_busy = true;
}

/* The host id for a log line: the user's string, escaped like the target's. */
static const char *hostid_esc(const struct ini_session *s, char (*buf)[RB_LOG_ESCAPE_MAX])
{
	return rb_log_escape(*buf, sizeof(*buf), s->p.hostid, RB_HOSTID_MAX);
}

void ini_session_queue_died(struct ini_session *s, struct ini_queue *q)
{
	if (s->closing || ini_recovery_start(s))
		return;
	if (q != &s->admin || atomic_exchange(&s->lost, true))
		return;
	if (s->connected)
		rb_err("%s: session (export '%s') lost; all I/O now fails with EIO; "
		       "restart the initiator to reconnect",
		       s->target, s->p.export_name);
	else /* the CONNECT under way fails and says so */
		rb_dbg("%s: admin queue lost before CONNECT finished", s->target);
	/* Without the admin queue the target drops the session anyway: fail
	 * I/O now rather than wait for each command to time out. */
	for (unsigned int i = 0; i < s->nr_queues; i++) {
		struct ini_queue *io = &s->queues[i];

		if (io->r->started)
			rb_reactor_post(io->r, &io->kill_task);
		else
			ini_queue_fail(io, "session lost (admin queue gone)");
	}
}

/* ---- setup ------------------------------------------------------------------ */

static unsigned int nr_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (unsigned int)n : 1;
}

/* The reactors' tick: often enough for the tightest deadline we keep. */
static uint32_t tick_ms(const struct rb_session_params *p)
{
	uint32_t t = p->timeout_ms / 4;

	if (p->kato_ms && p->kato_ms / 8 < t)
		t = p->kato_ms / 8;
	if (t > INI_TICK_MAX_MS)
		t = INI_TICK_MAX_MS;
	if (t < 10)
		t = 10;
	return t;
}

static struct ini_session *session_alloc(const struct rb_session_params *p, unsigned int nr_r)
{
	struct ini_session *s = calloc(1, sizeof(*s));
	bool v6 = strchr(p->ep.host, ':') != NULL;
	pthread_condattr_t ca;

	if (!s)
		return NULL;
	s->p = *p;
	if (!s->p.incapsule)
		s->p.incapsule = INI_DEFAULT_INCAPSULE;
	atomic_init(&s->lost, false);
	atomic_init(&s->recovering, false);
	pthread_mutex_init(&s->rec_lock, NULL);
	/* recover.c waits out reconnect_delay on the monotonic clock. */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->rec_cond, &ca);
	pthread_condattr_destroy(&ca);
	snprintf(s->target, sizeof(s->target), "%s://%s%s%s:%u", p->ops->name, v6 ? "[" : "",
		 p->ep.host, v6 ? "]" : "", p->ep.port);
	s->reactors = calloc(nr_r, sizeof(*s->reactors));
	if (!s->reactors) {
		free(s);
		return NULL;
	}
	for (unsigned int i = 0; i < nr_r; i++) {
		if (ini_reactor_init(&s->reactors[i], (int)i, &p->topts, tick_ms(p)))
			break;
		s->reactors[i].s = s;
		s->nr_reactors++;
	}
	if (s->nr_reactors != nr_r) {
		rb_session_close(s);
		return NULL;
	}
	ini_reactor_on_tick(&s->reactors[0], session_tick, s);
	return s;
}

static int admin_connect(struct ini_session *s, uint32_t cq_depth)
{
	struct ini_queue_cfg cfg = {
		.qid = 0,
		.depth = INI_ADMIN_DEPTH,
		.buf_size = INI_ADMIN_BUF_SIZE,
		.incapsule = 0,
		.cq_depth = cq_depth,
	};

	return ini_queue_connect(&s->admin, s, &s->reactors[0], &cfg);
}

static const char *connect_reason(uint16_t status)
{
	switch (status) {
	case RB_S_UNKNOWN_EXPORT: return "unknown export (no such export on the target; see --list)";
	case RB_S_ACCESS_DENIED:
		return "access denied (this host id is not allowed to use the export)";
	case RB_S_BAD_VERSION: return "protocol version mismatch";
	case RB_S_BUSY: return "target busy (out of sessions or memory)";
	case RB_S_PREDECESSOR_BUSY:
		return "the session it replaces still has commands executing on the target";
	case RB_S_INVALID_FIELD:
		return "invalid request (queue count, queue depth or keep-alive out of range?)";
	case RB_S_AUTH_FAILED:
		return "authentication failed: wrong secret, or the target has no secret for this "
		       "host id";
	case RB_S_AUTH_REQUIRED: return "the target requires authentication";
	case RB_S_AUTH_BIDI_UNAVAILABLE:
		return "the target has no target secret, so it cannot prove itself "
		       "(--target-secret)";
	case RB_S_AUTH_HASH_UNUSABLE: return "no hash in common with the target";
	case RB_S_AUTH_DHGROUP_UNUSABLE: return "no DH group in common with the target";
	case RB_S_AUTH_OUT_OF_STATE: return "authentication message out of order";
	case RB_S_SESSION_LIMIT: return "the target has as many sessions as it allows (max-sessions)";
	case RB_S_HOST_SESSION_LIMIT:
		return "this host id has as many sessions on the target as it allows "
		       "(max-sessions-per-host)";
	case RB_S_ADDR_SESSION_LIMIT:
		return "this address has as many sessions on the target as it allows "
		       "(max-sessions-per-address)";
	}
	return "refused";
}

/* One AUTH command: the host half of sl->buf out, the target half back. */
static int auth_step(struct ini_session *s, struct rb_slot *sl, const char *export_name)
{
	uint16_t status;
	uint64_t result;
	int ret;

	memset((uint8_t *)sl->buf + RB_AUTH_RSP_OFFSET, 0, RB_AUTH_TGT_HALF);
	ret = admin_sync(s, sl, RB_OP_AUTH, RB_AUTH_BUF_SIZE, s->p.timeout_ms, &status, &result);
	if (ret && status) {
		char hb[RB_LOG_ESCAPE_MAX];

		rb_err("%s: export '%s' as host id '%s': %s [%s]", s->target, export_name,
		       hostid_esc(s, &hb), connect_reason(status), rb_status_name(status));
	} else if (ret) {
		rb_err("%s: export '%s': AUTH got no answer (timed out or connection lost)",
		       s->target, export_name);
	}
	return ret;
}

/*
 * The admin exchange CONNECT asked for (auth_flags): NEGOTIATE ->
 * CHALLENGE, REPLY -> SUCCESS.  On success *rsp is the grant SUCCESS
 * carried and s->skey the session key.
 */
static int session_auth(struct ini_session *s, struct rb_slot *sl, const char *export_name,
			uint64_t session, struct rb_connect_rsp *rsp)
{
	union rb_auth_host_msg *out = sl->buf;
	union rb_auth_tgt_msg *in = (void *)((uint8_t *)sl->buf + RB_AUTH_RSP_OFFSET);
	struct rb_auth_params p = {
		.hostid = s->p.hostid,
		.target_id = export_name,
		.session = session,
		.host_key = &s->p.secret,
		.target_key = s->p.has_target_secret ? &s->p.target_secret : NULL,
		.hash_mask = RB_AUTH_HASH_MASK_ALL,
		.dh_mask = RB_AUTH_DH_MASK_ALL,
	};
	struct rb_auth_host *h;
	char hb[RB_LOG_ESCAPE_MAX];
	int ret;

	if (!s->p.has_secret) {
		rb_err("%s: export '%s': the target requires authentication for host id '%s' and "
		       "no secret was given (--secret FILE)",
		       s->target, export_name, hostid_esc(s, &hb));
		return -EACCES;
	}
	ret = rb_auth_host_new(&p, &h);
	if (ret) {
		rb_err("%s: authentication set-up: %s", s->target, strerror(-ret));
		return ret;
	}
	memset(sl->buf, 0, RB_AUTH_BUF_SIZE);
	ret = rb_auth_host_negotiate(h, out);
	if (!ret)
		ret = auth_step(s, sl, export_name);
	if (!ret) {
		ret = rb_auth_host_challenge(h, in, out);
		if (ret)
			rb_err("%s: export '%s': the target's CHALLENGE refused: %s", s->target,
			       export_name, rb_auth_host_why(h));
	}
	if (!ret)
		ret = auth_step(s, sl, export_name);
	if (!ret) {
		ret = rb_auth_host_success(h, in, &s->skey);
		if (ret == -EACCES)
			rb_err("%s: export '%s': the target failed authentication (%s): it does "
			       "not know the target secret; refusing it",
			       s->target, export_name, rb_auth_host_why(h));
		else if (ret)
			rb_err("%s: export '%s': the target's SUCCESS refused: %s", s->target,
			       export_name, rb_auth_host_why(h));
	}
	if (!ret) {
		memcpy(rsp, &in->succ.connect, sizeof(*rsp));
		s->authed = true;
		rb_info("%s: export '%s': authenticated%s", s->target, export_name,
			s->p.has_target_secret ? " both ways (the target proved itself)" : "");
	}
	rb_auth_host_free(h);
	return ret ? (ret == -EACCES || ret == -EPROTO ? -EACCES : ret) : 0;
}

/*
 * CONNECT on the admin queue; fills s->info, and *raw with the response as
 * received if raw is not NULL.  A reconnect names the session it replaces:
 * the target answers once that one's commands have finished.
 */
static int session_connect(struct ini_session *s, const char *export_name, uint32_t kato_ms,
			   uint64_t replaces, struct rb_connect_rsp *raw)
{
	struct rb_connect_req *req;
	struct rb_connect_rsp rsp;
	struct rb_slot *sl;
	uint16_t status;
	uint64_t result;
	char hb[RB_LOG_ESCAPE_MAX];
	int ret;

	ret = rb_queue_slots_get(&s->admin, 1, &sl);
	if (ret)
		return ret;
	req = sl->buf;
	memset(req, 0, RB_CONNECT_BUF_SIZE);
	req->magic = rb_le32(RB_MAGIC);
	req->version = rb_le16(RB_PROTO_VERSION);
	req->nr_io_queues = rb_le16((uint16_t)s->p.nr_io_queues);
	req->queue_depth = rb_le16((uint16_t)s->p.queue_depth);
	req->kato_ms = rb_le32(kato_ms);
	req->replaces = rb_le64(replaces);
	snprintf(req->hostid, sizeof(req->hostid), "%s", s->p.hostid);
	snprintf(req->export_name, sizeof(req->export_name), "%s", export_name);

	ret = admin_sync(s, sl, RB_OP_CONNECT, RB_CONNECT_BUF_SIZE, s->p.timeout_ms, &status,
			 &result);
	if (ret) {
		if (status)
			rb_err("%s: CONNECT to export '%s' as host id '%s' refused: %s [%s]",
			       s->target, export_name, hostid_esc(s, &hb), connect_reason(status),
			       rb_status_name(status));
		else
			rb_err("%s: export '%s' for host id '%s': CONNECT got no answer "
			       "(timed out or connection lost)",
			       s->target, export_name, hostid_esc(s, &hb));
		goto out_put;
	}
	memcpy(&rsp, (uint8_t *)sl->buf + RB_CONNECT_RSP_OFFSET, sizeof(rsp));
	rb_auth_skey_clear(&s->skey);
	s->authed = false;
	if (rb_from_le32(rsp.auth_flags) & RB_CONNECT_AUTH_REQUIRED) {
		uint64_t sid = rb_from_le64(rsp.session) ? rb_from_le64(rsp.session) : result;

		ret = session_auth(s, sl, export_name, sid, &rsp);
		if (ret)
			goto out_put;
	} else if (s->p.has_target_secret) {
		/* It would have to prove itself only if it ran the exchange. */
		rb_err("%s: export '%s': the target did not authenticate (it does not require "
		       "authentication for host id '%s'): refused, since --target-secret asks "
		       "the target to prove itself",
		       s->target, export_name, hostid_esc(s, &hb));
		ret = -EACCES;
		goto out_put;
	}
	memset(&s->info, 0, sizeof(s->info));
	snprintf(s->info.name, sizeof(s->info.name), "%s", export_name);
	s->info.session_id = rb_from_le64(rsp.session) ? rb_from_le64(rsp.session) : result;
	s->info.size = rb_from_le64(rsp.size);
	s->info.block_size = rb_from_le32(rsp.block_size);
	s->info.phys_block_size = rb_from_le32(rsp.phys_block_size);
	s->info.max_transfer = rb_from_le32(rsp.max_transfer);
	s->info.flags = rb_from_le32(rsp.export_flags);
	s->info.nr_io_queues = rb_from_le16(rsp.nr_io_queues);
	s->handle = rb_from_le32(rsp.handle);
	s->granted_depth = rb_from_le16(rsp.queue_depth);
	s->connected = true;
	s->ka_ms = rb_from_le32(rsp.kato_ms) ? rb_from_le32(rsp.kato_ms) : kato_ms;
	s->ka_next_ms = rb_now_ms() + s->ka_ms / 2;
	if (raw)
		*raw = rsp;
out_put:
	rb_queue_slots_put(&s->admin, 1, &sl);
	return ret;
}

static int check_export(struct ini_session *s, const struct rb_connect_rsp *rsp)
{
	struct rb_export_info *in = &s->info;
	struct rb_validate_err err;
	int over = rb_check_connect_rsp(rsp, (uint16_t)s->p.nr_io_queues,
					(uint16_t)s->p.queue_depth, &err);

	if (over < 0) {
		rb_err("%s: export '%s': CONNECT response refused: field %s = %llu (want a block "
		       "size that is a power of two up to 64 KiB, a max transfer of at least one "
		       "block, I/O queues and queue depth nonzero)",
		       s->target, in->name, err.field, (unsigned long long)err.value);
		return over;
	}
	/* More than asked for is harmless: use what we asked for. */
	if (over & RB_GRANT_OVER_QUEUES)
		in->nr_io_queues = s->p.nr_io_queues;
	if (over & RB_GRANT_OVER_DEPTH)
		s->granted_depth = (uint16_t)s->p.queue_depth;
	if (in->size % in->block_size)
		rb_warn("%s: export '%s': size %" PRIu64 " is not a multiple of the block size %u; "
			"the tail is not accessible",
			s->target, in->name, in->size, in->block_size);
	return 0;
}

int rb_session_open(const struct rb_session_params *p, struct ini_session **out)
{
	unsigned int nr_r = p->nr_reactors ? p->nr_reactors : p->nr_io_queues;
	uint32_t depth, chunk, cq_depth, per_r;
	struct rb_connect_rsp rsp;
	struct ini_session *s;
	int ret;

	if (!p->nr_reactors && nr_r > nr_cpus())
		nr_r = nr_cpus();
	if (nr_r == 0)
		nr_r = 1;
	if (nr_r > p->nr_io_queues)
		nr_r = p->nr_io_queues ? p->nr_io_queues : 1;
	s = session_alloc(p, nr_r);
	if (!s)
		return -ENOMEM;
	per_r = (p->nr_io_queues + nr_r - 1) / nr_r;
	cq_depth = 2 * INI_ADMIN_DEPTH + per_r * 2 * p->queue_depth + 16;
	s->cq_depth = cq_depth;

	ret = admin_connect(s, cq_depth);
	if (ret)
		goto out_close;
	ret = session_connect(s, p->export_name, p->kato_ms, 0, &rsp);
	if (ret)
		goto out_close;
	ret = check_export(s, &rsp);
	if (ret)
		goto out_close;

	depth = s->granted_depth;
	chunk = s->info.max_transfer < INI_MAX_CHUNK ? s->info.max_transfer : INI_MAX_CHUNK;
	chunk -= chunk % s->info.block_size;
	/* Fewer queues than reactors: the spare reactors would idle. */
	while (s->nr_reactors > s->info.nr_io_queues)
		ini_reactor_fini(&s->reactors[--s->nr_reactors]);
	s->queues = calloc(s->info.nr_io_queues, sizeof(*s->queues));
	if (!s->queues) {
		ret = -ENOMEM;
		goto out_close;
	}
	for (unsigned int i = 0; i < s->info.nr_io_queues; i++) {
		struct ini_queue_cfg cfg = {
			.qid = (uint16_t)(i + 1),
			.depth = depth,
			.buf_size = chunk,
			.incapsule = s->p.incapsule,
			.session_id = s->info.session_id,
			.handle = s->handle,
			.cq_depth = cq_depth,
		};

		s->nr_queues = i + 1;
		ret = ini_queue_connect(&s->queues[i], s, &s->reactors[i % s->nr_reactors], &cfg);
		if (ret)
			goto out_close;
	}
	rb_info("%s: attached export '%s' (%" PRIu64 " bytes, block %u, %u I/O queues x depth %u, "
		"%u reactor threads%s)",
		s->target, s->info.name, s->info.size, s->info.block_size, s->nr_queues, depth,
		s->nr_reactors, s->authed ? ", authenticated" : "");
	*out = s;
	return 0;

out_close:
	rb_session_close(s);
	return ret;
}

/* ---- reconnect ----------------------------------------------------------------- */

/* What the re-established session must still be, for the queues as they are. */
static int check_same_export(struct ini_session *s, const struct rb_export_info *old)
{
	const struct rb_export_info *in = &s->info;

	if (in->size != old->size || in->block_size != old->block_size ||
	    in->max_transfer < s->queues[0].buf_size || in->nr_io_queues < s->nr_queues ||
	    s->granted_depth < s->queues[0].alloc_depth) {
		rb_err("%s: export '%s' changed across the reconnect (size %" PRIu64 " -> %" PRIu64
		       ", block %u -> %u, max transfer %u, %u I/O queues of depth %u granted): "
		       "cannot resume its I/O",
		       s->target, old->name, old->size, in->size, old->block_size, in->block_size,
		       in->max_transfer, in->nr_io_queues, s->granted_depth);
		return -EPROTO;
	}
	return 0;
}

int ini_session_reconnect(struct ini_session *s)
{
	struct rb_export_info old = s->info;
	int ret;

	/* The admin queue starts from scratch: nothing of it was the frontends'. */
	ini_reactor_del_queue(s->admin.r, &s->admin.rq);
	if (!ini_queue_free(&s->admin))
		return -EBUSY;
	s->connected = false;
	ret = admin_connect(s, s->cq_depth);
	if (!ret)
		ret = session_connect(s, s->p.export_name, s->p.kato_ms, old.session_id, NULL);
	if (!ret)
		ret = check_same_export(s, &old);
	if (ret)
		return ret;
	s->info.nr_io_queues = old.nr_io_queues;
	for (unsigned int i = 0; i < s->nr_queues; i++) {
		struct ini_queue *q = &s->queues[i];
		struct ini_queue_cfg cfg = {
			.qid = q->qid,
			.depth = q->alloc_depth,
			.buf_size = q->buf_size,
			.incapsule = s->p.incapsule,
			.session_id = s->info.session_id,
			.handle = s->handle,
			.cq_depth = s->cq_depth,
		};

		ret = ini_queue_reconnect(q, &cfg);
		if (ret)
			return ret;
	}
	s->ka_busy = false;
	s->ka_next_ms = rb_now_ms() + s->ka_ms / 2;
	return 0;
}

/* ---- run and stop ------------------------------------------------------------ */

int rb_session_start(struct ini_session *s)
{
	int ret;

	ret = ini_recovery_init(s);
	if (ret)
		return ret;
	s->ka_next_ms = rb_now_ms() + s->ka_ms / 2;
	for (unsigned int i = 0; i < s->nr_reactors; i++) {
		ret = ini_reactor_start(&s->reactors[i]);
		if (ret) {
			rb_session_stop(s);
			return ret;
		}
	}
	return 0;
}

void rb_session_stop(struct ini_session *s)
{
	/* A recovery parks the reactors: it must end before they can stop. */
	ini_recovery_fini(s);
	for (unsigned int i = 0; i < s->nr_reactors; i++)
		ini_reactor_stop(&s->reactors[i]);
}

static bool queues_quiet(const struct ini_session *s, bool admin)
{
	if (admin)
		return ini_queue_quiet(&s->admin);
	for (unsigned int i = 0; i < s->nr_queues; i++)
		if (!ini_queue_quiet(&s->queues[i]))
			return false;
	return true;
}

/* Drive every CQ until the queues' work requests have all completed. */
void ini_session_wait_quiet(struct ini_session *s, bool admin, uint32_t ms)
{
	uint64_t deadline = rb_now_ms() + ms;
	struct pollfd pfd[64];

	for (;;) {
		int n = 0;

		for (unsigned int i = 0; i < s->nr_reactors; i++)
			ini_reactor_progress(&s->reactors[i]);
		if (queues_quiet(s, admin) || rb_now_ms() >= deadline)
			return;
		for (unsigned int i = 0; i < s->nr_reactors && n < 64; i++) {
			struct ini_reactor *r = &s->reactors[i];

			if (r->cq)
				pfd[n++] = (struct pollfd){ .fd = r->ops->cq_fd(r->cq),
							    .events = POLLIN };
		}
		if (poll(pfd, (nfds_t)n, 10) < 0 && errno != EINTR)
			return;
	}
}

static void session_disconnect(struct ini_session *s)
{
	struct rb_slot *sl;
	uint16_t status;
	uint64_t result;
	int ret;

	if (!s->connected || s->admin.dead)
		return;
	if (rb_queue_slots_get(&s->admin, 1, &sl)) {
		rb_warn("%s: no admin slot for DISCONNECT", s->target);
		return;
	}
	/* The target closes the queue after answering: a receive re-posted
	 * while the connection goes down only races the flush. */
	s->admin.no_repost = true;
	ret = admin_sync(s, sl, RB_OP_DISCONNECT, 0, INI_DISCONNECT_MS, &status, &result);
	rb_queue_slots_put(&s->admin, 1, &sl);
	if (ret)
		rb_warn("%s: DISCONNECT: %s", s->target,
			status ? rb_status_name(status) : "no answer");
	else
		rb_info("%s: session disconnected", s->target);
}

void rb_session_close(struct ini_session *s)
{
	if (!s)
		return;
	rb_session_stop(s);
	s->closing = true;
	/* I/O queues first (their outstanding work fails), then the session. */
	for (unsigned int i = 0; i < s->nr_queues; i++)
		ini_queue_shutdown(&s->queues[i]);
	ini_session_wait_quiet(s, false, INI_TEARDOWN_MS);
	session_disconnect(s);
	s->connected = false;
	ini_queue_shutdown(&s->admin);
	ini_session_wait_quiet(s, true, INI_TEARDOWN_MS);
	for (unsigned int i = 0; i < s->nr_queues; i++)
		if (!ini_queue_free(&s->queues[i]))
			s->queues[i].r->leaked_queue = true;
	if (!ini_queue_free(&s->admin))
		s->admin.r->leaked_queue = true;
	for (unsigned int i = 0; i < s->nr_reactors; i++)
		ini_reactor_fini(&s->reactors[i]);
	free(s->queues);
	free(s->reactors);
	pthread_cond_destroy(&s->rec_cond);
	pthread_mutex_destroy(&s->rec_lock);
	rb_auth_skey_clear(&s->skey);
	rb_auth_key_clear(&s->p.secret);
	rb_auth_key_clear(&s->p.target_secret);
	free(s);
}

/* ---- discovery ---------------------------------------------------------------- */

int rb_list_exports(const struct rb_session_params *p, struct rb_export_entry **out,
		    uint32_t *nr, uint32_t *total)
{
	const uint32_t ent = sizeof(struct rb_export_entry);
	uint32_t len = INI_ADMIN_BUF_SIZE / ent * ent;
	struct rb_export_entry *list = NULL;
	struct ini_session *s;
	struct rb_slot *sl;
	uint16_t status;
	uint64_t result;
	uint32_t n;
	int ret;

	*out = NULL;
	*nr = *total = 0;
	s = session_alloc(p, 1);
	if (!s)
		return -ENOMEM;
	ret = admin_connect(s, 2 * INI_ADMIN_DEPTH + 16);
	if (ret)
		goto out_close;
	/* An empty export name opens a discovery session. */
	ret = session_connect(s, "", 0, 0, NULL);
	if (ret)
		goto out_close;
	ret = rb_queue_slots_get(&s->admin, 1, &sl);
	if (ret)
		goto out_close;
	ret = admin_sync(s, sl, RB_OP_LIST_EXPORTS, len, p->timeout_ms, &status, &result);
	if (ret && status == RB_S_INVALID_FIELD) {
		/* A target with a small max transfer: ask for one page's worth. */
		len = 4096 / ent * ent;
		ret = admin_sync(s, sl, RB_OP_LIST_EXPORTS, len, p->timeout_ms, &status, &result);
	}
	if (ret) {
		rb_err("%s: LIST_EXPORTS: %s", s->target,
		       status ? rb_status_name(status) : "no answer");
		goto out_put;
	}
	n = rb_export_list_fix(sl->buf, len / ent, result, total);
	list = calloc(n ? n : 1, ent);
	if (!list) {
		ret = -ENOMEM;
		goto out_put;
	}
	memcpy(list, sl->buf, (size_t)n * ent);
	*out = list;
	*nr = n;
out_put:
	rb_queue_slots_put(&s->admin, 1, &sl);
out_close:
	rb_session_close(s);
	return ret;
}
