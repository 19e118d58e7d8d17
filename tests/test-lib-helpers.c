/* SPDX-License-Identifier: MIT */
/* The small shared helpers of lib/: FIFO, clock, eventfd latch, listener
 * pause, completion status names, CQ draining and rate-limited logs. */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "fifo.h"
#include "latch.h"
#include "listen_pause.h"
#include "log_limit.h"
#include "tap.h"
#include "transport.h"

struct item {
	struct item *next;
	int v;
};

RB_FIFO_DECLARE(item_q, struct item);

/* The values in q from head to tail, as digits; checks tail and n agree. */
static const char *order(struct item_q *q)
{
	static char buf[32];
	unsigned int n = 0;
	struct item *last = NULL;

	for (struct item *i = q->head; i && n < sizeof(buf) - 1; i = i->next)
		buf[n++] = (char)('0' + i->v), last = i;
	buf[n] = 0;
	if (n != q->n || last != q->tail)
		return "inconsistent";
	return buf;
}

static void fifo_cases(void)
{
	struct item it[6];
	struct item_q q = {0}, r = {0};

	for (int i = 0; i < 6; i++)
		it[i] = (struct item){.next = &it[0], .v = i};
	ok(rb_fifo_empty(&q), "fifo: zeroed is empty");
	ok(rb_fifo_pop(&q) == NULL, "fifo: pop of empty is NULL");
	for (int i = 0; i < 4; i++)
		rb_fifo_push(&q, &it[i]);
	is_str(order(&q), "0123", "fifo: push keeps order");
	ok(rb_fifo_pop(&q) == &it[0] && it[0].next == NULL, "fifo: pop takes the head");
	rb_fifo_unlink(&q, &it[1], &it[2]);
	is_str(order(&q), "13", "fifo: unlink from the middle");
	rb_fifo_unlink(&q, &it[1], &it[3]);
	is_str(order(&q), "1", "fifo: unlink the tail moves the tail back");
	rb_fifo_push(&q, &it[4]);
	is_str(order(&q), "14", "fifo: push after unlinking the tail");
	rb_fifo_unlink(&q, NULL, &it[1]);
	is_str(order(&q), "4", "fifo: unlink the head");
	ok(rb_fifo_pop(&q) == &it[4] && rb_fifo_empty(&q) && q.tail == NULL && q.n == 0,
	   "fifo: popping the last empties it");
	rb_fifo_push(&r, &it[5]);
	rb_fifo_splice(&q, &r);
	is_str(order(&q), "5", "fifo: splice into empty");
	ok(rb_fifo_empty(&r) && r.tail == NULL && r.n == 0, "fifo: splice empties the source");
	rb_fifo_push(&r, &it[0]);
	rb_fifo_push(&r, &it[2]);
	rb_fifo_splice(&q, &r);
	is_str(order(&q), "502", "fifo: splice appends in order");
	rb_fifo_splice(&q, &r);
	is_str(order(&q), "502", "fifo: splice of empty changes nothing");
}

static void clock_cases(void)
{
	uint64_t ns1 = rb_clock_ns(), ms = rb_clock_ms(), ns2 = rb_clock_ns();

	ok(ns1 <= ns2, "clock: monotonic");
	ok(ms >= ns1 / 1000000ull && ms <= ns2 / 1000000ull, "clock: ms is ns / 1e6 (%llu ms)",
	   (unsigned long long)ms);
}

static bool readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void latch_cases(void)
{
	struct rb_latch l;
	uint64_t v;

	is_int(rb_latch_open(&l), 0, "latch: open");
	ok(!readable(l.fd) && !l.set, "latch: starts clear");
	is_int(rb_latch_set(&l), 0, "latch: set");
	is_int(rb_latch_set(&l), 0, "latch: set again");
	ok(readable(l.fd) && l.set, "latch: readable while set");
	/* One write for both sets: the counter is 1. */
	ok(read(l.fd, &v, sizeof(v)) == sizeof(v) && v == 1, "latch: one write per change");
	is_int(rb_latch_clear(&l), 0, "latch: clear after someone drained it (EAGAIN)");
	ok(!l.set, "latch: clear");
	is_int(rb_latch_set(&l), 0, "latch: set after clear");
	is_int(rb_latch_clear(&l), 0, "latch: clear");
	ok(!readable(l.fd), "latch: not readable once clear");
	rb_latch_close(&l);
	is_int(l.fd, -1, "latch: closed");
	rb_latch_close(&l);
	l.fd = -1;
	l.set = false;
	ok(rb_latch_set(&l) == -EBADF && !l.set, "latch: a failed set stays clear");
}

