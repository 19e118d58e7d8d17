/* SPDX-License-Identifier: MIT */
/*
 * Initiator reactor threads (reactor.h).  Only the inbox (tasks posted
 * from other threads) takes a lock.  Nothing here calls into the queue or
 * session code: they registered hooks.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "checked.h"
#include "clock.h"
#include "reactor.h"
#include "log.h"
#include "log_limit.h"
#include "thread.h"

#define EV_BATCH 64

uint64_t rb_now_ms(void)
{
	return rb_clock_ms();
}

int rb_reactor_id(const struct ini_reactor *r)
{
	return r->id;
}

int rb_reactor_add(struct ini_reactor *r, int fd, uint32_t events, struct rb_poll *p)
{
	struct epoll_event ev = { .events = events, .data.ptr = p };

	if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	return 0;
}

int rb_reactor_mod(struct ini_reactor *r, int fd, uint32_t events, struct rb_poll *p)
{
	struct epoll_event ev = { .events = events, .data.ptr = p };

	if (epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	return 0;
}

void rb_reactor_del(struct ini_reactor *r, int fd)
{
	/* Fails only if fd was never added: nothing to undo then. */
	epoll_ctl(r->epfd, EPOLL_CTL_DEL, fd, NULL);
}

void rb_reactor_post(struct ini_reactor *r, struct rb_task *t)
{
	uint64_t one = 1;

	pthread_mutex_lock(&r->inbox_lock);
	rb_fifo_push(&r->inbox, t);
	pthread_mutex_unlock(&r->inbox_lock);
	if (write(r->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		rb_err("reactor %d: wake: %s", r->id, strerror(errno));
}

void rb_reactor_defer(struct ini_reactor *r, struct rb_task *t)
{
	if (t->queued)
		return;
	t->queued = true;
	rb_fifo_push(&r->defer, t);
}

/* Another thread drives this reactor (recovery, or a test). */
static bool off_owner(const struct ini_reactor *r)
{
	return atomic_load(&r->has_owner) && !pthread_equal(pthread_self(), r->owner);
}

/* Keep t (queued: a defer meanwhile does not add it twice) for the owner. */
static void owe(struct ini_reactor *r, struct rb_task *t)
{
	t->queued = true;
	rb_fifo_push(&r->owed, t);
}

/* Owed tasks go back to the front of the deferred ones, in their order. */
static void take_owed(struct ini_reactor *r)
{
	rb_fifo_splice(&r->owed, &r->defer); /* owed, then deferred */
	rb_fifo_splice(&r->defer, &r->owed);
}

/* Returns the number of tasks run. */
static int run_deferred(struct ini_reactor *r)
{
	struct rb_task *t;
	int n = 0;

	if (!rb_fifo_empty(&r->owed) && !off_owner(r))
		take_owed(r);
	while ((t = rb_fifo_pop(&r->defer))) {
		if (t->owner_only && off_owner(r)) {
			owe(r, t);
			continue;
		}
		t->queued = false;
		t->fn(t);
		n++;
	}
	return n;
}

/* Poll until the CQ is empty; returns completions handled. */
static int drain_cq(struct ini_reactor *r)
{
	int n;

	if (!r->cq)
		return 0;
	n = rb_cq_drain(r->ops, r->cq);
	if (n < 0)
		rb_fatal("reactor %d: %s cq poll: %s", r->id, r->ops->name, strerror(-n));
	return n;
}

/*
 * Completions and deferred work until both are quiet (bounded).  The CQ is
 * polled only when poll_cq says it may hold something: its fd fired (and
 * was re-armed), the loop polls instead of sleeping, or a transport asked
 * for a poll.  A drained, armed CQ gets new entries only through its fd
 * (traffic, or flushes of posts to a dead connection), so deferred work
 * needs no poll of its own; over tcp each poll is a system call.
 */
static void settle(struct ini_reactor *r, bool poll_cq)
{
	run_deferred(r);
	if (poll_cq)
		drain_cq(r);
	for (int i = 0; i < 64; i++)
		if (!run_deferred(r))
			break;
}

void ini_reactor_poll(struct ini_reactor *r)
{
	drain_cq(r);
}

static void tick(struct ini_reactor *r)
{
	uint64_t now = rb_now_ms();

	for (unsigned int i = 0; i < r->nr_queues; i++)
		r->queues[i]->ops->tick(r->queues[i], now);
	if (r->tick_fn)
		r->tick_fn(r->tick_arg, now);
	/* Sum up rate-limited log lines of a flood that stopped. */
	if (r->id == 0)
		rb_log_limits_flush();
	if (r->cq && r->ops->domain_lost(r->domain))
		r->domain_lost = true;
}

/*
 * The CQ's device was removed: free the queues' connections and
 * registrations as their work requests finish flushing, then the CQ, so
 * the kernel can complete the removal (docs/transport-rdma.md).  Runs
 * after a round, outside any handler or drain; retried every tick.
 */
static void release_lost_domain(struct ini_reactor *r)
{
	bool busy = false;

	for (unsigned int i = 0; i < r->nr_queues; i++)
		if (!r->queues[i]->ops->release_transport(r->queues[i]))
			busy = true;
	if (busy || r->leaked_queue)
		return;
	ini_reactor_drop_cq(r);
	rb_info("reactor %d: released the %s completion queue and registrations on a removed "
		"device",
		r->id, r->ops->name);
}

static void on_cq(struct rb_poll *p, uint32_t events)
{
	struct ini_reactor *r = rb_container_of(p, struct ini_reactor, cq_poll);
	int ret;

	/* The CQ was replaced while this thread was parked earlier in the
	 * same batch of events (recover.c): this event is the old one's. */
	if (!r->cq)
		return;
	/* get event -> re-arm -> drain (the drain happens in settle()) */
	r->cq_fired = true;
	ret = r->ops->cq_arm(r->cq);
	if (ret < 0)
		rb_err("reactor %d: %s cq arm: %s", r->id, r->ops->name, strerror(-ret));
}

static void on_wake(struct rb_poll *p, uint32_t events)
{
	struct ini_reactor *r = rb_container_of(p, struct ini_reactor, wake_poll);
	struct rb_task_fifo posted = { 0 };
	struct rb_task *t;
	uint64_t v;

	if (read(r->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		rb_err("reactor %d: wake read: %s", r->id, strerror(errno));
	pthread_mutex_lock(&r->inbox_lock);
	rb_fifo_splice(&posted, &r->inbox);
	pthread_mutex_unlock(&r->inbox_lock);
	while ((t = rb_fifo_pop(&posted))) {
		if (t->owner_only && off_owner(r))
			owe(r, t);
		else
			t->fn(t);
	}
}

static void on_timer(struct rb_poll *p, uint32_t events)
{
	struct ini_reactor *r = rb_container_of(p, struct ini_reactor, timer_poll);
	uint64_t v;

	if (read(r->timer_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		rb_err("reactor %d: timer read: %s", r->id, strerror(errno));
	tick(r);
}

int ini_reactor_init(struct ini_reactor *r, int id, const struct rb_transport_opts *topts,
		     uint32_t tick_ms)
{
	int ret;

	memset(r, 0, sizeof(*r));
	r->id = id;
	rb_spin_init(&r->spin, topts);
	r->epfd = r->wake_fd = r->timer_fd = -1;
	atomic_init(&r->stop, false);
	atomic_init(&r->has_owner, false);
	pthread_mutex_init(&r->inbox_lock, NULL);
	r->tick_ms = tick_ms;
	r->cq_poll.fn = on_cq;
	r->wake_poll.fn = on_wake;
	r->timer_poll.fn = on_timer;
	r->inited = false;

	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (r->epfd < 0)
		goto out_errno;
	r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->wake_fd < 0)
		goto out_errno;
	r->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (r->timer_fd < 0)
		goto out_errno;
	ret = rb_reactor_add(r, r->wake_fd, EPOLLIN, &r->wake_poll);
	if (ret)
		goto out_fail;
	ret = rb_reactor_add(r, r->timer_fd, EPOLLIN, &r->timer_poll);
	if (ret)
		goto out_fail;
	r->inited = true;
	return 0;

out_errno:
	ret = -errno;
out_fail:
	rb_err("reactor %d: setup: %s", id, strerror(-ret));
	r->inited = true;
	ini_reactor_fini(r);
	return ret;
}

int ini_reactor_set_cq(struct ini_reactor *r, const struct rb_transport_ops *ops,
		       struct rb_domain *d, uint32_t depth)
{
	int ret;

	if (r->cq) {
		if (r->ops != ops || r->domain != d) {
			rb_err("reactor %d: connections resolved to different %s devices; one "
			       "device per session is supported",
			       r->id, ops->name);
			return -EXDEV;
		}
		return 0;
	}
	ret = ops->cq_create(d, depth, &r->cq);
	if (ret) {
		rb_err("reactor %d: %s: create completion queue (%u entries): %s", r->id,
		       ops->name, depth, strerror(-ret));
		r->cq = NULL;
		return ret;
	}
	r->ops = ops;
	r->domain = d;
	ret = rb_reactor_add(r, ops->cq_fd(r->cq), EPOLLIN, &r->cq_poll);
	if (ret) {
		rb_err("reactor %d: watch cq fd: %s", r->id, strerror(-ret));
		ops->cq_destroy(r->cq);
		r->cq = NULL;
		return ret;
	}
	ret = ops->cq_arm(r->cq);
	if (ret)
		rb_err("reactor %d: %s cq arm: %s", r->id, ops->name, strerror(-ret));
	return ret;
}

void ini_reactor_del_queue(struct ini_reactor *r, struct ini_reactor_queue *q)
{
	for (unsigned int i = 0; i < r->nr_queues; i++) {
		if (r->queues[i] == q) {
			r->queues[i] = r->queues[--r->nr_queues];
			return;
		}
	}
}

void ini_reactor_drop_cq(struct ini_reactor *r)
{
	if (!r->cq)
		return;
	rb_reactor_del(r, r->ops->cq_fd(r->cq));
	r->ops->cq_destroy(r->cq);
	r->cq = NULL;
	r->domain = NULL;
	r->domain_lost = false;
}

void ini_reactor_on_tick(struct ini_reactor *r, void (*fn)(void *arg, uint64_t now_ms), void *arg)
{
	r->tick_fn = fn;
	r->tick_arg = arg;
}

int ini_reactor_add_queue(struct ini_reactor *r, struct ini_reactor_queue *q)
{
	struct ini_reactor_queue **nq = realloc(r->queues, (r->nr_queues + 1) * sizeof(*nq));

	if (!nq)
		return -ENOMEM;
	nq[r->nr_queues++] = q;
	r->queues = nq;
	return 0;
}

/* May the reactor sleep through completions of its own SENDs? */
static bool reactor_quiet(const struct ini_reactor *r)
{
	for (unsigned int i = 0; i < r->nr_queues; i++)
		if (r->queues[i]->ops->waits_for_send(r->queues[i]))
			return false;
	return true;
}

static void *reactor_main(void *arg)
{
	struct ini_reactor *r = arg;
	struct epoll_event evs[EV_BATCH];
	struct itimerspec its = {
		.it_interval = { r->tick_ms / 1000, (long)(r->tick_ms % 1000) * 1000000L },
		.it_value = { r->tick_ms / 1000, (long)(r->tick_ms % 1000) * 1000000L },
	};

	r->owner = pthread_self();
	atomic_store(&r->has_owner, true);
	if (timerfd_settime(r->timer_fd, 0, &its, NULL) < 0)
		rb_err("reactor %d: timerfd_settime: %s (timeouts will not fire)", r->id,
		       strerror(errno));
	/* Anything that completed while the main thread set up. */
	if (r->cq)
		r->ops->cq_arm(r->cq);
	settle(r, true);
	while (!atomic_load(&r->stop)) {
		/* settle() is bounded: do not sleep on work it left queued. */
		bool now = rb_spin_wait_polls(&r->spin) || !rb_fifo_empty(&r->defer) ||
			   (r->cq && r->ops->cq_prepare_wait(r->cq, reactor_quiet(r)) > 0);
		int n = epoll_wait(r->epfd, evs, EV_BATCH, now ? 0 : -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			/* EBADF, EFAULT, EINVAL: a bug.  Leaving the loop would
			 * hang every queue and client on this reactor. */
			rb_fatal("reactor %d: epoll_wait: %s", r->id, strerror(errno));
		}
		/* Posts made while handling this round go out together at uncork. */
		if (r->cq)
			r->ops->cq_cork(r->cq, true);
		r->cq_fired = false;
		r->resumed = false;
		for (int i = 0; i < n; i++) {
			struct rb_poll *p = evs[i].data.ptr;

			p->fn(p, evs[i].events);
			/* Parked by a recovery (recover.c), whose thread ran our
			 * deferred work meanwhile: what the rest of this batch
			 * points at may be freed.  Every fd is level-triggered,
			 * so those still ready report again. */
			if (r->resumed)
				break;
		}
		settle(r, now || r->cq_fired);
		if (r->cq)
			r->ops->cq_cork(r->cq, false);
		if (r->domain_lost)
			release_lost_domain(r);
		rb_spin_note(&r->spin, n > 0, r->arrivals);
		r->arrivals = 0;
	}
	return NULL;
}

int ini_reactor_start(struct ini_reactor *r)
{
	int ret = pthread_create(&r->thread, NULL, reactor_main, r);

	if (ret) {
		rb_err("reactor %d: pthread_create: %s", r->id, strerror(ret));
		return -ret;
	}
	rb_name_thread(r->thread, "rb-reactor", r->id);
	r->started = true;
	return 0;
}

static void stop_task(struct rb_task *t)
{
	/* Runs on the reactor: the loop checks the flag after this batch. */
	free(t);
}

void ini_reactor_stop(struct ini_reactor *r)
{
	struct rb_task *t;
	uint64_t one = 1;

	if (!r->started)
		return;
	atomic_store(&r->stop, true);
	t = calloc(1, sizeof(*t));
	if (t) {
		t->fn = stop_task;
		rb_reactor_post(r, t);
	} else if (write(r->wake_fd, &one, sizeof(one)) < 0) {
		rb_err("reactor %d: wake: %s", r->id, strerror(errno));
	}
	pthread_join(r->thread, NULL);
	r->started = false;
	atomic_store(&r->has_owner, false);
	/* Tasks posted after the loop ended run here, on the joining thread. */
	on_wake(&r->wake_poll, EPOLLIN);
}

void ini_reactor_fini(struct ini_reactor *r)
{
	if (!r->inited)
		return;
	r->inited = false;
	/* A leaked connection still references the CQ: leak it too. */
	if (r->cq && !r->leaked_queue)
		r->ops->cq_destroy(r->cq);
	r->cq = NULL;
	if (r->timer_fd >= 0)
		close(r->timer_fd);
	if (r->wake_fd >= 0)
		close(r->wake_fd);
	if (r->epfd >= 0)
		close(r->epfd);
	r->epfd = r->wake_fd = r->timer_fd = -1;
	free(r->queues);
	r->queues = NULL;
	r->nr_queues = 0;
	pthread_mutex_destroy(&r->inbox_lock);
}

void ini_reactor_progress(struct ini_reactor *r)
{
	if (r->cq)
		r->ops->cq_arm(r->cq);
	on_wake(&r->wake_poll, EPOLLIN);
	settle(r, true);
	tick(r);
	settle(r, true);
}

int ini_reactor_wait(struct ini_reactor *r, bool (*cond)(void *), void *arg,
		     uint64_t deadline_ms)
{
	for (;;) {
		struct pollfd pfd = { .fd = r->cq ? r->ops->cq_fd(r->cq) : -1, .events = POLLIN };
		uint64_t now;
		int wait;

		ini_reactor_progress(r);
		if (cond(arg))
			return 0;
		now = rb_now_ms();
		if (now >= deadline_ms)
			return -ETIMEDOUT;
		wait = (int)(deadline_ms - now < r->tick_ms ? deadline_ms - now : r->tick_ms);
		if (r->cq && r->ops->cq_prepare_wait(r->cq, false) > 0)
			continue;
		if (poll(&pfd, 1, wait) < 0 && errno != EINTR)
			return -errno;
	}
}
