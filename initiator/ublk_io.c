/* SPDX-License-Identifier: MIT */
/*
 * ublk queues: one io_uring per ublk hardware queue, owned by the reactor
 * of the matching rdmablk I/O queue (the driver requires every command of
 * a queue to come from one task).  Each tag cycles
 *
 *   FETCH / COMMIT_AND_FETCH (buffer = the tag's slot buffer)
 *     -> request in the descriptor array -> rb_io on the tag's slot
 *     -> done: COMMIT_AND_FETCH with the result (bytes or -errno)
 *
 * The driver copies WRITE data into the buffer before it hands us the
 * request and copies READ data out of it when we commit, so the target's
 * RDMA READ / WRITE works on the very memory the bio data passes through.
 *
 * A command that timed out leaves its slot reserved in the session (the
 * target may still RDMA into it), so the tag gives that slot back and
 * parks a private bounce buffer with the driver instead; its next request
 * takes a fresh slot (copying WRITE data over once) and the tag is back
 * on the zero-copy path.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "checked.h"
#include "clock.h"
#include "log.h"
#include "spin.h"
#include "ublk_priv.h"
#include "uring.h"
#include "wire.h"

static void tag_commit(struct ublk_tag *t, int32_t result);
static void queue_failing(struct ublk_queue *uq);

/* ---- ring ------------------------------------------------------------------ */

static void submit_task(struct rb_task *task)
{
	struct ublk_queue *uq = rb_container_of(task, struct ublk_queue, submit_task);
	int ret;

	if (!uq->ring_ok)
		return;
	ret = io_uring_submit(&uq->ring);
	/* What did not go in stays in the SQ ring for the next submit. */
	if (ret < 0 && ret != -EAGAIN && ret != -EBUSY && ret != -EINTR)
		rb_err("%s: ublk queue %u: io_uring_submit: %s", uq->d->bdev, uq->qid,
		       strerror(-ret));
}

/* Queue one I/O command for tag t; submitted after the current batch. */
static int queue_cmd(struct ublk_queue *uq, struct ublk_tag *t, uint32_t op, int32_t result,
		     void *addr)
{
	struct ublksrv_io_cmd cmd = {
		.q_id = uq->qid,
		.tag = t->tag,
		.result = result,
		.addr = (uint64_t)(uintptr_t)addr,
	};
	struct io_uring_sqe *sqe = io_uring_get_sqe(&uq->ring);

	if (!sqe) {
		/* Cannot happen (one command per tag, SQ >= depth), but be safe. */
		io_uring_submit(&uq->ring);
		sqe = io_uring_get_sqe(&uq->ring);
		if (!sqe)
			return -EBUSY;
	}
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = uq->d->cdev_fd;
	sqe->cmd_op = ublk_io_op(uq->d, op);
	sqe->user_data = t->tag;
	memcpy(sqe->cmd, &cmd, sizeof(cmd));
	uq->nr_cmds++;
	t->cmd = (uint8_t)op;
	t->state = TAG_FETCHING;
	rb_reactor_defer(uq->r, &uq->submit_task);
	return 0;
}

/* ---- I/O path ------------------------------------------------------------------ */

static bool op_has_data(uint8_t op)
{
	return op == UBLK_IO_OP_READ || op == UBLK_IO_OP_WRITE;
}

static void tag_io_done(struct rb_io *io, int err)
{
	struct ublk_tag *t = rb_container_of(io, struct ublk_tag, io);
	struct ublk_queue *uq = t->uq;

	if (uq->stopped) {
		/* Torn down (late completion from rb_session_close). */
		rb_queue_slots_put(uq->q, 1, &t->slot);
		t->slot = NULL;
		t->state = TAG_DONE;
		return;
	}
	if (err && !io->status && !rb_queue_dead(uq->q)) {
		/* Timed out: the slot stays reserved in the session and the target
		 * may still write into it, so it must not go back to the driver. */
		void *old = t->slot->buf;

		rb_queue_slots_put(uq->q, 1, &t->slot);
		t->slot = NULL;
		if (!t->bounce && posix_memalign(&t->bounce, 4096, uq->buf_size)) {
			t->bounce = NULL;
			rb_warn("%s: ublk queue %u tag %u: no memory for a bounce buffer; parking "
				"the timed-out slot's buffer",
				uq->d->bdev, uq->qid, t->tag);
		}
		t->addr = t->bounce ? t->bounce : old;
	}
	tag_commit(t, err ? err : op_has_data(t->op) ? (int32_t)t->len : 0);
}

