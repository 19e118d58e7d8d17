/* SPDX-License-Identifier: MIT */
/*
 * Session recovery: NVMe-oF's reconnect_delay and ctrl_loss_tmo.
 *
 * When any queue of a running session dies (target restarted, link lost),
 * a recovery thread takes over instead of failing the session's I/O:
 *
 *   1. park every reactor thread (a task that waits on rec_cond), so this
 *      thread may drive their CQs and queues alone: the one-owner rule
 *      holds, the owner just changes hands for a while;
 *   2. quiesce: disconnect every queue, drive the CQs until every work
 *      request has flushed, free connections, registrations and CQs; the
 *      queues keep their memory, their slots and the commands in them;
 *   3. attempt: admin queue, CONNECT naming the session it replaces (the
 *      target answers once that one's commands have finished, so none lands
 *      after its re-issued copy; the export must be unchanged), every I/O
 *      queue, each re-issuing its unanswered commands; on failure
 *      quiesce again and retry every reconnect_delay_ms;
 *   4. resume the reactors; if ctrl_loss_tmo_ms passed (or shutdown asked)
 *      the session is lost instead and its I/O fails with EIO.
 *
 * While parked, the frontends are not served: requests wait in the kernel
 * or in the NBD client's socket, which is the backpressure wanted.
 * Requests that arrive between the loss and the parking find no free slot
 * (rb_queue_slots_get says -EAGAIN while recovering) and wait as well.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "checked.h"
#include "deadline.h"
#include "initiator.h"
#include "log.h"
#include "log_limit.h"

/* Bound for flushing the old connections' work requests. */
#define REC_QUIESCE_MS 10000u

static void pause_task(struct rb_task *t)
{
	struct ini_reactor *r = rb_container_of(t, struct ini_reactor, pause_task);
	struct ini_session *s = r->s;

	/* Posts held by this round's cork go out now, before the handover. */
	if (r->cq)
		r->ops->cq_cork(r->cq, false);
	pthread_mutex_lock(&s->rec_lock);
	s->rec_paused++;
	pthread_cond_broadcast(&s->rec_cond);
	while (s->rec_pause)
		pthread_cond_wait(&s->rec_cond, &s->rec_lock);
	s->rec_paused--;
	pthread_cond_broadcast(&s->rec_cond);
	pthread_mutex_unlock(&s->rec_lock);
	r->resumed = true;
	/* The CQ may be a new one: the loop uncorks it at the end of the round. */
	if (r->cq)
		r->ops->cq_cork(r->cq, true);
}

static void park_reactors(struct ini_session *s)
{
	unsigned int n = 0;

	pthread_mutex_lock(&s->rec_lock);
	s->rec_pause = true;
	pthread_mutex_unlock(&s->rec_lock);
	for (unsigned int i = 0; i < s->nr_reactors; i++) {
		if (s->reactors[i].started) {
			rb_reactor_post(&s->reactors[i], &s->reactors[i].pause_task);
			n++;
		}
	}
	pthread_mutex_lock(&s->rec_lock);
	while (s->rec_paused < n)
		pthread_cond_wait(&s->rec_cond, &s->rec_lock);
	pthread_mutex_unlock(&s->rec_lock);
}

static void resume_reactors(struct ini_session *s)
{
	pthread_mutex_lock(&s->rec_lock);
	s->rec_pause = false;
	pthread_cond_broadcast(&s->rec_cond);
	/* Wait until each left its task: the next parking may post it again. */
	while (s->rec_paused)
		pthread_cond_wait(&s->rec_cond, &s->rec_lock);
	pthread_mutex_unlock(&s->rec_lock);
}

static void for_each_queue(struct ini_session *s, void (*fn)(struct ini_queue *q))
{
	fn(&s->admin);
	for (unsigned int i = 0; i < s->nr_queues; i++)
		fn(&s->queues[i]);
}

static void disconnect_queue(struct ini_queue *q)
{
	q->dead = true;
	atomic_store(&q->gone, true);
	if (q->conn && !q->disconnected) {
		q->disconnected = true;
		q->ops->disconnect(q->conn);
	}
}

