/* SPDX-License-Identifier: MIT */
/*
 * Initiator queue (initiator/queue.c) against a scripted transport: the
 * test decides in which order SEND completions, responses and flushes
 * arrive, and the transport refuses a SEND past the send queue depth the
 * queue asked for, as a queue pair does.  Covers an answer that overtakes
 * its own SEND's completion (a frontend that reuses its slot at once must
 * not post a second SEND for it), the same on a queue that dies before the
 * SEND completes, a late answer to a timed-out command, and an answered
 * command whose SEND never completes, a command submitted to a dead
 * queue whose session reconnects, and a queue failed from outside its CQ
 * while an answer waits there (drained before the rest fails).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "initiator.h"
#include "log.h"
#include "tap.h"
#include "wire.h"

/* ---- scripted transport ------------------------------------------------ */

#define MAX_WR 64

static struct {
	struct rb_conn conn;
	uint32_t max_send; /* from the caps at connect */
	struct rb_cqe *sends[MAX_WR]; /* outstanding, in post order */
	struct rb_capsule caps[MAX_WR];
	unsigned int nsends;
	unsigned int send_refused;
	struct rb_cqe *recvs[MAX_WR];
	void *recv_buf[MAX_WR];
	unsigned int nrecvs;
	bool disconnected;
} T;

static int m_reg_mr(struct rb_domain *d, void *addr, size_t len, unsigned int access,
		    struct rb_mr **out)
{
	struct rb_mr *mr = calloc(1, sizeof(*mr));

	if (!mr)
		return -ENOMEM;
	*mr = (struct rb_mr){ .addr = addr, .length = len, .lkey = 1, .rkey = 2,
			      .access = access, .domain = d };
	*out = mr;
	return 0;
}

static void m_dereg_mr(struct rb_mr *mr)
{
	free(mr);
}

static int m_conn_create(const struct rb_endpoint *ep, const struct rb_transport_opts *opts,
			 struct rb_conn **out)
{
	(void)ep;
	(void)opts;
	memset(&T, 0, sizeof(T));
	*out = &T.conn;
	return 0;
}

static struct rb_domain *m_conn_domain(struct rb_conn *c)
{
	(void)c;
	return (struct rb_domain *)&T;
}

static int m_connect(struct rb_conn *c, struct rb_cq *cq, const struct rb_conn_caps *caps,
		     const void *priv, size_t priv_len, void *rpriv, size_t *rpriv_len)
{
	const struct rb_cm_req2 *req = priv;
	struct rb_cm_rep2 rep = {
		.magic = rb_le32(RB_MAGIC),
		.version = rb_le16(RB_PROTO_VERSION),
		.depth = req->depth,
		.incapsule = req->incapsule,
	};

	(void)c;
	(void)cq;
	(void)priv_len;
	T.max_send = caps->max_send_wr;
	memcpy(rpriv, &rep, sizeof(rep));
	*rpriv_len = sizeof(rep);
	return 0;
}

static void m_disconnect(struct rb_conn *c)
{
	(void)c;
	T.disconnected = true;
}

static void m_conn_destroy(struct rb_conn *c)
{
	(void)c;
}

static int m_post_recv(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge)
{
	(void)c;
	(void)nsge;
	if (T.nrecvs == MAX_WR)
		return -ENOMEM;
	T.recvs[T.nrecvs] = cqe;
	T.recv_buf[T.nrecvs++] = sg[0].addr;
	return 0;
}

static int m_post_send(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge)
{
	(void)c;
	(void)nsge;
	if (T.nsends >= T.max_send) {
		T.send_refused++;
		return -ENOMEM; /* what a full send queue says */
	}
	memcpy(&T.caps[T.nsends], sg[0].addr, sizeof(T.caps[0]));
	T.sends[T.nsends++] = cqe;
	return 0;
}

static void m_conn_peer(struct rb_conn *c, char *buf, size_t len)
{
	(void)c;
	snprintf(buf, len, "scripted");
}

static uint32_t m_conn_qpn(struct rb_conn *c)
{
	(void)c;
	return 7;
}