static void tag_submit(struct ublk_tag *t)
{
	struct ublk_queue *uq = t->uq;
	int ret;

	t->state = TAG_IO;
	ret = rb_queue_submit(uq->q, &t->io);
	if (ret) {
		if (!uq->logged_dead) {
			uq->logged_dead = true;
			rb_warn("%s: ublk queue %u: I/O queue %u unusable (%s); failing its I/O",
				uq->d->bdev, uq->qid, rb_queue_id(uq->q), strerror(-ret));
		}
		tag_commit(t, ret);
	}
}

static void tag_got_slot(struct ublk_tag *t)
{
	/* Only after a timeout: the driver put the WRITE data in the bounce buffer. */
	if (t->op == UBLK_IO_OP_WRITE && t->addr != t->slot->buf)
		memcpy(t->slot->buf, t->addr, t->len);
	tag_submit(t);
}

static void tag_slot_ready(struct rb_slot_waiter *w, int err)
{
	struct ublk_tag *t = rb_container_of(w, struct ublk_tag, w);

	if (t->uq->stopped) {
		if (!err)
			rb_queue_slots_put(t->uq->q, 1, &t->slot);
		t->slot = NULL;
		t->state = TAG_DONE;
		return;
	}
	if (err) {
		t->slot = NULL;
		tag_commit(t, -EIO);
		return;
	}
	if (t->uq->failed) {
		tag_commit(t, -EIO);
		return;
	}
	tag_got_slot(t);
}

static void tag_need_slot(struct ublk_tag *t)
{
	struct ublk_queue *uq = t->uq;
	int ret = rb_queue_slots_get(uq->q, 1, &t->slot);

	if (ret == -EAGAIN) {
		t->slot = NULL;
		t->w = (struct rb_slot_waiter){ .fn = tag_slot_ready, .slots = &t->slot, .n = 1 };
		t->state = TAG_WAIT_SLOT;
		rb_queue_slots_wait(uq->q, &t->w);
		return;
	}
	if (ret) {
		t->slot = NULL;
		tag_commit(t, -EIO);
		return;
	}
	tag_got_slot(t);
}

