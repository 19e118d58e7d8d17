/* SPDX-License-Identifier: MIT */
/*
 * Initiator session layer: the frontend-neutral API.
 *
 * A session is one attached export: an admin queue (qid 0, CONNECT,
 * KEEPALIVE, DISCONNECT) plus N I/O queues (qid 1..N).  Each queue is one
 * transport connection owned by exactly one reactor thread.  Frontends
 * (the NBD server with its sockets and kernel /dev/nbdN, and ublk) sit on
 * top of this header only; it includes the reactor's frontend part
 * (reactor.h).
 *
 * Threading rules
 *   - rb_session_open/start/stop/close and rb_list_exports: main thread.
 *   - Everything taking a struct ini_queue * (slots, submit) and the
 *     rb_reactor_add/mod/del/defer calls: only on the thread of the
 *     reactor that owns the queue (rb_queue_reactor()), i.e. from a
 *     callback the reactor runs: an fd handler, a task, an I/O or slot
 *     completion.  No locks on this path.
 *   - rb_reactor_post: any thread (hands work to a reactor).
 *
 * I/O model
 *   Every queue has `depth` command slots; slot i owns command id i and
 *   a buffer of rb_queue_buf_size() bytes inside the queue's registered
 *   memory (the target RDMA-reads write data from it and RDMA-writes read
 *   data into it), so frontends move data between their socket / kernel
 *   and these buffers directly: no copies.
 *
 *   1. Get slots: rb_queue_slots_get() (all or nothing); on -EAGAIN
 *      park a struct rb_slot_waiter with rb_queue_slots_wait() and stop
 *      consuming input until its callback runs (backpressure).
 *   2. Fill the buffers (WRITE), describe the request in a struct rb_io,
 *      rb_queue_submit().  A request larger than the buffer size is split
 *      by the session into one command per slot: chunk k covers bytes
 *      [k * buf_size, min((k + 1) * buf_size, length)) of the request
 *      and lives in slots[k]->buf.
 *   3. io->done(io, err) runs exactly once, later, on the reactor
 *      thread: err is 0 or a negative errno (target status mapped with
 *      rb_status_errno(); -EIO for a timed out command or a dead queue).
 *   4. Release the slots with rb_queue_slots_put() once their buffers are
 *      no longer needed (e.g. after a READ reply went out).  A slot whose
 *      command timed out stays reserved inside the session until the
 *      target answers or the queue dies -- the target may still RDMA into
 *      the buffer -- so putting it early is always safe.
 *
 *   A queue that dies (transport error, target gone, keep-alive lost)
 *   fails everything outstanding with -EIO promptly and every later
 *   rb_queue_slots_get/submit with -EIO -- unless ctrl_loss_tmo_ms is
 *   set: then the session reconnects and re-issues what was unanswered
 *   (recover.c; a command timeout also starts that, instead of failing
 *   the command), slot requests wait meanwhile (-EAGAIN), and only when it
 *   gives up does the above happen.  Nothing ever waits forever:
 *   commands and slot waits both time out (params.timeout_ms), and once
 *   a command timed out the queue counts as stalled until the target
 *   answers anything again: meanwhile a request that finds no free slot
 *   fails with -EIO at once instead of waiting out another timeout.
 */
#ifndef RB_INI_SESSION_H
#define RB_INI_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "auth.h"
#include "reactor.h"
#include "transport.h"
#include "wire.h"

struct ini_session;
struct ini_queue;

/* ---- session ------------------------------------------------------------ */

struct rb_session_params {
	const struct rb_transport_ops *ops;
	struct rb_transport_opts topts;
	struct rb_endpoint ep;
	char hostid[RB_HOSTID_MAX];
	char export_name[RB_EXPORT_NAME_MAX];
	uint32_t nr_io_queues; /* requested; the target may grant fewer */
	uint32_t queue_depth; /* requested per I/O queue */
	uint32_t timeout_ms; /* per command and per slot wait */
	uint32_t kato_ms; /* keep-alive timeout, 0 = none; KEEPALIVE every kato/2 */
	/* Reconnect (NVMe-oF ctrl_loss_tmo / reconnect_delay): a lost session
	 * is connected again, its unanswered commands re-issued, for up to
	 * ctrl_loss_tmo_ms; 0 = fail I/O at once instead. */
	uint32_t ctrl_loss_tmo_ms;
	uint32_t reconnect_delay_ms; /* between attempts */
	uint32_t nr_reactors; /* 0 = min(I/O queues, online CPUs) */
	uint32_t incapsule; /* in-capsule write bytes to ask for; 0 = default */
	/* Authentication: the host's secret (answers a target that asks) and
	 * the target's (the target must prove itself, before any I/O). */
	bool has_secret, has_target_secret;
	struct rb_auth_key secret, target_secret;
};

/* What CONNECT told us about the export. */
struct rb_export_info {
	char name[RB_EXPORT_NAME_MAX];
	uint64_t size; /* bytes */
	uint32_t block_size; /* offsets/lengths must be multiples */
	uint32_t phys_block_size;
	uint32_t max_transfer; /* target limit per command */
	uint32_t flags; /* RB_EXP_* */
	uint64_t session_id;
	uint32_t nr_io_queues; /* granted */
};

/*
 * Connect the admin queue, CONNECT to the export, connect every I/O queue.
 * Synchronous; no threads run yet.  On failure logs what failed, where and
 * why, and returns -errno (nothing left to free).
 */
