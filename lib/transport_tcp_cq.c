/* SPDX-License-Identifier: MIT */
/*
 * "tcp" transport: the completion queue.
 *
 * Event loop contract: cq_fd is an epoll set (level triggered) holding
 * the connections' sockets and an eventfd that is made readable while
 * completions are queued.  After cq_poll returned a full batch (n) the
 * caller polls again before sleeping, and writes posted in between are
 * batched into that call; otherwise posts write at once.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "checked.h"
#include "log.h"
#include "transport_tcp_priv.h"

static enum rb_wc_opcode kind_opcode(uint8_t kind)
{
	switch (kind) {
	case W_RECV: return RB_WC_RECV;
	case W_WRITE: return RB_WC_WRITE;
	case W_READ: return RB_WC_READ;
	default: return RB_WC_SEND;
	}
}

static struct tcp_cq *to_cq(struct rb_cq *cq)
{
	return (struct tcp_cq *)cq;
}

static void cq_signal(struct tcp_cq *cq)
{
	int ret = rb_latch_set(&cq->wake);

	if (ret)
		rb_err("tcp: cq eventfd write: %s", strerror(-ret));
}

static void cq_unsignal(struct tcp_cq *cq)
{
	int ret = rb_latch_clear(&cq->wake);

	if (ret)
		rb_err("tcp: cq eventfd read: %s", strerror(-ret));
}

void tcp_wr_complete(struct tcp_conn *c, struct tcp_wr *w, enum rb_wc_status st)
{
	w->status = st;
	if (w->kind == W_RECV)
		c->rq_used--;
	else
		c->sq_used--;
	c->ndone++;
	q_push(&c->cq->done, w);
	if (!c->cq->in_poll)
		cq_signal(c->cq);
}

/* Come back to c from the next cq_poll/cq_arm (deferred writes, acks). */
void tcp_conn_kick(struct tcp_conn *c)
{
	if (!c->dirty) {
		c->dirty = true;
		c->dirty_next = c->cq->dirty;
		c->cq->dirty = c;
	}
	/* Corked: the owner uncorks (and so writes) before it sleeps. */
	if (!c->cq->in_poll && !c->cq->corked)
		cq_signal(c->cq);
}

int tcp_cq_create(struct rb_domain *d, uint32_t depth, struct rb_cq **out)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	struct tcp_cq *cq;
	int ret;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -ENOMEM;
	cq->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (cq->epfd < 0) {
		ret = -errno;
		goto out_free;
	}
	ret = rb_latch_open(&cq->wake);
	if (ret)
		goto out_close_ep;
	if (epoll_ctl(cq->epfd, EPOLL_CTL_ADD, cq->wake.fd, &ev) < 0) {
		ret = -errno;
		goto out_close_efd;
	}
	*out = (struct rb_cq *)cq;
	return 0;

out_close_efd:
	rb_latch_close(&cq->wake);
out_close_ep:
	close(cq->epfd);
out_free:
	free(cq);
	rb_err("tcp: cq_create: %s", strerror(-ret));
	return ret;
}

void tcp_cq_destroy(struct rb_cq *rcq)
{
	struct tcp_cq *cq = to_cq(rcq);

	if (!cq)
		return;
	if (cq->nconns || cq->done.n)
		rb_warn("tcp: cq destroyed with %u connections, %u completions", cq->nconns,
			cq->done.n);
	rb_latch_close(&cq->wake);
	close(cq->epfd);
	free(cq);
}

int tcp_cq_fd(struct rb_cq *cq)
{
	return to_cq(cq)->epfd;
}

static void cq_flush_dirty(struct tcp_cq *cq)
{
	struct tcp_conn *c;

	while ((c = cq->dirty)) {
		cq->dirty = c->dirty_next;
		c->dirty = false;
		tcp_conn_service(c);
	}
}

static int cq_progress(struct tcp_cq *cq)
{
	struct epoll_event ev[64];
	int n;

	n = epoll_wait(cq->epfd, ev, (int)RB_ARRAY_SIZE(ev), 0);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (int i = 0; i < n; i++) {
		struct tcp_conn *c = ev[i].data.ptr;

		if (c)
			tcp_conn_event(c, ev[i].events);
	}
	return 0;
}

static int cq_pop(struct tcp_cq *cq, struct rb_wc *wc, int n)
{
	int i;

	for (i = 0; i < n && cq->done.head; i++) {
		struct tcp_wr *w = q_pop(&cq->done);
		struct tcp_conn *c = w->conn;

		wc[i] = (struct rb_wc){
			.cqe = w->cqe,
			.conn = &c->pub,
			.opcode = kind_opcode(w->kind),
			.status = w->status,
			.byte_len = w->kind == W_RECV ? w->byte_len : 0,
		};
		c->ndone--;
		tcp_wr_put(c, w);
	}
	return i;
}

int tcp_cq_poll(struct rb_cq *rcq, struct rb_wc *wc, int n)
{
	struct tcp_cq *cq = to_cq(rcq);
	int got, ret;

	if (n <= 0 || !wc)
		return -EINVAL;
	cq->in_poll = true;
	cq_flush_dirty(cq);
	if (cq->done.n < (unsigned int)n) {
		ret = cq_progress(cq);
		if (ret) {
			cq->in_poll = false;
			return ret;
		}
	}
	got = cq_pop(cq, wc, n);
	if (got < n) {
		/* End of a batch: acks and writes go out before the caller sleeps. */
		cq_flush_dirty(cq);
		got += cq_pop(cq, wc + got, n - got);
	}
	cq->batch = got == n;
	/* The caller is expected to poll again after a full batch; the
	 * eventfd makes sure a caller that sleeps instead still wakes. */
	if (cq->done.head || cq->dirty)
		cq_signal(cq);
	else
		cq_unsignal(cq);
	cq->in_poll = false;
	return got;
}

/* Sockets are level triggered in cq_fd; only queued completions and
 * deferred work need the eventfd to make cq_fd readable. */
int tcp_cq_arm(struct rb_cq *rcq)
{
	struct tcp_cq *cq = to_cq(rcq);

	cq->in_poll = true;
	cq_flush_dirty(cq);
	cq->in_poll = false;
	if (cq->done.head)
		cq_signal(cq);
	return 0;
}

/*
 * Corking batches the frames a reactor posts while it handles one round of
 * events into one sendmsg per connection; uncorking writes them out.
 */
void tcp_cq_cork(struct rb_cq *rcq, bool on)
{
	struct tcp_cq *cq = to_cq(rcq);

	cq->corked = on;
	if (on)
		return;
	cq->in_poll = true;
	tcp_cq_release_acks(cq);
	cq_flush_dirty(cq);
	cq->in_poll = false;
	if (cq->done.head || cq->dirty)
		cq_signal(cq);
}

/*
 * Quiet: the owner's own SEND/WRITE completions need not wake it, so its
 * frames may leave their acks to the peer's next frame (TCP_F_LAZY).  Not
 * quiet: it may be waiting for exactly those, so ask for them now.
 */
int tcp_cq_prepare_wait(struct rb_cq *rcq, bool quiet)
{
	struct tcp_cq *cq = to_cq(rcq);

	cq->quiet = quiet;
	if (quiet)
		return 0;
	cq->in_poll = true;
	tcp_cq_request_acks(cq);
	cq->in_poll = false;
	if (cq->done.head)
		cq_signal(cq);
	return 0;
}