/* A request arrived on tag t: describe it as an rb_io. */
static void tag_request(struct ublk_tag *t)
{
	struct ublk_queue *uq = t->uq;
	const struct ublksrv_io_desc *iod = &uq->descs[t->tag];
	uint32_t op_flags = __atomic_load_n(&iod->op_flags, __ATOMIC_ACQUIRE);
	uint64_t off = iod->start_sector << 9, len = (uint64_t)iod->nr_sectors << 9;
	uint8_t op = (uint8_t)(op_flags & 0xff);
	bool fua = op_flags & UBLK_IO_F_FUA;

	memset(&t->io, 0, sizeof(t->io));
	t->op = op;
	t->len = 0;
	switch (op) {
	case UBLK_IO_OP_READ: t->io.opcode = RB_OP_READ; break;
	case UBLK_IO_OP_WRITE:
		t->io.opcode = RB_OP_WRITE;
		t->io.flags = fua ? RB_CMD_F_FUA : 0;
		break;
	case UBLK_IO_OP_FLUSH:
		t->io.opcode = RB_OP_FLUSH;
		off = len = 0;
		break;
	case UBLK_IO_OP_DISCARD: t->io.opcode = RB_OP_DISCARD; break;
	case UBLK_IO_OP_WRITE_ZEROES:
		t->io.opcode = RB_OP_WRITE_ZEROES;
		t->io.flags = fua ? RB_CMD_F_FUA : 0;
		/* REQ_NOUNMAP (fallocate -z, BLKZEROOUT): keep the range allocated;
		 * write-zeroes is only advertised when the target takes NO_HOLE. */
		if (op_flags & UBLK_IO_F_NOUNMAP)
			t->io.flags |= RB_CMD_F_NO_HOLE;
		break;
	default:
		rb_dbg("%s: ublk queue %u tag %u: op %u not supported", uq->d->bdev, uq->qid,
		       t->tag, op);
		tag_commit(t, -EOPNOTSUPP);
		return;
	}
	if ((op_has_data(op) && (len == 0 || len > uq->buf_size)) || len > UINT32_MAX) {
		rb_err("%s: ublk queue %u tag %u: op %u of %" PRIu64 " bytes exceeds the %u-byte "
		       "buffer",
		       uq->d->bdev, uq->qid, t->tag, op, len, uq->buf_size);
		tag_commit(t, -EIO);
		return;
	}
	t->len = (uint32_t)len;
	t->io.offset = off;
	t->io.length = (uint32_t)len;
	t->io.nr_slots = 1;
	t->io.slots = &t->slot;
	t->io.done = tag_io_done;
	t->io.priv = t;
	if (t->slot)
		tag_submit(t);
	else
		tag_need_slot(t);
}

static void tag_commit(struct ublk_tag *t, int32_t result)
{
	struct ublk_queue *uq = t->uq;
	int ret;

	/* READ data is in the slot; the driver copies it out of addr. */
	if (t->slot)
		t->addr = t->slot->buf;
	t->result = result;
	ret = queue_cmd(uq, t, UBLK_IO_COMMIT_AND_FETCH_REQ, result, t->addr);
	if (ret) {
		rb_err("%s: ublk queue %u tag %u: cannot queue COMMIT_AND_FETCH: %s; stopping "
		       "the device",
		       uq->d->bdev, uq->qid, t->tag, strerror(-ret));
		t->state = TAG_REFUSED;
		queue_failing(uq);
	}
	/* A failing queue waits for its last I/O before the ring goes. */
	if (uq->failed)
		rb_reactor_defer(uq->r, &uq->fail_task);
}

static void tag_end(struct ublk_tag *t)
{
	struct ublk_queue *uq = t->uq;

	if (t->state == TAG_DONE)
		return;
	t->state = TAG_DONE;
	if (++uq->nr_done == uq->depth && !uq->stopped)
		ublk_dev_queue_ended(uq->d);
}

static const char *cmd_name(uint8_t cmd)
{
	return cmd == UBLK_IO_FETCH_REQ ? "FETCH_REQ" : "COMMIT_AND_FETCH_REQ";
}

static void handle_cqe(struct ublk_queue *uq, uint64_t user_data, int res)
{
	struct ublk_tag *t;

	if (user_data >= uq->depth) {
		rb_err("%s: ublk queue %u: completion for unknown tag %" PRIu64 "; stopping the "
		       "device",
		       uq->d->bdev, uq->qid, user_data);
		queue_failing(uq);
		return;
	}
	t = &uq->tags[user_data];
	uq->nr_cmds--;
	if (res == UBLK_IO_RES_OK) {
		t->retried = false;
		if (uq->failed) {
			uq->last_req_ns = rb_clock_ns();
			tag_commit(t, -EIO);
		} else {
			tag_request(t);
		}
		return;
	}
	if (res == UBLK_IO_RES_ABORT) { /* the device is going away */
		tag_end(t);
		return;
	}
	/*
	 * The driver refused the command (a bug, ours or a driver we do not
	 * understand) and changed nothing: the request a refused COMMIT
	 * carried is still ours.  Send it once more; if that fails too, the
	 * queue cannot go on.
	 */
	if (!t->retried) {
		rb_warn("%s: ublk queue %u tag %u: %s refused: %s; sending it again", uq->d->bdev,
			uq->qid, t->tag, cmd_name(t->cmd),
			res < 0 ? strerror(-res) : "unexpected result");
		t->retried = true;
		if (queue_cmd(uq, t, t->cmd, t->result, t->addr) == 0)
			return;
	}
	rb_err("%s: ublk queue %u tag %u: %s refused again: %s; stopping the device",
	       uq->d->bdev, uq->qid, t->tag, cmd_name(t->cmd),
	       res < 0 ? strerror(-res) : "unexpected result");
	t->state = TAG_REFUSED;
	queue_failing(uq);
}