int rb_session_open(const struct rb_session_params *p, struct ini_session **out);
/* Start the reactor threads (keep-alive and I/O begin). */
int rb_session_start(struct ini_session *s);
/* Stop and join the reactor threads; frontends must be quiet first. */
void rb_session_stop(struct ini_session *s);
/* Give up a reconnect in progress (shutdown): its I/O fails with EIO and
 * the reactors run again.  Call before draining the frontends. */
void rb_session_cancel_recovery(struct ini_session *s);
/* DISCONNECT (bounded wait), tear down every queue, free.  Callbacks of
 * requests still outstanding run (with -EIO) from inside this call. */
void rb_session_close(struct ini_session *s);

const struct rb_export_info *rb_session_info(const struct ini_session *s);
/* "tcp://HOST:PORT", for messages. */
const char *rb_session_target(const struct ini_session *s);
/* Any thread: a reconnect is in progress (the reactors are parked). */
bool rb_session_recovering(const struct ini_session *s);
unsigned int rb_session_nr_queues(const struct ini_session *s);
/* I/O queue i (0-based; its qid is i + 1). */
struct ini_queue *rb_session_queue(struct ini_session *s, unsigned int i);

/*
 * Discovery: connect an admin queue, LIST_EXPORTS, disconnect.  *out is a
 * malloc'd array of *nr entries (fields still little endian, names NUL
 * terminated); *total is the target's count (> *nr if it did not fit).
 */
int rb_list_exports(const struct rb_session_params *p, struct rb_export_entry **out,
		    uint32_t *nr, uint32_t *total);

/* ---- queues, slots and I/O --------------------------------------------- */

struct rb_io;

struct rb_slot {
	void *buf; /* rb_queue_buf_size() bytes of registered memory */
	uint16_t cid; /* command id (= slot index) */

	/* private to the session layer */
	struct rb_cqe send_cqe;
	struct ini_queue *q;
	struct rb_io *io; /* owner while its command is outstanding */
	uint64_t deadline_ms;
	/* A reconnect re-issues it only before this (its first deadline +
	 * ctrl-loss-tmo), so a target that breaks every session it is given
	 * cannot keep it waiting for ever. */
	uint64_t give_up_ms;
	uint64_t offset; /* command as sent: kept for logs and a later re-issue */
	uint32_t length;
	uint8_t opcode;
	uint8_t flags;
	bool held; /* between slots_get and slots_put */
	bool send_pending; /* capsule SEND not completed */
	bool resp_pending; /* no response yet */
	bool timed_out; /* io already failed; waiting for a late answer */
	bool answered; /* answer kept (ans_*) until the SEND completes */
	uint16_t ans_status;
	uint64_t ans_result;
	bool free; /* on the queue's free stack */
};

struct rb_slot_waiter {
	/* err 0: slots[0..n-1] hold fresh slots; -EIO: queue died; -ETIMEDOUT. */
	void (*fn)(struct rb_slot_waiter *w, int err);
	struct rb_slot **slots; /* room for n */
	unsigned int n;
	/* private */
	uint64_t deadline_ms;
	struct rb_slot_waiter *next;
	bool queued;
};

typedef void (*rb_io_done_fn)(struct rb_io *io, int err);

struct rb_io {
	/* set by the frontend before rb_queue_submit() */
	uint8_t opcode; /* RB_OP_READ, WRITE, FLUSH, WRITE_ZEROES, DISCARD */
	uint8_t flags; /* RB_CMD_F_FUA (WRITE, WRITE_ZEROES) */
	uint64_t offset; /* bytes, multiple of the block size */
	uint32_t length; /* bytes, multiple of the block size; 0 for FLUSH */
	unsigned int nr_slots; /* rb_queue_slots_for(q, opcode, length) */
	struct rb_slot **slots;
	rb_io_done_fn done;
	uint32_t timeout_ms; /* 0 = the session's */
	void *priv; /* frontend's */

	/* set by the session before done() */
	uint16_t status; /* rb_status of the first command that failed, or 0 */
	uint64_t result; /* response result field (admin commands) */

	/* private */
	unsigned int pending;
	int err;
};

uint16_t rb_queue_id(const struct ini_queue *q);
struct ini_reactor *rb_queue_reactor(const struct ini_queue *q);
uint32_t rb_queue_depth(const struct ini_queue *q);
uint32_t rb_queue_buf_size(const struct ini_queue *q);
bool rb_queue_dead(const struct ini_queue *q);
/* Any thread: false once the queue died (a hint for placing new clients). */
bool rb_queue_usable(const struct ini_queue *q);
/* Slots an rb_io needs: one per buf_size chunk for READ/WRITE, else 1. */
unsigned int rb_queue_slots_for(const struct ini_queue *q, uint8_t opcode, uint32_t length);

/* 0; -EAGAIN (not enough free now, or others are waiting first);
 * -EIO (queue dead); -EINVAL (n is 0 or larger than the depth). */
int rb_queue_slots_get(struct ini_queue *q, unsigned int n, struct rb_slot **out);
void rb_queue_slots_put(struct ini_queue *q, unsigned int n, struct rb_slot **slots);
/* Call w->fn once n slots are free (FIFO), the queue dies, or timeout. */
void rb_queue_slots_wait(struct ini_queue *q, struct rb_slot_waiter *w);
/* Withdraw a parked waiter (its callback will not run). */
void rb_queue_slots_cancel(struct ini_queue *q, struct rb_slot_waiter *w);

/* 0: io->done will run exactly once, later.  -EIO/-EINVAL: done will not
 * run; the slots are still the caller's. */
int rb_queue_submit(struct ini_queue *q, struct rb_io *io);

#endif
