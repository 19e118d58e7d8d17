/* SPDX-License-Identifier: MIT */
/*
 * The session layer's internals, shared by session.c, recover.c, queue.c
 * and queue_conn.c: the queue and session objects and their functions.
 * The reactor is reactor.h's; frontends use session.h only.
 */
#ifndef RB_INITIATOR_H
#define RB_INITIATOR_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "bufpool.h"
#include "fifo.h"
#include "reactor.h"
#include "session.h"
#include "spin.h"
#include "transport.h"
#include "wire.h"

#define INI_ADMIN_DEPTH 4 /* CONNECT/LIST, KEEPALIVE, DISCONNECT, spare */
#define INI_ADMIN_BUF_SIZE 65536u /* LIST_EXPORTS: 240 entries */
#define INI_MAX_CHUNK (1u << 20) /* cap on a slot buffer, whatever max_transfer says */
#define INI_DEFAULT_INCAPSULE 8192u
#define INI_TICK_MAX_MS 250u
#define INI_TEARDOWN_MS 3000u /* flush wait at teardown */
#define INI_DISCONNECT_MS 3000u /* DISCONNECT answer wait at close */

/* One posted receive: a 16-byte response slot. */
struct ini_recv {
	struct rb_cqe cqe;
	struct ini_queue *q;
	struct rb_response *rsp;
};

RB_FIFO_DECLARE(rb_slot_waiter_fifo, struct rb_slot_waiter);

struct ini_queue {
	struct ini_session *s;
	struct ini_reactor *r;
	struct ini_reactor_queue rq; /* registered with r */
	const struct rb_transport_ops *ops;
	struct rb_conn *conn;
	uint16_t qid;
	uint32_t alloc_depth; /* slots/receives allocated (= requested depth) */
	uint32_t depth; /* granted by the target: slots 0..depth-1 in use */
	uint32_t incapsule; /* granted in-capsule write limit */
	uint32_t buf_size; /* bytes per slot buffer */
	uint32_t handle; /* export handle for capsules (0 on admin) */
	uint32_t timeout_ms;

	struct rb_bufpool pool; /* alloc_depth x buf_size, page aligned */
	struct rb_mr *pool_mr; /* remote read + write */
	struct rb_capsule *caps; /* one per slot, local only */
	struct rb_mr *caps_mr;
	struct rb_response *rsps; /* one per receive, local only */
	struct rb_mr *rsps_mr;
	struct rb_slot *slots;
	struct ini_recv *recvs;
	uint16_t *free_stack;
	uint32_t nr_free;
	uint32_t nr_inflight; /* slots with resp_pending */
	uint32_t nr_answered; /* answers held until their SEND completes */
	int wr_outstanding; /* posted work requests not completed */

	bool connected;
	bool dead;
	bool stalled; /* a command timed out and no answer came since */
	bool no_repost; /* closing: receives already posted cover what is left */
	atomic_bool gone; /* mirrors dead for other threads */
	bool disconnected; /* ops->disconnect called */
	/* QUEUE_AUTH: the first command, answered before anything else goes. */
	bool auth_wait; /* the next response is QUEUE_AUTH's */
	bool auth_answered;
	bool auth_was_dead; /* dead when QUEUE_AUTH went out (a reconnect) */
	uint16_t auth_status;
	struct rb_cqe auth_send_cqe;
	char peer[320];
	uint32_t qpn;

	struct rb_slot_waiter_fifo waiters;
	struct rb_task reap_task; /* fail outstanding work after death */
	struct rb_task wake_task; /* serve slot waiters */
	struct rb_task kill_task; /* posted from another reactor: session lost */
};

struct ini_session {
	struct rb_session_params p;
	char target[300]; /* "tcp://HOST:PORT" */
	struct rb_export_info info;
	struct ini_reactor *reactors;
	unsigned int nr_reactors;
	struct ini_queue admin;
	struct ini_queue *queues;
	unsigned int nr_queues;
	uint32_t handle; /* export handle from CONNECT */
	uint16_t granted_depth; /* CONNECT's per-queue depth limit */
	bool connected; /* CONNECT succeeded: DISCONNECT at close */
	bool authed; /* the admin exchange ran: I/O queues prove themselves with skey */
	struct rb_auth_skey skey;
	bool closing; /* rb_session_close runs: losses are expected */
	atomic_bool lost;
	uint32_t cq_depth; /* of each reactor's CQ */