static void on_ring(struct rb_poll *p, uint32_t events)
{
	struct ublk_queue *uq = rb_container_of(p, struct ublk_queue, poll);
	struct io_uring_cqe *cqe;
	unsigned int head, n = 0;

	if (!uq->ring_ok)
		return;
	io_uring_for_each_cqe(&uq->ring, head, cqe)
	{
		handle_cqe(uq, cqe->user_data, cqe->res);
		n++;
	}
	io_uring_cq_advance(&uq->ring, n);
}

/* ---- start and stop (reactor thread) ---------------------------------------------- */

void ublk_queue_start_task(struct rb_task *task)
{
	struct ublk_queue *uq = rb_container_of(task, struct ublk_queue, start_task);
	struct rb_slot **slots = NULL;
	const char *what;
	int ret;

	what = "io_uring_queue_init";
	ret = rb_uring_init(uq->depth, &uq->ring);
	if (ret)
		goto out_fail;
	uq->ring_ok = true;
	/* The ring fd itself is readable while CQEs wait: no eventfd to read
	 * on every wakeup. */
	what = "watch the ring";
	ret = rb_reactor_add(uq->r, uq->ring.ring_fd, EPOLLIN, &uq->poll);
	if (ret)
		goto out_fail;
	uq->ring_watched = true;

	what = "take the queue's slots";
	slots = calloc(uq->depth, sizeof(*slots));
	if (!slots) {
		ret = -ENOMEM;
		goto out_fail;
	}
	ret = rb_queue_slots_get(uq->q, uq->depth, slots);
	if (ret)
		goto out_fail;
	for (uint32_t i = 0; i < uq->depth; i++) {
		struct ublk_tag *t = &uq->tags[i];

		t->slot = slots[i];
		t->addr = t->slot->buf;
	}
	what = "queue FETCH_REQ";
	for (uint32_t i = 0; i < uq->depth; i++) {
		ret = queue_cmd(uq, &uq->tags[i], UBLK_IO_FETCH_REQ, 0, uq->tags[i].addr);
		if (ret)
			goto out_fail;
	}
	/* Now, not after the batch: START_DEV waits for every tag's FETCH. */
	what = "submit FETCH_REQ";
	ret = io_uring_submit(&uq->ring);
	if (ret >= 0 && (uint32_t)ret != uq->depth)
		ret = -EAGAIN;
	if (ret < 0)
		goto out_fail;
	ret = 0;
	goto out_ack;

out_fail:
	rb_err("%s: ublk queue %u (I/O queue %u, reactor %d): %s: %s", uq->d->cdev, uq->qid,
	       rb_queue_id(uq->q), rb_reactor_id(uq->r), what, strerror(-ret));
out_ack:
	free(slots);
	uq->start_err = ret;
	ublk_dev_ack(uq->d);
}

/* A tag waiting for a slot stops waiting (it holds none). */
static void tag_cancel_wait(struct ublk_tag *t)
{
	rb_queue_slots_cancel(t->uq->q, &t->w);
	t->slot = NULL;
}

/*
 * Closing the ring cancels the tags' commands: the driver answers
 * requests we have not taken yet with an error, and fails those we hold
 * when the device stops.  Tags with an rb_io out release their slot in
 * tag_io_done.
 */
