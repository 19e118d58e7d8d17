/* SPDX-License-Identifier: MIT */
/*
 * LD_PRELOAD shim for the shell tests: every epoll_wait() on an epoll set
 * that was ever waited on without a timeout (a reactor's) first sleeps
 * EPOLL_DELAY_MS, so events that become ready meanwhile land in the same
 * batch, in the order they became ready.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#define MAX_FD 4096

static bool blocking_set[MAX_FD];

int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
	static int (*real)(int, struct epoll_event *, int, int);
	const char *ms = getenv("EPOLL_DELAY_MS");

	if (!real)
		real = (int (*)(int, struct epoll_event *, int, int))dlsym(RTLD_NEXT, "epoll_wait");
	if (epfd >= 0 && epfd < MAX_FD) {
		if (timeout < 0)
			blocking_set[epfd] = true;
		if (ms && blocking_set[epfd])
			usleep((useconds_t)atoi(ms) * 1000);
	}
	return real(epfd, ev, max, timeout);
}
