/* SPDX-License-Identifier: MIT */
/*
 * LD_PRELOAD shim for the shell tests: io_uring_submit() fails with
 * -EAGAIN, without submitting, on every URING_FAIL_EVERY-th call that has
 * something to submit, as io_uring_enter may under memory pressure (or
 * -EBUSY with an overflowing CQ).  The SQEs stay in the ring for the next
 * call, as they do after a real failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <liburing.h>
#include <stdlib.h>

int io_uring_submit(struct io_uring *ring)
{
	static int (*real)(struct io_uring *);
	static unsigned long calls;
	const char *every = getenv("URING_FAIL_EVERY");

	if (!real)
		real = (int (*)(struct io_uring *))dlsym(RTLD_NEXT, "io_uring_submit");
	if (every && atol(every) > 0 && io_uring_sq_ready(ring) &&
	    __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED) % (unsigned long)atol(every) == 0)
		return -EAGAIN;
	return real(ring);
}