static int ready(int epfd)
{
	struct epoll_event ev;

	return epoll_wait(epfd, &ev, 1, 0);
}

static void pause_cases(void)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 7};
	struct rb_listen_pause p;
	int epfd = epoll_create1(EPOLL_CLOEXEC), fd = eventfd(1, EFD_CLOEXEC);
	int wait_ms;

	/* A readable eventfd stands in for a listener with a backlog. */
	ok(epfd >= 0 && fd >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0, "pause: setup");
	rb_listen_pause_init(&p, epfd, fd, &ev);
	ok(!rb_listen_paused(&p) && ready(epfd) == 1, "pause: watched at first");
	wait_ms = 5000;
	is_int(rb_listen_resume(&p, 100, 1000, &wait_ms), 0, "pause: resume when not paused");
	is_int(wait_ms, 5000, "pause: not paused leaves the wait alone");
	is_int(rb_listen_pause(&p, 100, 1000), 0, "pause: pause");
	ok(rb_listen_paused(&p) && ready(epfd) == 0, "pause: off the epoll set");
	is_int(rb_listen_pause(&p, 200, 1000), 0, "pause: pause again");
	is_int(p.until_ms, 1100, "pause: pausing again keeps the first deadline");
	wait_ms = 5000;
	is_int(rb_listen_resume(&p, 700, 1000, &wait_ms), 0, "pause: resume too early");
	ok(rb_listen_paused(&p) && ready(epfd) == 0, "pause: still off the set");
	is_int(wait_ms, 400, "pause: the wait ends when the pause does");
	wait_ms = 100;
	rb_listen_resume(&p, 700, 1000, &wait_ms);
	is_int(wait_ms, 100, "pause: a shorter wait is kept");
	wait_ms = -1;
	rb_listen_resume(&p, 700, 1000, &wait_ms);
	is_int(wait_ms, 400, "pause: an endless wait gets a limit");
	wait_ms = 5000;
	is_int(rb_listen_resume(&p, 1100, 1000, &wait_ms), 0, "pause: resume on time");
	ok(!rb_listen_paused(&p) && ready(epfd) == 1, "pause: watched again");
	{
		struct epoll_event got;

		ok(epoll_wait(epfd, &got, 1, 0) == 1 && got.data.u32 == 7,
		   "pause: watched as before (same data)");
	}
	/* epoll_ctl failures: nothing changes on pause, retry later on resume. */
	epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
	is_int(rb_listen_pause(&p, 2000, 1000), -ENOENT, "pause: del failure is returned");
	ok(!rb_listen_paused(&p), "pause: ... and it counts as watched");
	epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
	is_int(rb_listen_pause(&p, 2000, 1000), 0, "pause: pause");
	epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev); /* someone else put it back */
	wait_ms = 5000;
	is_int(rb_listen_resume(&p, 3000, 1000, &wait_ms), -EEXIST,
	       "pause: add failure is returned");
	ok(rb_listen_paused(&p) && p.until_ms == 4000 && wait_ms == 1000,
	   "pause: ... and it tries again after another pause");
	close(fd);
	close(epfd);
}

static void wc_name_cases(void)
{
	is_str(rb_wc_status_name(RB_WC_SUCCESS), "success", "wc: success");
	is_str(rb_wc_status_name(RB_WC_FLUSH_ERR), "connection closed (flushed)", "wc: flush");
	is_str(rb_wc_status_name(RB_WC_GENERAL_ERR), "general error", "wc: last one");
	is_str(rb_wc_status_name((enum rb_wc_status)99), "unknown completion status",
	       "wc: out of range");
	for (int st = RB_WC_SUCCESS; st <= RB_WC_GENERAL_ERR; st++)
		ok(strcmp(rb_wc_status_name((enum rb_wc_status)st), "unknown completion status"),
		   "wc: status %d has a name", st);
}

/* A CQ that hands out a script of batch sizes, then an error or nothing. */
static int script[8], script_at, script_len, polls, dones;
static struct rb_cqe drain_cqe;

static void count_done(struct rb_cq *cq, struct rb_wc *wc)
{
	(void)cq;
	if (wc->cqe == &drain_cqe)
		dones++;
}

static int scripted_poll(struct rb_cq *cq, struct rb_wc *wc, int n)
{
	int k = script_at < script_len ? script[script_at++] : 0;

	(void)cq;
	polls++;
	if (k < 0)
		return k;
	if (k > n)
		k = n;
	for (int i = 0; i < k; i++)
		wc[i] = (struct rb_wc){.cqe = &drain_cqe};
	return k;
}