static const struct rb_transport_ops mock_ops = {
	.name = "scripted",
	.reg_mr = m_reg_mr,
	.dereg_mr = m_dereg_mr,
	.conn_create = m_conn_create,
	.conn_domain = m_conn_domain,
	.connect = m_connect,
	.disconnect = m_disconnect,
	.conn_destroy = m_conn_destroy,
	.post_recv = m_post_recv,
	.post_send = m_post_send,
	.conn_peer = m_conn_peer,
	.conn_qpn = m_conn_qpn,
};

/* The oldest outstanding SEND completes with status st. */
static void complete_send(enum rb_wc_status st)
{
	struct rb_wc wc = { .cqe = T.sends[0], .conn = &T.conn, .opcode = RB_WC_SEND,
			    .status = st };

	if (!T.nsends) {
		ok(0, "a SEND to complete is outstanding");
		return;
	}
	T.nsends--;
	memmove(&T.sends[0], &T.sends[1], T.nsends * sizeof(T.sends[0]));
	memmove(&T.caps[0], &T.caps[1], T.nsends * sizeof(T.caps[0]));
	wc.cqe->done(NULL, &wc);
}

/* Every outstanding receive completes as flushed. */
static void flush_recvs(void)
{
	while (T.nrecvs) {
		struct rb_wc wc = { .conn = &T.conn, .opcode = RB_WC_RECV,
				    .status = RB_WC_FLUSH_ERR };

		wc.cqe = T.recvs[--T.nrecvs];
		wc.cqe->done(NULL, &wc);
	}
}

/* The target answers command id cid with status st in the newest receive. */
static void answer(uint16_t cid, uint16_t st)
{
	struct rb_response rsp = { .cid = rb_le16(cid), .status = rb_le16(st) };
	struct rb_wc wc = { .conn = &T.conn, .opcode = RB_WC_RECV, .byte_len = sizeof(rsp) };

	if (!T.nrecvs) {
		ok(0, "a receive for the answer is posted");
		return;
	}
	T.nrecvs--;
	wc.cqe = T.recvs[T.nrecvs];
	memcpy(T.recv_buf[T.nrecvs], &rsp, sizeof(rsp));
	wc.cqe->done(NULL, &wc);
}

/* Answers the target sent that wait in the CQ, not yet polled. */
static struct {
	uint16_t cid, st;
} in_cq[4];
static unsigned int nin_cq, cq_polls;

static void answer_in_cq(uint16_t cid, uint16_t st)
{
	if (nin_cq == RB_ARRAY_SIZE(in_cq)) {
		ok(0, "room for an answer in the CQ");
		return;
	}
	in_cq[nin_cq].cid = cid;
	in_cq[nin_cq++].st = st;
}

/* ---- what queue.c needs from the reactor and session -------------------- */

void ini_reactor_poll(struct ini_reactor *r)
{
	(void)r;
	cq_polls++;
	for (unsigned int i = 0; i < nin_cq; i++)
		answer(in_cq[i].cid, in_cq[i].st);
	nin_cq = 0;
}

static struct rb_task *deferred[16];
static unsigned int ndeferred;
static uint64_t now_ms = 1000;

/* Only an authenticated session's I/O queue waits (QUEUE_AUTH): none here. */
int ini_reactor_wait(struct ini_reactor *r, bool (*cond)(void *), void *arg,
		     uint64_t deadline_ms)
{
	(void)r;
	(void)deadline_ms;
	return cond(arg) ? 0 : -ETIMEDOUT;
}

void rb_reactor_defer(struct ini_reactor *r, struct rb_task *t)
{
	(void)r;
	for (unsigned int i = 0; i < ndeferred; i++)
		if (deferred[i] == t)
			return;
	if (ndeferred < 16)
		deferred[ndeferred++] = t;
}

static void run_deferred(void)
{
	while (ndeferred) {
		struct rb_task *t = deferred[0];

		memmove(&deferred[0], &deferred[1], --ndeferred * sizeof(deferred[0]));
		t->fn(t);
	}
}

uint64_t rb_now_ms(void)
{
	return now_ms;
}

