/* SPDX-License-Identifier: MIT */
/*
 * Reactor threads.  Each owns its io_uring, its buffer pools, one
 * completion queue per transport domain, and the queues (connections)
 * handed to it.  Nothing here is shared with other reactors except the
 * inbox (control path, mutex) and the session and export tables (control
 * path, session.c and exports.c).
 */
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "checked.h"
#include "log.h"
#include "target.h"
#include "thread.h"
#include "uring.h"

#define RING_ENTRIES 256
#define CQE_BATCH 64
#define DRAIN_TIMEOUT_NS (10ull * 1000000000ull)

/* epoll data tags: small integers; CQ contexts are 16 + index. */
enum { EV_WAKE = 1, EV_RING = 2, EV_TIMER = 3, EV_CQ_BASE = 16 };

struct io_uring_sqe *tgt_reactor_get_sqe(struct tgt_reactor *r)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);

	if (!sqe) {
		/* SQ full: push what we have, then try once more. */
		if (io_uring_submit(&r->ring) >= 0)
			r->sq_pending = 0;
		sqe = io_uring_get_sqe(&r->ring);
	}
	if (sqe)
		r->sq_pending++;
	return sqe;
}

static int add_fd(struct tgt_reactor *r, int fd, uint64_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };

	if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	return 0;
}

/*
 * Find or create the CQ context for a transport domain (lazy per device).
 * Slots of released contexts (cq == NULL) are reused; a slot's epoll tag
 * is its index.
 */
static struct tgt_cqctx *cqctx_get(struct tgt_reactor *r, const struct rb_transport_ops *ops,
				   struct rb_domain *d)
{
	struct tgt_cqctx *cx = NULL;
	int ret, slot = r->nr_cqctx;

	for (int i = 0; i < r->nr_cqctx; i++) {
		if (!r->cqctx[i].cq) {
			if (slot == r->nr_cqctx)
				slot = i;
		} else if (r->cqctx[i].ops == ops && r->cqctx[i].domain == d) {
			return &r->cqctx[i];
		}
	}
	if (slot == (int)RB_ARRAY_SIZE(r->cqctx))
		return NULL;
	cx = &r->cqctx[slot];
	memset(cx, 0, sizeof(*cx));
	cx->ops = ops;
	cx->domain = d;
	/* Local access only: target memory is never remotely accessible. */
	ret = ops->reg_mr(d, r->pool.base, r->pool.slab_size, RB_ACCESS_LOCAL, &cx->pool_mr);
	if (ret)
		goto out_err;
	ret = ops->reg_mr(d, r->incap.base, r->incap.slab_size, RB_ACCESS_LOCAL, &cx->incap_mr);
	if (ret)
		goto out_dereg_pool;
	ret = ops->cq_create(d, 4096, &cx->cq);
	if (ret)
		goto out_dereg_incap;
	ret = add_fd(r, ops->cq_fd(cx->cq), EV_CQ_BASE + (uint64_t)slot);
	if (ret)
		goto out_destroy_cq;
	ops->cq_arm(cx->cq);
	if (slot == r->nr_cqctx)
		r->nr_cqctx++;
	return cx;

out_destroy_cq:
	ops->cq_destroy(cx->cq);
	cx->cq = NULL;
out_dereg_incap:
	ops->dereg_mr(cx->incap_mr);
out_dereg_pool:
	ops->dereg_mr(cx->pool_mr);
out_err:
	rb_err("reactor %d: cannot set up %s domain: %s%s", r->id, ops->name, strerror(-ret),
	       ret == -ENOMEM || ret == -EPERM ? " (raise the memlock limit: ulimit -l, or "
						 "LimitMEMLOCK=infinity in the unit)" :
						 "");
	return NULL;
}

/* Pairs with cqctx_get: no queue may use cx any more. */
static void cqctx_put(struct tgt_reactor *r, struct tgt_cqctx *cx)
{
	if (epoll_ctl(r->epfd, EPOLL_CTL_DEL, cx->ops->cq_fd(cx->cq), NULL) < 0)
		rb_err("reactor %d: epoll_ctl del: %s", r->id, strerror(errno));
	cx->ops->cq_destroy(cx->cq);
	cx->ops->dereg_mr(cx->incap_mr);
	cx->ops->dereg_mr(cx->pool_mr);
	memset(cx, 0, sizeof(*cx));
}