/* Step 2; false when work requests never completed (their memory cannot be
 * handed to a new connection: the session is lost). */
static bool quiesce(struct ini_session *s)
{
	for_each_queue(s, disconnect_queue);
	ini_session_wait_quiet(s, false, REC_QUIESCE_MS);
	ini_session_wait_quiet(s, true, REC_QUIESCE_MS);
	if (!ini_queue_release_transport(&s->admin))
		return false;
	for (unsigned int i = 0; i < s->nr_queues; i++)
		if (!ini_queue_release_transport(&s->queues[i]))
			return false;
	/* Admin commands (keep-alive) are not re-issued: the admin queue is new. */
	ini_queue_fail_inflight(&s->admin);
	for (unsigned int i = 0; i < s->nr_reactors; i++)
		ini_reactor_drop_cq(&s->reactors[i]);
	return true;
}

/* Parked waiters: served (and timed) afresh once the reactors run again. */
static void requeue_waiters(struct ini_queue *q)
{
	uint64_t deadline = rb_now_ms() + q->timeout_ms;

	for (struct rb_slot_waiter *w = q->waiters.head; w; w = w->next)
		w->deadline_ms = deadline;
	if (!rb_fifo_empty(&q->waiters))
		rb_reactor_defer(q->r, &q->wake_task);
}

static void reap_queue(struct ini_queue *q)
{
	rb_reactor_defer(q->r, &q->reap_task);
}

/* Sleep delay_ms unless shutdown asks first; false: shutdown. */
static bool rec_sleep(struct ini_session *s, uint32_t delay_ms)
{
	struct timespec ts = rb_deadline_ts(CLOCK_MONOTONIC, delay_ms);
	bool stop;

	pthread_mutex_lock(&s->rec_lock);
	while (!s->rec_stop && pthread_cond_timedwait(&s->rec_cond, &s->rec_lock, &ts) == 0)
		;
	stop = s->rec_stop;
	pthread_mutex_unlock(&s->rec_lock);
	return !stop;
}

static bool rec_stopping(struct ini_session *s)
{
	bool stop;

	pthread_mutex_lock(&s->rec_lock);
	stop = s->rec_stop;
	pthread_mutex_unlock(&s->rec_lock);
	return stop;
}

/* A target that breaks every session it is given could make these lines at
 * will: rate-limited, the target URI naming the peer. */
static struct rb_log_limit lim_lost = RB_LOG_LIMIT_INIT("session lost", RB_LOG_ERR);
static struct rb_log_limit lim_retry = RB_LOG_LIMIT_INIT("reconnect attempt failed",
							 RB_LOG_WARN);
static struct rb_log_limit lim_back = RB_LOG_LIMIT_INIT("session re-established", RB_LOG_INFO);