int ini_reactor_set_cq(struct ini_reactor *r, const struct rb_transport_ops *ops,
		       struct rb_domain *d, uint32_t depth)
{
	(void)ops;
	(void)d;
	(void)depth;
	r->cq = (struct rb_cq *)&T;
	return 0;
}

int ini_reactor_add_queue(struct ini_reactor *r, struct ini_reactor_queue *q)
{
	(void)r;
	(void)q;
	return 0;
}

static unsigned int queue_deaths;

void ini_session_queue_died(struct ini_session *s, struct ini_queue *q)
{
	(void)s;
	(void)q;
	queue_deaths++;
}

/* ---- a frontend that keeps its slot, like a ublk tag ---------------------- */

struct tag {
	struct ini_queue *q;
	struct rb_io io;
	struct rb_slot *slot;
	unsigned int done, again; /* completions seen; resubmissions left */
	int err;
};

static void tag_done(struct rb_io *io, int err);

static int tag_go(struct tag *t)
{
	t->io = (struct rb_io){ .opcode = RB_OP_WRITE, .offset = 4096u * t->slot->cid,
				.length = 4096, .nr_slots = 1, .slots = &t->slot,
				.done = tag_done };
	return rb_queue_submit(t->q, &t->io);
}

static void tag_done(struct rb_io *io, int err)
{
	struct tag *t = rb_container_of(io, struct tag, io);

	t->done++;
	t->err = err;
	/* The next request reuses the slot at once, as ublk's COMMIT_AND_FETCH does. */
	if (t->again) {
		t->again--;
		tag_go(t);
	}
}

/* ---- tests -------------------------------------------------------------- */

static struct ini_session sess;
static struct ini_reactor reactor;

static int open_queue(struct ini_queue *q, uint32_t depth)
{
	struct ini_queue_cfg cfg = { .qid = 1, .depth = depth, .buf_size = 65536,
				     .incapsule = 8192, .handle = 1 };

	memset(&sess, 0, sizeof(sess));
	memset(&reactor, 0, sizeof(reactor));
	sess.p.ops = &mock_ops;
	sess.p.timeout_ms = 2000;
	snprintf(sess.target, sizeof(sess.target), "scripted://t");
	queue_deaths = 0;
	ndeferred = 0;
	return ini_queue_connect(q, &sess, &reactor, &cfg);
}

static void close_queue(struct ini_queue *q)
{
	ini_queue_shutdown(q);
	run_deferred();
	while (T.nsends)
		complete_send(RB_WC_FLUSH_ERR);
	flush_recvs();
	ok(ini_queue_free(q), "queue freed");
}

/* The answer arrives before the SEND's completion, many times in a row. */
static void test_answer_overtakes_send(void)
{
	struct ini_queue q;
	struct tag t = { .q = &q, .again = 20 };

	is_int(open_queue(&q, 1), 0, "depth-1 queue connects");
	is_int(T.max_send, 1, "it asks for one SEND per slot");
	is_int(rb_queue_slots_get(&q, 1, &t.slot), 0, "the tag gets the slot");
	is_int(tag_go(&t), 0, "first WRITE posted");
	for (unsigned int i = 0; i <= 20; i++) {
		unsigned int before = t.done;

		answer(t.slot->cid, RB_S_SUCCESS);
		if (i == 0) {
			is_int(t.done, before, "not done while its SEND is outstanding");
			ok(ini_queue_waits_for_send(&q), "the reactor must wake for that SEND");
		}
		complete_send(RB_WC_SUCCESS);
		if (i == 0) {
			is_int(t.done, before + 1, "done once the SEND completed");
			ok(!ini_queue_waits_for_send(&q), "after which it may sleep through SENDs");
		}
	}
	is_int(t.done, 21, "all 21 WRITEs done");
	is_int(t.err, 0, "without error");
	is_int(T.send_refused, 0, "no SEND past the send queue depth");
	ok(!q.dead, "the queue lives");
	rb_queue_slots_put(&q, 1, &t.slot);
	close_queue(&q);
}