/*
 * A removed device is released as soon as no queue uses it: the kernel's
 * removal waits until every process lets go of the device.  Runs between
 * rounds, never inside a CQ's drain.
 */
static void release_lost_domains(struct tgt_reactor *r)
{
	for (int i = 0; i < r->nr_cqctx; i++) {
		struct tgt_cqctx *cx = &r->cqctx[i];
		const struct tgt_queue *q = r->queues;

		if (!cx->cq || !cx->ops->domain_lost(cx->domain))
			continue;
		while (q && q->cx != cx)
			q = q->next;
		if (q)
			continue;
		rb_info("reactor %d: releasing %s completion queue and buffer registrations on a "
			"removed device",
			r->id, cx->ops->name);
		cqctx_put(r, cx);
	}
}

static void handle_inbox(struct tgt_reactor *r)
{
	struct tgt_conn_msg *m;

	pthread_mutex_lock(&r->inbox_lock);
	m = r->inbox;
	r->inbox = NULL;
	pthread_mutex_unlock(&r->inbox_lock);

	while (m) {
		struct tgt_conn_msg *next = m->next;

		/* It accepts or rejects the request, and logs why not. */
		tgt_queue_create(r, m, cqctx_get(r, m->ops, m->ops->conn_domain(m->conn)));
		free(m);
		m = next;
	}
}

void tgt_reactor_post_conn(struct tgt_reactor *r, struct tgt_conn_msg *m)
{
	uint64_t one = 1;

	pthread_mutex_lock(&r->inbox_lock);
	m->next = r->inbox;
	r->inbox = m;
	pthread_mutex_unlock(&r->inbox_lock);
	if (write(r->wake_fd, &one, sizeof(one)) < 0)
		rb_err("reactor %d: wake: %s", r->id, strerror(errno));
}

static int drain_cq(struct tgt_reactor *r, struct tgt_cqctx *cx)
{
	int n = rb_cq_drain(cx->ops, cx->cq);

	if (n < 0)
		rb_fatal("reactor %d: %s cq poll: %s", r->id, cx->ops->name, strerror(-n));
	return n;
}

static int drain_ring(struct tgt_reactor *r)
{
	struct io_uring_cqe *cqes[CQE_BATCH];
	unsigned int n, total = 0;

	do {
		n = io_uring_peek_batch_cqe(&r->ring, cqes, CQE_BATCH);
		for (unsigned int i = 0; i < n; i++) {
			uint64_t ud = cqes[i]->user_data;
			int res = cqes[i]->res;

			io_uring_cqe_seen(&r->ring, cqes[i]);
			if ((ud & TGT_UD_KIND_MASK) == TGT_UD_REQ)
				tgt_req_io_done(
					(struct tgt_req *)(uintptr_t)(ud & ~(uint64_t)TGT_UD_KIND_MASK),
					res);
		}
		total += n;
	} while (n == CQE_BATCH);
	return (int)total;
}

/*
 * A failed submit (EAGAIN, EBUSY with the CQ overflowing, EINTR) leaves the
 * SQEs in the ring: they stay pending, so the next round submits them again
 * and the loop does not sleep before it has (liburing returns -errno).
 */
static void submit_ring(struct tgt_reactor *r)
{
	int ret;

	if (!r->sq_pending)
		return;
	ret = io_uring_submit(&r->ring);
	if (ret >= 0) {
		r->sq_pending = 0;
		r->submit_failing = false;
		return;
	}
	if (!r->submit_failing && ret != -EINTR)
		rb_err("reactor %d: io_uring_submit of %u requests: %s; retrying", r->id,
		       r->sq_pending, strerror(-ret));
	r->submit_failing = true;
}

/*
 * Drain both completion sources, then submit what that produced and drain
 * the ring again while that yields new SQEs (bounded).  A read served from
 * the page cache completes inside io_uring_submit, so its data and response
 * are posted in this same round: they leave with the round's other posts
 * in one write and carry the acknowledgement of the command, instead of a
 * separate ACK now and the response one wakeup later.
 */