static void queue_teardown(struct ublk_queue *uq)
{
	uq->stopped = true;
	if (uq->fail_timer_fd >= 0) {
		rb_reactor_del(uq->r, uq->fail_timer_fd);
		close(uq->fail_timer_fd);
		uq->fail_timer_fd = -1;
	}
	if (uq->ring_watched)
		rb_reactor_del(uq->r, uq->ring.ring_fd);
	uq->ring_watched = false;
	/* The ring goes first: with it the driver's last hold on our buffers
	 * (it copies only in this thread's context, on this ring's commands). */
	if (uq->ring_ok)
		io_uring_queue_exit(&uq->ring);
	uq->ring_ok = false;
	for (uint32_t i = 0; i < uq->depth; i++) {
		struct ublk_tag *t = &uq->tags[i];

		if (t->state == TAG_WAIT_SLOT)
			tag_cancel_wait(t);
		if (t->state != TAG_IO) {
			if (t->slot)
				rb_queue_slots_put(uq->q, 1, &t->slot);
			t->slot = NULL;
			t->state = TAG_DONE;
		}
	}
}

/*
 * The driver refused one of our commands: the queue cannot go on, and
 * only the driver can fail the request a refused COMMIT leaves with us.
 * It does when the ring closes with at least one of the queue's commands
 * still pending (it cancels them, fails every request the queue holds with
 * EIO and stops the device).  So first bring every tag back to the driver:
 * new requests are answered EIO at once, I/O in flight commits its result
 * (bounded by the command timeout).  Then wait for the queue to go quiet
 * (the EIOs stop most writers): Linux 6.12 can hand a request to a command
 * it is cancelling, and that request would never end.  Then close the ring.
 * The main thread hears of it and exits non-zero.
 */
#define FAIL_QUIET_NS (100 * 1000000ull) /* no new request for this long */
#define FAIL_WAIT_NS (5000 * 1000000ull) /* but close after this at the latest */

static void queue_failing(struct ublk_queue *uq)
{
	if (!uq->failed)
		uq->fail_since_ns = uq->last_req_ns = rb_clock_ns();
	uq->failed = true;
	rb_reactor_defer(uq->r, &uq->fail_task);
}