static void recover(struct ini_session *s)
{
	uint64_t start = rb_now_ms(), deadline = start + s->p.ctrl_loss_tmo_ms;
	unsigned int attempts = 0;
	bool ok;

	rb_log_limited(&lim_lost, s->target, RB_LOG_ERR,
		       "%s: session %016" PRIx64 " (export '%s') lost; reconnecting every %u ms "
		       "for up to %u ms, I/O waits meanwhile",
		       s->target, s->info.session_id, s->p.export_name, s->p.reconnect_delay_ms,
		       s->p.ctrl_loss_tmo_ms);
	park_reactors(s);
	ok = quiesce(s);
	if (!ok)
		rb_err("%s: the lost connections' work requests never completed", s->target);
	/*
	 * Lost again within reconnect_delay_ms of the last recovery: a target
	 * that breaks each session at once would otherwise have us reconnect in
	 * a tight loop.  Wait as between failed attempts.
	 */
	if (ok && s->rec_ok_ms && start < s->rec_ok_ms + s->p.reconnect_delay_ms)
		ok = rec_sleep(s, (uint32_t)(s->rec_ok_ms + s->p.reconnect_delay_ms - start));
	while (ok && !rec_stopping(s)) {
		int ret;

		attempts++;
		ret = ini_session_reconnect(s);
		if (!ret)
			break;
		ok = quiesce(s);
		if (ok && rb_now_ms() + s->p.reconnect_delay_ms >= deadline) {
			ok = false;
			rb_err("%s: no reconnect within %u ms (%u attempts, last: %s)", s->target,
			       s->p.ctrl_loss_tmo_ms, attempts, strerror(-ret));
		} else if (ok) {
			rb_log_limited(&lim_retry, s->target, RB_LOG_WARN,
				       "%s: reconnect attempt %u failed: %s; next in %u ms",
				       s->target, attempts, strerror(-ret),
				       s->p.reconnect_delay_ms);
			ok = rec_sleep(s, s->p.reconnect_delay_ms);
		}
	}
	if (ok && !rec_stopping(s)) {
		atomic_store(&s->recovering, false);
		for (unsigned int i = 0; i < s->nr_queues; i++)
			requeue_waiters(&s->queues[i]);
		s->rec_ok_ms = rb_now_ms();
		rb_log_limited(&lim_back, s->target, RB_LOG_INFO,
			       "%s: session %016" PRIx64 " re-established after %" PRIu64
			       " ms (%u attempts); I/O resumes",
			       s->target, s->info.session_id, s->rec_ok_ms - start, attempts);
	} else {
		/* Everything kept for re-issue fails now (the reactors reap it). */
		pthread_mutex_lock(&s->rec_lock);
		s->rec_gave_up = true;
		pthread_mutex_unlock(&s->rec_lock);
		atomic_store(&s->lost, true);
		atomic_store(&s->recovering, false);
		for_each_queue(s, disconnect_queue);
		for_each_queue(s, reap_queue);
		rb_err("%s: session to export '%s' given up%s; all I/O now fails with EIO; restart "
		       "the initiator to attach again",
		       s->target, s->p.export_name, rec_stopping(s) ? " (shutting down)" : "");
	}
	resume_reactors(s);
}

static void *rec_main(void *arg)
{
	struct ini_session *s = arg;

	pthread_mutex_lock(&s->rec_lock);
	for (;;) {
		while (!s->rec_wanted && !s->rec_stop)
			pthread_cond_wait(&s->rec_cond, &s->rec_lock);
		if (!s->rec_wanted)
			break;
		/* Cleared first: a loss right after this recovery asks again. */
		s->rec_wanted = false;
		pthread_mutex_unlock(&s->rec_lock);
		recover(s);
		pthread_mutex_lock(&s->rec_lock);
	}
	pthread_mutex_unlock(&s->rec_lock);
	return NULL;
}

int ini_recovery_init(struct ini_session *s)
{
	int ret;

	for (unsigned int i = 0; i < s->nr_reactors; i++)
		s->reactors[i].pause_task.fn = pause_task;
	if (!s->p.ctrl_loss_tmo_ms || s->rec_started)
		return 0;
	ret = pthread_create(&s->rec_thread, NULL, rec_main, s);
	if (ret) {
		rb_err("%s: start the reconnect thread: %s", s->target, strerror(ret));
		return -ret;
	}
	pthread_mutex_lock(&s->rec_lock);
	s->rec_started = true;
	pthread_mutex_unlock(&s->rec_lock);
	return 0;
}

/* Any reactor thread, on a queue's death. */
bool ini_recovery_start(struct ini_session *s)
{
	bool on;

	pthread_mutex_lock(&s->rec_lock);
	on = s->rec_started && !s->rec_stop && !s->rec_gave_up;
	if (on && !atomic_exchange(&s->recovering, true)) {
		s->rec_wanted = true;
		pthread_cond_broadcast(&s->rec_cond);
	}
	pthread_mutex_unlock(&s->rec_lock);
	return on;
}

void rb_session_cancel_recovery(struct ini_session *s)
{
	ini_recovery_fini(s);
}

/* Idempotent: rb_session_stop calls it, and frontends before they drain. */
void ini_recovery_fini(struct ini_session *s)
{
	bool started;

	pthread_mutex_lock(&s->rec_lock);
	started = s->rec_started;
	s->rec_stop = true;
	s->rec_started = false;
	pthread_cond_broadcast(&s->rec_cond);
	pthread_mutex_unlock(&s->rec_lock);
	if (started)
		pthread_join(s->rec_thread, NULL);
}