static int reactor_round(struct tgt_reactor *r)
{
	int work = drain_ring(r);

	for (int i = 0; i < r->nr_cqctx; i++) {
		int n = r->cqctx[i].cq ? drain_cq(r, &r->cqctx[i]) : 0;

		if (n > 0)
			work += n;
	}
	tgt_req_kick_pending(r);
	for (int pass = 0; pass < 8 && r->sq_pending; pass++) {
		submit_ring(r);
		work += drain_ring(r);
		tgt_req_kick_pending(r);
	}
	/* A bounded round may leave SQEs: they go out before the next wait. */
	submit_ring(r);
	return work;
}

/*
 * The ring's eventfd wakes a sleeping reactor.  While it is awake (and
 * drains the ring itself, inline completions included) the signal would
 * only cost a spurious wakeup, so it is off between waits.  Turning it
 * back on races with a completion posted meanwhile: look at the CQ after
 * a full fence (the kernel has one between posting and the flag check).
 */
static bool ring_notify(struct tgt_reactor *r, bool on)
{
	if (io_uring_cq_eventfd_toggle(&r->ring, on) < 0)
		return false; /* old kernel: always on, which is correct */
	if (!on)
		return false;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return io_uring_cq_ready(&r->ring) > 0;
}

static void on_timer(struct tgt_reactor *r)
{
	uint64_t now = rb_clock_ns();
	struct tgt_queue *q, *next;

	r->tick++;
	r->ack_overdue = false;
	for (q = r->queues; q; q = next) {
		next = q->next;
		/* Before the keep-alive check, which may free q.  A queue failed
		 * here still has the overdue WR: its flush completion frees it. */
		if (tgt_queue_check_transfers(q))
			r->ack_overdue = true;
		if (q->session && atomic_load(&q->session->dead) && !q->dead)
			tgt_queue_fail(q, "session ended");
		else if (q->qid == 0)
			tgt_admin_check_keepalive(q, now);
		else
			tgt_queue_check_auth(q, now);
	}
	/* A device may also be found gone by a rescan, with no queue on it. */
	release_lost_domains(r);
	/* Queues closed: their small allocations (the queue, the transport's
	 * connection) sit in this thread's arena among live ones, which keeps
	 * free pages resident; hand them back, at most once a tick. */
	if (r->trim_pending) {
		r->trim_pending = false;
		malloc_trim(0);
	}
}

/*
 * May the reactor sleep through completions of its own SENDs and WRITEs?
 * Not while something waits for one: a data buffer (a read's is freed when
 * its response SEND completes), a request slot for a parked command, the
 * response to a DISCONNECT, the drain at shutdown, or a request that has
 * waited over a tick (tcp then asks the host for its lazy acks).
 */
static bool reactor_quiet(const struct tgt_reactor *r, bool stop_seen)
{
	if (stop_seen || r->pool_waiting || r->ack_overdue)
		return false;
	for (const struct tgt_queue *q = r->queues; q; q = q->next)
		if (!rb_fifo_empty(&q->parked) || q->disconnect_requested)
			return false;
	return true;
}