/* A depth-2 queue with one WRITE answered while its SEND is outstanding. */
static void answered_write(struct ini_queue *q, struct tag *t)
{
	is_int(open_queue(q, 2), 0, "depth-2 queue connects");
	is_int(rb_queue_slots_get(q, 1, &t->slot), 0, "the tag gets a slot");
	is_int(tag_go(t), 0, "WRITE posted");
	answer(t->slot->cid, RB_S_SUCCESS);
	is_int(t->done, 0, "answered, SEND outstanding: not done yet");
}

/* Answer in, then the queue dies before the SEND completes: the answer holds. */
static void test_answer_then_death(void)
{
	struct ini_queue q;
	struct tag t = { .q = &q };

	answered_write(&q, &t);
	ini_queue_fail(&q, "test: link lost");
	ok(T.disconnected, "the dead queue disconnects");
	run_deferred();
	is_int(t.done, 1, "the reap completes it");
	is_int(t.err, 0, "with the target's answer, not EIO");
	complete_send(RB_WC_FLUSH_ERR);
	is_int(t.done, 1, "the flushed SEND completes nothing twice");
	rb_queue_slots_put(&q, 1, &t.slot);
	is_int(rb_queue_slots_get(&q, 1, &t.slot), -EIO, "a dead queue hands out no slot");
	close_queue(&q);
}

/* Answer in, then the SEND is flushed before the reap runs: same answer. */
static void test_answer_then_flush(void)
{
	struct ini_queue q;
	struct tag t = { .q = &q };

	answered_write(&q, &t);
	complete_send(RB_WC_FLUSH_ERR);
	is_int(t.done, 1, "the flushed SEND delivers the answer");
	is_int(t.err, 0, "as success: the target did answer");
	ok(q.dead, "a flushed SEND kills the queue");
	run_deferred();
	is_int(t.done, 1, "the reap completes nothing twice");
	rb_queue_slots_put(&q, 1, &t.slot);
	close_queue(&q);
}

/* A command times out, its answer comes late: the slot is reusable after. */
static void test_late_answer(void)
{
	struct ini_queue q;
	struct tag t = { .q = &q };
	struct rb_slot *sl;
	uint16_t cid;

	is_int(open_queue(&q, 1), 0, "depth-1 queue connects");
	is_int(rb_queue_slots_get(&q, 1, &t.slot), 0, "slot");
	is_int(tag_go(&t), 0, "WRITE posted");
	cid = t.slot->cid;
	complete_send(RB_WC_SUCCESS);
	now_ms += 5000;
	ini_queue_tick(&q, now_ms);
	is_int(t.done, 1, "the timeout fails the WRITE");
	is_int(t.err, -EIO, "with EIO");
	rb_queue_slots_put(&q, 1, &t.slot);
	is_int(rb_queue_slots_get(&q, 1, &sl), -EIO, "the slot stays reserved (a stalled target fails at once)");
	answer(cid, RB_S_SUCCESS);
	is_int(t.done, 1, "the late answer completes nothing");
	is_int(rb_queue_slots_get(&q, 1, &sl), 0, "and frees the slot");
	rb_queue_slots_put(&q, 1, &sl);
	ok(!q.dead, "the queue lives");
	close_queue(&q);
}

/* Answered, but the SEND never completes: the timeout ends the queue, not the wait. */
static void test_send_never_completes(void)
{
	struct ini_queue q;
	struct tag t = { .q = &q };

	answered_write(&q, &t);
	now_ms += 5000;
	ini_queue_tick(&q, now_ms);
	ok(q.dead, "the timeout fails the queue");
	run_deferred();
	is_int(t.done, 1, "the reap completes the WRITE");
	is_int(t.err, 0, "with the target's answer");
	rb_queue_slots_put(&q, 1, &t.slot);
	close_queue(&q);
}

/*
 * A queue dies and its session reconnects (ctrl-loss-tmo): a frontend that
 * already holds its slot, like a ublk tag, submits before the reactors are
 * parked.  The command must wait for the reconnect like those in flight and
 * be re-issued by it, not fail with EIO; if the reconnect is given up, it
 * fails then.
 */
