/* SPDX-License-Identifier: MIT */
/*
 * lib/uring.h: the reactors' rings run completions' task work cooperatively
 * (no IPI), and that must still wake a reactor asleep in epoll on the ring fd
 * and reach one that only peeks at the ring.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "uring.h"

#define COOP (IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG)
#define PAYLOAD "abc"
#define LATE_MS 100
#define LIMIT_MS 10000

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Writes the payload into the pipe LATE_MS after it starts. */
static void *late_writer(void *arg)
{
	int fd = *(int *)arg;

	poll(NULL, 0, LATE_MS);
	if (write(fd, PAYLOAD, sizeof(PAYLOAD)) != (ssize_t)sizeof(PAYLOAD))
		perror("write");
	return NULL;
}

/* A ring with a read waiting on an empty pipe; it completes (as task work) once
 * the writer thread writes, LATE_MS after the start. */
struct late_read {
	struct io_uring ring;
	int p[2];
	char buf[16];
	pthread_t th;
};

static bool late_read_start(struct late_read *lr)
{
	struct io_uring_sqe *sqe;

	memset(lr, 0, sizeof(*lr));
	if (rb_uring_init(8, &lr->ring)) {
		ok(0, "set up a ring");
		return false;
	}
	if (pipe(lr->p)) {
		ok(0, "pipe: %s", strerror(errno));
		io_uring_queue_exit(&lr->ring);
		return false;
	}
	sqe = io_uring_get_sqe(&lr->ring);
	io_uring_prep_read(sqe, lr->p[0], lr->buf, sizeof(lr->buf), 0);
	is_int(io_uring_submit(&lr->ring), 1, "a read waits on an empty pipe");
	is_int(pthread_create(&lr->th, NULL, late_writer, &lr->p[1]), 0, "the writer starts");
	return true;
}

static void late_read_stop(struct late_read *lr, struct io_uring_cqe *cqe)
{
	ok(cqe && cqe->res == (int)sizeof(PAYLOAD) && !strcmp(lr->buf, PAYLOAD),
	   "with the data (res %d)", cqe ? cqe->res : 0);
	if (cqe)
		io_uring_cqe_seen(&lr->ring, cqe);
	pthread_join(lr->th, NULL);
	close(lr->p[0]);
	close(lr->p[1]);
	io_uring_queue_exit(&lr->ring);
}

static void flags_case(void)
{
	struct io_uring probe, ring;
	int supported = io_uring_queue_init(2, &probe, COOP);

	if (!supported)
		io_uring_queue_exit(&probe);
	is_int(rb_uring_init(8, &ring), 0, "rb_uring_init sets up a ring");
	if (supported == 0)
		is_int(ring.flags & COOP, COOP,
		       "where the kernel has them, with COOP_TASKRUN and TASKRUN_FLAG");
	else
		is_int(ring.flags & COOP, 0, "where the kernel refuses them (%d), without",
		       supported);
	io_uring_queue_exit(&ring);
}

/* The reactors' way: sleep in epoll on the ring fd, then reap. */
static void epoll_case(void)
{
	struct late_read lr;
	struct io_uring_cqe *cqe = NULL;
	struct epoll_event ev = {.events = EPOLLIN};
	long long t0, end;
	int ep;

	if (!late_read_start(&lr))
		return;
	ep = epoll_create1(0);
	ok(ep >= 0 && !epoll_ctl(ep, EPOLL_CTL_ADD, lr.ring.ring_fd, &ev), "epoll on the ring fd");
	t0 = now_ms();
	end = t0 + LIMIT_MS;
	while (ep >= 0 && now_ms() < end) {
		int n = epoll_wait(ep, &ev, 1, (int)(end - now_ms()));

		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && !io_uring_peek_cqe(&lr.ring, &cqe))
			break;
	}
	ok(cqe != NULL, "a reactor asleep in epoll is woken by the completion (%lld ms)",
	   now_ms() - t0);
	late_read_stop(&lr, cqe);
	if (ep >= 0)
		close(ep);
}

/* The target's way between sleeps: peek only, no other system call. */
static void peek_case(void)
{
	struct late_read lr;
	struct io_uring_cqe *cqe = NULL;
	long long end;

	if (!late_read_start(&lr))
		return;
	end = now_ms() + LIMIT_MS;
	while (now_ms() < end && io_uring_peek_cqe(&lr.ring, &cqe))
		;
	ok(cqe != NULL, "a thread that only peeks gets the completion");
	late_read_stop(&lr, cqe);
}

int main(void)
{
	flags_case();
	epoll_case();
	peek_case();
	return tap_done();
}
