/* SPDX-License-Identifier: MIT */
/*
 * Initiator reactor threads (reactor.c): one epoll loop each, owning a
 * completion queue, the queues (connections) bound to it, the frontend
 * sockets handed to it, and a timerfd for timeouts.
 *
 * The first part is what frontends use (through session.h); the second is
 * the session layer's.  The reactor knows nothing above it: a queue
 * registers a struct ini_reactor_queue whose ops the loop calls, and the
 * session registers its tick with ini_reactor_on_tick.
 */
#ifndef RB_INI_REACTOR_H
#define RB_INI_REACTOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fifo.h"
#include "spin.h"
#include "transport.h"

struct ini_reactor;
struct ini_session;

/* ---- what frontends use ------------------------------------------------- */

/* An fd watched by a reactor; embed it and recover with rb_container_of. */
struct rb_poll {
	void (*fn)(struct rb_poll *p, uint32_t events); /* EPOLL* bits */
};

int rb_reactor_add(struct ini_reactor *r, int fd, uint32_t events, struct rb_poll *p);
int rb_reactor_mod(struct ini_reactor *r, int fd, uint32_t events, struct rb_poll *p);
void rb_reactor_del(struct ini_reactor *r, int fd);

/* A unit of work run on a reactor thread. */
struct rb_task {
	void (*fn)(struct rb_task *t);
	/*
	 * Runs on the reactor's own thread only.  While another thread drives
	 * the reactor (session recovery), the task waits for the owner: ublk
	 * refuses a queue's commands (EINVAL) from any task but the one that
	 * fetched them.
	 */
	bool owner_only;
	struct rb_task *next; /* private */
	bool queued; /* private */
};

RB_FIFO_DECLARE(rb_task_fifo, struct rb_task);

/* Any thread: run t->fn on r soon.  t must stay valid until it ran and must
 * not be posted again before that. */
void rb_reactor_post(struct ini_reactor *r, struct rb_task *t);
/* Reactor thread: run t->fn after the current batch of events (coalesces:
 * a task already queued is not queued twice). */
void rb_reactor_defer(struct ini_reactor *r, struct rb_task *t);
int rb_reactor_id(const struct ini_reactor *r);
/* rb_clock_ms(), behind a function that unit tests replace to move time. */
uint64_t rb_now_ms(void);

/* ---- the session layer's ------------------------------------------------- */

/* What the loop asks of a queue it owns; every op is required. */
struct ini_reactor_queue;
struct ini_reactor_queue_ops {
	/* Timer tick: command and slot-wait timeouts. */
	void (*tick)(struct ini_reactor_queue *q, uint64_t now_ms);
	/* A SEND has not completed: the loop may not sleep through its completion. */
	bool (*waits_for_send)(const struct ini_reactor_queue *q);
	/* The CQ's device was removed: free the connection and registrations;
	 * false while work requests still flush (asked again next tick). */
	bool (*release_transport)(struct ini_reactor_queue *q);
};

/* Embedded in the queue; recover it with rb_container_of. */
struct ini_reactor_queue {
	const struct ini_reactor_queue_ops *ops;
};

struct ini_reactor {
	int id;
	struct ini_session *s; /* for recover.c's pause_task; reactor.c does not look */
	pthread_t thread;
	bool inited; /* ini_reactor_init succeeded; fini undoes it once */
	bool started;
	int epfd;
	int wake_fd; /* eventfd: inbox */
	int timer_fd;
	uint32_t tick_ms;
	struct rb_spin spin; /* busy-poll / poll-us */
	unsigned int arrivals; /* responses received this round, for spin */
	atomic_bool stop;

	const struct rb_transport_ops *ops;
	struct rb_domain *domain;
	struct rb_cq *cq;
	struct rb_poll cq_poll, wake_poll, timer_poll;
	bool cq_fired; /* this round: cq_fd fired and was re-armed */
	bool domain_lost; /* the CQ's device was removed: release it */

	pthread_mutex_t inbox_lock;
	struct rb_task_fifo inbox;
	struct rb_task_fifo defer;
	/* owner_only tasks deferred while another thread drove this reactor */
	struct rb_task_fifo owed;
	pthread_t owner; /* the reactor thread, once has_owner */
	atomic_bool has_owner;

	struct ini_reactor_queue **queues; /* owned: timeouts are scanned per tick */
	unsigned int nr_queues;
	void (*tick_fn)(void *arg, uint64_t now_ms); /* ini_reactor_on_tick */
	void *tick_arg;
	bool leaked_queue; /* a queue on this CQ could not be freed: keep the CQ */
	struct rb_task pause_task; /* recovery: park this thread (recover.c) */
	bool resumed; /* pause_task ran: the rest of this batch may be stale */
};

/* tick_ms: how often the queues' and the tick hook's timeouts are checked. */
int ini_reactor_init(struct ini_reactor *r, int id, const struct rb_transport_opts *topts,
		     uint32_t tick_ms);
int ini_reactor_set_cq(struct ini_reactor *r, const struct rb_transport_ops *ops,
		       struct rb_domain *d, uint32_t depth);
int ini_reactor_add_queue(struct ini_reactor *r, struct ini_reactor_queue *q);
void ini_reactor_del_queue(struct ini_reactor *r, struct ini_reactor_queue *q);
/* Call fn(arg, now) on every tick, after the queues' (the session's
 * keep-alive, on the reactor that owns the admin queue). */
void ini_reactor_on_tick(struct ini_reactor *r, void (*fn)(void *arg, uint64_t now_ms), void *arg);
/* Destroy the CQ (nothing may be attached); a later set_cq makes a new one. */
void ini_reactor_drop_cq(struct ini_reactor *r);
int ini_reactor_start(struct ini_reactor *r);
void ini_reactor_stop(struct ini_reactor *r);
void ini_reactor_fini(struct ini_reactor *r);
/* Reactor not running: drive its CQ, deferred tasks and timeouts on the
 * calling thread until cond(arg) holds or deadline_ms passes (-ETIMEDOUT). */
int ini_reactor_wait(struct ini_reactor *r, bool (*cond)(void *), void *arg,
		     uint64_t deadline_ms);
/* One non-blocking pass of the above (CQ, deferred work, timeouts). */
void ini_reactor_progress(struct ini_reactor *r);
/* Handle every completion the CQ holds now (a queue's reap does, before EIO). */
void ini_reactor_poll(struct ini_reactor *r);

#endif
