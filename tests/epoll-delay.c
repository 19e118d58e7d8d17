/* SPDX-License-Identifier: MIT */
/*
 * LD_PRELOAD shim for the shell tests, two knobs:
 * EPOLL_DELAY_MS: every epoll_wait() on an epoll set that was ever waited on
 *   without a timeout (a reactor's) first sleeps that long, so events that
 *   become ready meanwhile land in the same batch, in the order they became
 *   ready.
 * EPOLL_FAIL_FILE=PATH: once PATH exists, the next epoll_wait() that may
 *   sleep (timeout not 0) made by a thread other than the main one, i.e. a
 *   reactor's wait, fails with EBADF, as it would after a bug closed the
 *   epoll fd; only once.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#define MAX_FD 4096

static bool blocking_set[MAX_FD];

static bool fail_now(int timeout)
{
	static bool failed;
	const char *path = getenv("EPOLL_FAIL_FILE");

	return path && timeout != 0 && gettid() != getpid() && access(path, F_OK) == 0 &&
	       !__atomic_exchange_n(&failed, true, __ATOMIC_RELAXED);
}

int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	static int (*real)(int, struct epoll_event *, int, int);
	const char *ms = getenv("EPOLL_DELAY_MS");

	if (!real)
		real = (int (*)(int, struct epoll_event *, int, int))dlsym(RTLD_NEXT, "epoll_wait");
	if (fail_now(timeout)) {
		errno = EBADF;
		return -1;
	}
	if (epfd >= 0 && epfd < MAX_FD) {
		if (timeout < 0)
			blocking_set[epfd] = true;
		if (ms && blocking_set[epfd])
			usleep((useconds_t)atoi(ms) * 1000);
	}
	return real(epfd, ev, max, timeout);
}