	/* recovery (recover.c): a thread that reconnects while reactors are parked */
	atomic_bool recovering; /* lost, reconnect in progress: keep commands */
	bool rec_started, rec_gave_up;
	pthread_t rec_thread;
	pthread_mutex_t rec_lock;
	pthread_cond_t rec_cond;
	bool rec_wanted, rec_stop, rec_pause; /* under rec_lock */
	unsigned int rec_paused; /* reactors parked; under rec_lock */
	uint64_t rec_ok_ms; /* the last re-establishment (recovery thread) */

	/* keep-alive, run by reactor 0 */
	struct rb_io ka_io;
	struct rb_slot *ka_slot;
	bool ka_busy;
	uint64_t ka_next_ms;
	/* The keep-alive timeout in effect: the target's grant, else as asked
	 * (a target raises 0 or a short one to its min-keepalive). */
	uint32_t ka_ms;
	uint64_t log_flush_ms; /* reactor 0: rb_log_limits_flush() once a second */
};

/* queue.c (I/O path) and queue_conn.c (set-up and teardown) */
/* Send QUEUE_AUTH with proof (the queue's first command); the answer lands
 * in auth_answered/auth_status. */
int ini_queue_post_auth(struct ini_queue *q, const uint8_t proof[RB_QUEUE_AUTH_SIZE]);

struct ini_queue_cfg {
	uint16_t qid;
	uint32_t depth; /* requested */
	uint32_t buf_size;
	uint32_t incapsule; /* requested */
	uint64_t session_id;
	uint32_t handle;
	uint32_t cq_depth; /* if the reactor's CQ is created for this queue */
};
/* Create, register, post receives, connect.  On failure the queue may hold
 * resources: ini_queue_shutdown + ini_queue_free it like a live one. */
int ini_queue_connect(struct ini_queue *q, struct ini_session *s, struct ini_reactor *r,
		      const struct ini_queue_cfg *cfg);
void ini_queue_fail(struct ini_queue *q, const char *why);
void ini_queue_tick(struct ini_queue *q, uint64_t now_ms);
bool ini_queue_waits_for_send(const struct ini_queue *q);
void ini_queue_shutdown(struct ini_queue *q);
bool ini_queue_quiet(const struct ini_queue *q);
/* false: work requests still outstanding, the queue was leaked on purpose. */
bool ini_queue_free(struct ini_queue *q);
bool ini_queue_release_transport(struct ini_queue *q);
/* Fail every command still waiting for an answer, and every slot waiter. */
void ini_queue_fail_inflight(struct ini_queue *q);
/* Recovery (recover.c, all reactors paused): a queue with nothing left on
 * the transport connects again, keeping its memory and slots, and sends
 * its unanswered commands again (a failed attempt is undone by
 * ini_queue_release_transport once the queue is quiet). */
int ini_queue_reconnect(struct ini_queue *q, const struct ini_queue_cfg *cfg);
/* queue.c's part of the set-up: the deferred tasks (on a zeroed queue),
 * the completion handlers (once slots and receives are allocated), one
 * receive posted, and the unanswered commands sent again on a new
 * connection (*n of them; a failed post is logged and returned). */
void ini_queue_init_tasks(struct ini_queue *q);
void ini_queue_init_cqes(struct ini_queue *q);
int ini_queue_post_recv(struct ini_queue *q, struct ini_recv *rv);
int ini_queue_reissue_all(struct ini_queue *q, uint64_t deadline, uint32_t *n);

/* session.c */
void ini_session_queue_died(struct ini_session *s, struct ini_queue *q);
/* Drive every CQ from the calling thread until the queues are quiet. */
void ini_session_wait_quiet(struct ini_session *s, bool admin, uint32_t ms);
/* One attempt: admin queue, CONNECT (the export must be unchanged), every
 * I/O queue with its commands re-issued.  Reactors parked. */
int ini_session_reconnect(struct ini_session *s);

/* recover.c */
int ini_recovery_init(struct ini_session *s);
/* true: recovery is on and now runs (the loss is handled). */
bool ini_recovery_start(struct ini_session *s);
void ini_recovery_fini(struct ini_session *s);

#endif
