/* SPDX-License-Identifier: MIT */
/* ublk frontend internals shared by ublk.c (control) and ublk_io.c (queues). */
#ifndef RB_UBLK_PRIV_H
#define RB_UBLK_PRIV_H

#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "session.h"
#include "ublk.h"
#include "ublk_uapi.h"

/* Longest discard / write-zeroes per command: well inside the command
 * timeout even on a slow target. */
#define UBLK_MAX_DISCARD_BYTES (256u << 20)

enum ublk_tag_state {
	TAG_IDLE, /* no command with the driver (not started yet) */
	TAG_FETCHING, /* FETCH / COMMIT_AND_FETCH with the driver */
	TAG_WAIT_SLOT, /* request in hand, waiting for a slot */
	TAG_IO, /* request in hand, rb_io submitted */
	TAG_REFUSED, /* the driver refused our command twice; request stuck with us */
	TAG_DONE, /* aborted by the driver, or the queue was torn down */
};

struct ublk_queue;

struct ublk_tag {
	struct rb_io io;
	struct rb_slot_waiter w;
	struct ublk_queue *uq;
	struct rb_slot *slot; /* held slot (its buffer is the I/O buffer), or NULL */
	void *addr; /* the buffer the driver has for this tag */
	void *bounce; /* private buffer parked with the driver after a timeout */
	uint16_t tag;
	uint8_t state; /* enum ublk_tag_state */
	uint8_t op; /* UBLK_IO_OP_* of the request in hand */
	uint8_t cmd; /* UBLK_IO_FETCH_REQ or _COMMIT_AND_FETCH_REQ last sent */
	bool retried; /* that command was refused once and sent again */
	uint32_t len; /* its length in bytes */
	int32_t result; /* what the next COMMIT carries */
};

struct ublk_queue {
	struct ublk_dev *d;
	struct ini_queue *q;
	struct ini_reactor *r;
	uint16_t qid; /* ublk queue id (= rdmablk I/O queue index) */
	uint32_t depth;
	uint32_t buf_size;
	struct ublksrv_io_desc *descs; /* mmap'd from /dev/ublkcN, read only */
	size_t descs_len;

	/* reactor thread only */
	struct io_uring ring;
	bool ring_ok;
	bool ring_watched; /* ring fd in the reactor's epoll set */
	struct rb_poll poll;
	struct rb_task submit_task; /* io_uring_submit after a batch */
	unsigned int nr_cmds; /* URING_CMDs with the driver */
	unsigned int nr_done; /* tags in TAG_DONE */
	bool stopped; /* torn down: completions only release slots */
	bool failed; /* the driver refused a command: drain, then close the ring */
	struct rb_task fail_task;
	uint64_t fail_since_ns, last_req_ns; /* failing: since when, last new request */
	int fail_timer_fd; /* failing: waits for quiet; -1 until needed */
	struct rb_poll fail_timer_poll;
	bool logged_dead;

	/* cross-thread: start/stop handshakes with the main thread */
	struct rb_task start_task, stop_task;
	bool start_posted; /* main thread */
	int start_err; /* written by the start task before its ack */

	struct ublk_tag tags[];
};

struct ublk_dev {
	struct ini_session *s;
	const struct rb_export_info *info;
	int ctrl_fd;
	struct io_uring ctrl;
	bool ctrl_ok;
	bool ctrl_stuck; /* gave up waiting on a control command */
	bool legacy; /* kernel without ioctl-encoded commands */
	uint64_t features;
	struct ublksrv_ctrl_dev_info dinfo; /* as the driver returned it */
	struct ublk_params params;
	int dev_id; /* -1 until ADD_DEV succeeded */
	bool started;
	int cdev_fd;
	char cdev[32], bdev[32];
	int event_fd; /* written when every queue ended on its own */
	atomic_uint nr_ended;
	atomic_int failed_qid; /* -1, or the first queue that failed */

	unsigned int nr_queues;
	struct ublk_queue **queues;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int acks; /* start/stop tasks finished; under lock */
};

/* ublk_io.c */
/* Main thread: allocate and map the queue's descriptor array. */
int ublk_queue_alloc(struct ublk_dev *d, unsigned int qid, struct ini_queue *q, uint32_t depth,
		     uint32_t buf_size, struct ublk_queue **out);
/* Main thread, after the stop task ran: the mapping pins /dev/ublkcN. */
void ublk_queue_unmap(struct ublk_queue *uq);
void ublk_queue_free(struct ublk_queue *uq);
/* Tasks, posted to uq->r by the main thread; each acks with ublk_dev_ack. */
void ublk_queue_start_task(struct rb_task *t);
void ublk_queue_stop_task(struct rb_task *t);
/* ublk.c */
void ublk_dev_ack(struct ublk_dev *d);
void ublk_dev_queue_ended(struct ublk_dev *d);
/* Reactor thread: queue qid failed and was torn down; stop serving. */
void ublk_dev_queue_failed(struct ublk_dev *d, unsigned int qid);
uint32_t ublk_io_op(const struct ublk_dev *d, uint32_t op); /* legacy or encoded */

#endif