static void reactor_loop(struct tgt_reactor *r)
{
	struct epoll_event evs[16];
	bool stop_seen = false;
	uint64_t drain_deadline = 0;

	for (;;) {
		int timeout = 1000, n, werr, work = 0;
		bool quiet;

		/* Draining, or a CONNECT waiting for its predecessor: look every 10 ms. */
		if (rb_spin_wait_polls(&r->spin))
			timeout = 0;
		else if (stop_seen || r->nr_replacing)
			timeout = 10;

		submit_ring(r);
		if (r->sq_pending && timeout > 1)
			timeout = 1;
		/* Everything this round posted goes out now, in one go per conn. */
		for (int i = 0; i < r->nr_cqctx; i++)
			if (r->cqctx[i].cq)
				r->cqctx[i].ops->cq_cork(r->cqctx[i].cq, false);
		if (stop_seen && !r->queues)
			break;
		quiet = reactor_quiet(r, stop_seen);
		for (int i = 0; i < r->nr_cqctx; i++)
			if (r->cqctx[i].cq &&
			    r->cqctx[i].ops->cq_prepare_wait(r->cqctx[i].cq, quiet) > 0)
				timeout = 0;
		if (ring_notify(r, true))
			timeout = 0;
		n = epoll_wait(r->epfd, evs, (int)RB_ARRAY_SIZE(evs), timeout);
		werr = n < 0 ? errno : 0;
		ring_notify(r, false);
		for (int i = 0; i < r->nr_cqctx; i++)
			if (r->cqctx[i].cq)
				r->cqctx[i].ops->cq_cork(r->cqctx[i].cq, true);
		/* EBADF, EFAULT, EINVAL: a bug.  Leaving the loop would hang
		 * every connection on this reactor. */
		if (n < 0 && werr != EINTR)
			rb_fatal("reactor %d: epoll_wait: %s", r->id, strerror(werr));
		for (int i = 0; i < n; i++) {
			uint64_t tag = evs[i].data.u64, v;

			if (tag == EV_WAKE) {
				if (read(r->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					rb_err("reactor %d: wake read: %s", r->id, strerror(errno));
				handle_inbox(r);
			} else if (tag == EV_RING) {
				if (read(r->ring_efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					rb_err("reactor %d: ring eventfd: %s", r->id,
					       strerror(errno));
			} else if (tag == EV_TIMER) {
				if (read(r->timer_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					rb_err("reactor %d: timer: %s", r->id, strerror(errno));
				on_timer(r);
			} else {
				struct tgt_cqctx *cx = &r->cqctx[tag - EV_CQ_BASE];

				/* get event -> re-arm -> drain (rping order) */
				cx->ops->cq_arm(cx->cq);
			}
		}
		work += reactor_round(r);
		if (r->nr_replacing)
			tgt_admin_poll_replacing(r, rb_clock_ns());
		if (r->queue_gone) {
			r->queue_gone = false;
			release_lost_domains(r);
		}
		if (atomic_load(&r->stopping)) {
			if (!stop_seen)
				drain_deadline = rb_clock_ns() + DRAIN_TIMEOUT_NS;
			stop_seen = true;
			/* Let in-flight commands finish, then close (bounded). */
			tgt_queue_drain(r, rb_clock_ns() > drain_deadline);
		}
		rb_spin_note(&r->spin, n > 0 || work > 0, r->arrivals);
		r->arrivals = 0;
	}
}

static void *reactor_main(void *arg)
{
	struct tgt_reactor *r = arg;

	reactor_loop(r);
	return NULL;
}

static int setup_ring(struct tgt_reactor *r)
{
	struct iovec iov[3] = {
		[TGT_BUF_POOL] = { .iov_base = r->pool.base, .iov_len = r->pool.slab_size },
		[TGT_BUF_INCAP] = { .iov_base = r->incap.base, .iov_len = r->incap.slab_size },
		[TGT_BUF_ZEROES] = { .iov_base = r->zeroes, .iov_len = TGT_ZERO_BUF_SIZE },
	};
	int ret;

	ret = rb_uring_init(RING_ENTRIES, &r->ring);
	if (ret < 0) {
		rb_err("reactor %d: io_uring_queue_init: %s", r->id, strerror(-ret));
		return ret;
	}
	/* Fixed buffers: data pool, in-capsule pool, zeroes (TGT_BUF_*). */
	ret = io_uring_register_buffers(&r->ring, iov, 3);
	if (ret < 0) {
		rb_err("reactor %d: io_uring_register_buffers (%zu bytes): %s%s", r->id,
		       r->pool.slab_size + r->incap.slab_size + TGT_ZERO_BUF_SIZE, strerror(-ret),
		       ret == -ENOMEM ? " (raise the memlock limit: ulimit -l)" : "");
		goto out_exit_ring;
	}
	ret = io_uring_register_eventfd(&r->ring, r->ring_efd);
	if (ret < 0) {
		rb_err("reactor %d: io_uring_register_eventfd: %s", r->id, strerror(-ret));
		goto out_unregister;
	}
	return 0;

out_unregister:
	io_uring_unregister_buffers(&r->ring);
out_exit_ring:
	io_uring_queue_exit(&r->ring);
	return ret;
}

int tgt_reactor_start(struct tgt_reactor *r, struct tgt_target *t, int id)
{
	const struct rb_target_conf *c = &t->conf;
	struct itimerspec its = { .it_interval = { 1, 0 }, .it_value = { 1, 0 } };
	uint32_t incap_count = c->buffers * 4, incap_size = (c->incapsule + 4095) & ~4095u;
	int ret;

	memset(r, 0, sizeof(*r));
	r->id = id;
	r->t = t;
	rb_spin_init(&r->spin, &c->topts);
	pthread_mutex_init(&r->inbox_lock, NULL);

	ret = rb_bufpool_init(&r->pool, c->max_transfer, c->buffers);
	if (ret < 0) {
		rb_err("reactor %d: cannot allocate %u buffers of %u bytes: %s", id, c->buffers,
		       c->max_transfer, strerror(-ret));
		return ret;
	}
	tgt_pool_init(r);
	/* incapsule = 0: no queue takes one, but the ring and every domain
	 * register this pool, and an empty one cannot be registered. */
	if (!incap_size) {
		incap_size = 4096;
		incap_count = 1;
	}
	ret = rb_bufpool_init(&r->incap, incap_size, incap_count);
	if (ret < 0) {
		rb_err("reactor %d: cannot allocate %u in-capsule buffers of %u bytes: %s", id,
		       incap_count, incap_size, strerror(-ret));
		goto out_pool;
	}
	/* Page aligned: written with O_DIRECT too. */
	r->zeroes = aligned_alloc(4096, TGT_ZERO_BUF_SIZE);
	if (!r->zeroes) {
		ret = -ENOMEM;
		rb_err("reactor %d: cannot allocate the zero buffer", id);
		goto out_incap;
	}
	memset(r->zeroes, 0, TGT_ZERO_BUF_SIZE);
	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	r->ring_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	r->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (r->epfd < 0 || r->wake_fd < 0 || r->ring_efd < 0 || r->timer_fd < 0) {
		ret = -errno;
		goto out_fds;
	}
	timerfd_settime(r->timer_fd, 0, &its, NULL);
	ret = setup_ring(r);
	if (ret < 0)
		goto out_fds;
	if ((ret = add_fd(r, r->wake_fd, EV_WAKE)) || (ret = add_fd(r, r->ring_efd, EV_RING)) ||
	    (ret = add_fd(r, r->timer_fd, EV_TIMER)))
		goto out_ring;
	ret = -pthread_create(&r->thread, NULL, reactor_main, r);
	if (ret)
		goto out_ring;
	rb_name_thread(r->thread, "rb-reactor", id);
	return 0;

out_ring:
	io_uring_queue_exit(&r->ring);
out_fds:
	if (ret == 0)
		ret = -EIO;
	rb_err("reactor %d: setup failed: %s", id, strerror(-ret));
	close(r->epfd);
	close(r->wake_fd);
	close(r->ring_efd);
	close(r->timer_fd);
	free(r->zeroes);
out_incap:
	rb_bufpool_fini(&r->incap);
out_pool:
	rb_bufpool_fini(&r->pool);
	return ret;
}

void tgt_reactor_stop(struct tgt_reactor *r)
{
	uint64_t one = 1;

	atomic_store(&r->stopping, true);
	if (write(r->wake_fd, &one, sizeof(one)) < 0)
		rb_err("reactor %d: wake: %s", r->id, strerror(errno));
}

void tgt_reactor_join(struct tgt_reactor *r)
{
	pthread_join(r->thread, NULL);
	for (int i = 0; i < r->nr_cqctx; i++)
		if (r->cqctx[i].cq)
			cqctx_put(r, &r->cqctx[i]);
	io_uring_queue_exit(&r->ring);
	close(r->epfd);
	close(r->wake_fd);
	close(r->ring_efd);
	close(r->timer_fd);
	free(r->zeroes);
	rb_bufpool_fini(&r->incap);
	rb_bufpool_fini(&r->pool);
	pthread_mutex_destroy(&r->inbox_lock);
}