static void submit_on_dead_queue(struct ini_queue *q, struct tag *t)
{
	is_int(open_queue(q, 2), 0, "depth-2 queue connects");
	is_int(rb_queue_slots_get(q, 1, &t->slot), 0, "the tag gets a slot");
	atomic_store(&sess.recovering, true);
	ini_queue_fail(q, "test: link lost");
	run_deferred();
	ok(q->dead && queue_deaths == 1, "the queue died; the session recovers");
	is_int(tag_go(t), 0, "a WRITE submitted now is accepted");
	is_int(T.nsends, 0, "and not posted on the dead connection");
	run_deferred();
	is_int(t->done, 0, "it waits for the reconnect");
}

static void test_submit_while_recovering(void)
{
	struct ini_queue_cfg cfg = { .qid = 1, .depth = 2, .buf_size = 65536, .incapsule = 8192,
				     .handle = 1 };
	struct ini_queue q;
	struct tag t = { .q = &q };
	uint16_t cid;

	submit_on_dead_queue(&q, &t);
	cid = t.slot->cid;
	/* The recovery: the old connection flushes and goes, a new one comes. */
	flush_recvs();
	ok(ini_queue_release_transport(&q), "the old connection is released");
	is_int(ini_queue_reconnect(&q, &cfg), 0, "the queue reconnects");
	atomic_store(&sess.recovering, false);
	is_int(T.nsends, 1, "the reconnect re-issues the WRITE");
	ok(T.nsends == 1 && T.caps[0].opcode == RB_OP_WRITE && rb_from_le16(T.caps[0].cid) == cid,
	   "as it was submitted");
	answer(cid, RB_S_SUCCESS);
	complete_send(RB_WC_SUCCESS);
	is_int(t.done, 1, "it completes");
	is_int(t.err, 0, "without error");
	rb_queue_slots_put(&q, 1, &t.slot);
	close_queue(&q);

	t = (struct tag){ .q = &q };
	submit_on_dead_queue(&q, &t);
	atomic_store(&sess.recovering, false); /* given up (ctrl-loss-tmo passed) */
	ini_queue_fail_inflight(&q);
	is_int(t.done, 1, "given up: the waiting WRITE completes");
	is_int(t.err, -EIO, "with EIO");
	rb_queue_slots_put(&q, 1, &t.slot);
	flush_recvs();
	close_queue(&q);
}

/*
 * The queue is failed from outside its CQ (a timeout, the session lost on
 * another reactor, a shutdown) while one command's answer waits there
 * unpolled: the reap polls first, so that command completes with its
 * answer; only the one still unanswered fails with EIO.
 */
static void test_answer_waiting_in_cq(void)
{
	struct ini_queue q;
	struct tag a = { .q = &q }, b = { .q = &q };

	is_int(open_queue(&q, 2), 0, "depth-2 queue connects");
	is_int(rb_queue_slots_get(&q, 1, &a.slot), 0, "slot a");
	is_int(rb_queue_slots_get(&q, 1, &b.slot), 0, "slot b");
	is_int(tag_go(&a), 0, "WRITE a posted");
	is_int(tag_go(&b), 0, "WRITE b posted");
	complete_send(RB_WC_SUCCESS);
	complete_send(RB_WC_SUCCESS);
	answer_in_cq(a.slot->cid, RB_S_SUCCESS);
	cq_polls = 0;
	ini_queue_fail(&q, "test: session lost");
	is_int(a.done + b.done, 0, "nothing completes before the reap");
	run_deferred();
	ok(cq_polls > 0 && nin_cq == 0, "the reap polled the CQ");
	is_int(a.done, 1, "a completes");
	is_int(a.err, 0, "with the answer that was waiting in the CQ, not EIO");
	is_int(b.done, 1, "b completes");
	is_int(b.err, -EIO, "unanswered: EIO");
	rb_queue_slots_put(&q, 1, &a.slot);
	rb_queue_slots_put(&q, 1, &b.slot);
	close_queue(&q);
}

int main(void)
{
	rb_log_init("test-ini-queue", RB_LOG_WARN);
	test_answer_overtakes_send();
	test_answer_then_death();
	test_answer_then_flush();
	test_late_answer();
	test_send_never_completes();
	test_submit_while_recovering();
	test_answer_waiting_in_cq();
	return tap_done();
}