static int drain(const int *s, int len)
{
	static const struct rb_transport_ops ops = {.name = "scripted", .cq_poll = scripted_poll};

	memcpy(script, s, sizeof(int) * (size_t)len);
	script_len = len;
	script_at = polls = dones = 0;
	drain_cqe.done = count_done;
	return rb_cq_drain(&ops, NULL);
}

static void drain_cases(void)
{
	is_int(drain((int[]){0}, 1), 0, "drain: empty CQ");
	is_int(polls, 1, "drain: one poll for an empty CQ");
	is_int(drain((int[]){5, 7}, 2), 5, "drain: a short batch ends it");
	is_int(polls, 1, "drain: no poll after a short batch");
	is_int(dones, 5, "drain: every completion's done ran");
	is_int(drain((int[]){32, 32, 3, 9}, 4), 67, "drain: full batches poll again");
	is_int(polls, 3, "drain: stops after the first short batch");
	is_int(dones, 67, "drain: done ran for all");
	is_int(drain((int[]){32, -EIO}, 2), -EIO, "drain: a poll error is returned");
	is_int(dones, 32, "drain: completions before the error were handled");
}

/* The limiter's decisions at chosen times: no clock, no sleeping. */
static void log_limit_cases(void)
{
	static struct rb_log_limit l = RB_LOG_LIMIT_INIT("test event", RB_LOG_WARN);
	const uint64_t t0 = 1000000000ull, win = RB_LOG_LIMIT_WINDOW_MS * 1000000ull;
	char sum[256], peer[32];
	unsigned int n = 0;

	for (unsigned int i = 0; i < 100; i++)
		n += rb_log_limit_admit(&l, "10.0.0.1", t0 + i, sum, sizeof(sum));
	is_int((int)n, RB_LOG_LIMIT_PER_PEER, "log limit: one peer gets its lines a window");
	is_int(sum[0], 0, "log limit: no summary inside the window");
	ok(rb_log_limit_admit(&l, "10.0.0.2", t0 + 200, sum, sizeof(sum)),
	   "log limit: another peer still gets its lines");
	ok(!rb_log_limit_admit(&l, "10.0.0.1", t0 + win - 1, sum, sizeof(sum)),
	   "log limit: the first peer waits for the window's end");
	ok(rb_log_limit_admit(&l, "10.0.0.1", t0 + win, sum, sizeof(sum)),
	   "log limit: a new window admits the peer again");
	ok(strstr(sum, "test event: 96 similar messages suppressed") != NULL,
	   "log limit: the summary counts what was dropped (%s)", sum);
	ok(strstr(sum, "(96 from 10.0.0.1)") != NULL, "log limit: and names the loudest peer");
	/* Many peers: the kind's own limit bounds the total. */
	n = 0;
	for (unsigned int i = 0; i < 1000; i++) {
		snprintf(peer, sizeof(peer), "10.1.%u.%u", i / 250, i % 250);
		n += rb_log_limit_admit(&l, peer, t0 + 3 * win + i, sum, sizeof(sum));
	}
	is_int((int)n, RB_LOG_LIMIT_PER_KIND, "log limit: many peers share the kind's lines");
	ok(rb_log_limit_admit(&l, NULL, t0 + 5 * win, sum, sizeof(sum)),
	   "log limit: an unknown peer is admitted");
	ok(strstr(sum, "950 similar messages suppressed") != NULL,
	   "log limit: the many-peer window is summed up (%s)", sum);

	/* A kind with its own numbers (lines every connection logs). */
	{
		static struct rb_log_limit m = RB_LOG_LIMIT_INIT_N("conn", RB_LOG_INFO, 3, 7);

		n = 0;
		for (unsigned int i = 0; i < 10; i++)
			n += rb_log_limit_admit(&m, "a", t0 + i, sum, sizeof(sum));
		is_int((int)n, 3, "log limit: a kind's own lines per peer");
		for (unsigned int i = 0; i < 10; i++)
			n += rb_log_limit_admit(&m, i % 2 ? "b" : "c", t0 + i, sum, sizeof(sum));
		is_int((int)n, 7, "log limit: and its own lines in all");
	}
}

int main(void)
{
	fifo_cases();
	clock_cases();
	latch_cases();
	pause_cases();
	wc_name_cases();
	drain_cases();
	log_limit_cases();
	return tap_done();
}