static void on_fail_timer(struct rb_poll *p, uint32_t events)
{
	struct ublk_queue *uq = rb_container_of(p, struct ublk_queue, fail_timer_poll);
	uint64_t v;

	if (read(uq->fail_timer_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		rb_err("%s: ublk queue %u: timer read: %s", uq->d->bdev, uq->qid,
		       strerror(errno));
	rb_reactor_defer(uq->r, &uq->fail_task);
}

/* Run fail_task again in ns nanoseconds; false if no timer can be had. */
static bool fail_again_in(struct ublk_queue *uq, uint64_t ns)
{
	struct itimerspec its = { .it_value = { (time_t)(ns / 1000000000u),
						(long)(ns % 1000000000u) } };

	if (uq->fail_timer_fd < 0) {
		uq->fail_timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (uq->fail_timer_fd < 0)
			goto out_err;
		if (rb_reactor_add(uq->r, uq->fail_timer_fd, EPOLLIN, &uq->fail_timer_poll)) {
			close(uq->fail_timer_fd);
			uq->fail_timer_fd = -1;
			goto out_err;
		}
	}
	if (timerfd_settime(uq->fail_timer_fd, 0, &its, NULL) == 0)
		return true;
out_err:
	rb_warn("%s: ublk queue %u: no timer to wait for quiet (%s); closing now", uq->d->bdev,
		uq->qid, strerror(errno));
	return false;
}

static void fail_task(struct rb_task *task)
{
	struct ublk_queue *uq = rb_container_of(task, struct ublk_queue, fail_task);
	unsigned int refused = 0;
	uint64_t now;

	if (uq->stopped)
		return;
	for (uint32_t i = 0; i < uq->depth; i++) {
		struct ublk_tag *t = &uq->tags[i];

		if (t->state == TAG_WAIT_SLOT) {
			tag_cancel_wait(t);
			tag_commit(t, -EIO);
		}
		if (t->state == TAG_IO)
			return; /* tag_commit brings us back */
		refused += t->state == TAG_REFUSED;
	}
	/* Requests the driver handed us meanwhile are answered too (EIO), and
	 * the commits queued must reach the driver before the ring goes. */
	on_ring(&uq->poll, 0);
	io_uring_submit(&uq->ring);
	now = rb_clock_ns();
	if (now - uq->fail_since_ns < FAIL_WAIT_NS && now - uq->last_req_ns < FAIL_QUIET_NS &&
	    fail_again_in(uq, uq->last_req_ns + FAIL_QUIET_NS - now))
		return;
	if (uq->nr_cmds == 0)
		rb_err("%s: ublk queue %u: no command left with the driver to cancel; its %u "
		       "refused request(s) fail only when this process exits",
		       uq->d->bdev, uq->qid, refused);
	queue_teardown(uq);
	ublk_dev_queue_failed(uq->d, uq->qid);
}

void ublk_queue_stop_task(struct rb_task *task)
{
	struct ublk_queue *uq = rb_container_of(task, struct ublk_queue, stop_task);

	queue_teardown(uq);
	ublk_dev_ack(uq->d);
}

/* ---- setup (main thread) -------------------------------------------------------- */

int ublk_queue_alloc(struct ublk_dev *d, unsigned int qid, struct ini_queue *q, uint32_t depth,
		     uint32_t buf_size, struct ublk_queue **out)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = (size_t)depth * sizeof(struct ublksrv_io_desc);
	off_t off = UBLKSRV_CMD_BUF_OFFSET +
		    (off_t)qid * (off_t)(UBLK_MAX_QUEUE_DEPTH * sizeof(struct ublksrv_io_desc));
	struct ublk_queue *uq;
	int ret;

	uq = calloc(1, sizeof(*uq) + (size_t)depth * sizeof(struct ublk_tag));
	if (!uq)
		return -ENOMEM;
	uq->d = d;
	uq->q = q;
	uq->r = rb_queue_reactor(q);
	uq->qid = (uint16_t)qid;
	uq->depth = depth;
	uq->buf_size = buf_size;
	uq->poll.fn = on_ring;
	uq->submit_task.fn = submit_task;
	/* Commands go to the driver from this queue's reactor thread only. */
	uq->submit_task.owner_only = true;
	uq->start_task.fn = ublk_queue_start_task;
	uq->start_task.owner_only = true; /* its FETCHes make this thread the daemon */
	uq->stop_task.fn = ublk_queue_stop_task;
	uq->fail_task.fn = fail_task;
	uq->fail_task.owner_only = true; /* it submits, then closes the ring */
	uq->fail_timer_poll.fn = on_fail_timer;
	uq->fail_timer_fd = -1;
	for (uint32_t i = 0; i < depth; i++) {
		uq->tags[i].uq = uq;
		uq->tags[i].tag = (uint16_t)i;
		uq->tags[i].state = TAG_IDLE;
	}
	/* The driver wants exactly the queue's descriptors, page rounded. */
	uq->descs_len = (len + page - 1) / page * page;
	uq->descs = mmap(NULL, uq->descs_len, PROT_READ, MAP_SHARED | MAP_POPULATE, d->cdev_fd,
			 off);
	if (uq->descs == MAP_FAILED) {
		ret = -errno;
		rb_err("%s: map the descriptors of queue %u (%zu bytes at %lld): %s", d->cdev, qid,
		       uq->descs_len, (long long)off, strerror(errno));
		uq->descs = NULL;
		free(uq);
		return ret;
	}
	*out = uq;
	return 0;
}

void ublk_queue_unmap(struct ublk_queue *uq)
{
	if (uq->descs)
		munmap(uq->descs, uq->descs_len);
	uq->descs = NULL;
}

void ublk_queue_free(struct ublk_queue *uq)
{
	if (!uq)
		return;
	ublk_queue_unmap(uq);
	for (uint32_t i = 0; i < uq->depth; i++)
		free(uq->tags[i].bounce);
	free(uq);
}
