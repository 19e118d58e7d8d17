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

/* A read of an empty pipe: it completes (as task work) once the writer writes. */
static int start_late_read(struct io_uring *ring, int p[2], char *buf, pthread_t *th)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_read(sqe, p[0], buf, 16, 0);
	sqe->user_data = 42;
	if (io_uring_submit(ring) != 1)
		return -EIO;
	return -pthread_create(th, NULL, late_writer, &p[1]);
}

static void flags_case(void)
{
	struct io_uring probe, ring;
	int supported = io_uring_queue_init(2, &probe, COOP);

	if (!supported)
		io_uring_queue_exit(&probe);
	is_int(rb_uring_init(8, &ring, 0), 0, "rb_uring_init sets up a ring");
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
	struct io_uring ring;
	struct io_uring_cqe *cqe = NULL;
	struct epoll_event ev = {.events = EPOLLIN};
	char buf[16] = "";
	pthread_t th;
	long long t0, end;
	int p[2], ep;

	if (rb_uring_init(8, &ring, 0) || pipe(p) || (ep = epoll_create1(0)) < 0) {
		ok(0, "set up the epoll case: %s", strerror(errno));
		return;
	}
	epoll_ctl(ep, EPOLL_CTL_ADD, ring.ring_fd, &ev);
	is_int(start_late_read(&ring, p, buf, &th), 0, "a read waits on an empty pipe");
	t0 = now_ms();
	end = t0 + LIMIT_MS;
	while (now_ms() < end) {
		int n = epoll_wait(ep, &ev, 1, (int)(end - now_ms()));

		if (n < 0 && errno != EINTR)
			break;
		if (n > 0 && !io_uring_peek_cqe(&ring, &cqe))
			break;
	}
	ok(cqe != NULL, "a reactor asleep in epoll is woken by the completion (%lld ms)",
	   now_ms() - t0);
	if (cqe) {
		is_int(cqe->res, sizeof(PAYLOAD), "with the bytes read");
		io_uring_cqe_seen(&ring, cqe);
	}
	pthread_join(th, NULL);
	close(ep);
	close(p[0]);
	close(p[1]);
	io_uring_queue_exit(&ring);
}

/* The target's way between sleeps: peek only, no other system call. */
static void peek_case(void)
{
	struct io_uring ring;
	struct io_uring_cqe *cqe = NULL;
	char buf[16] = "";
	pthread_t th;
	long long end;
	int p[2];

	if (rb_uring_init(8, &ring, 0) || pipe(p)) {
		ok(0, "set up the peek case: %s", strerror(errno));
		return;
	}
	is_int(start_late_read(&ring, p, buf, &th), 0, "a read waits on an empty pipe");
	end = now_ms() + LIMIT_MS;
	while (now_ms() < end && io_uring_peek_cqe(&ring, &cqe))
		;
	ok(cqe != NULL, "a thread that only peeks gets the completion");
	if (cqe) {
		is_str(buf, PAYLOAD, "with the data");
		io_uring_cqe_seen(&ring, cqe);
	}
	pthread_join(th, NULL);
	close(p[0]);
	close(p[1]);
	io_uring_queue_exit(&ring);
}

int main(void)
{
	flags_case();
	epoll_case();
	peek_case();
	return tap_done();
}
