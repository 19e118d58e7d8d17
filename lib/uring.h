/* SPDX-License-Identifier: MIT */
/*
 * io_uring set-up shared by the daemons' reactors.
 */
#ifndef RDMABLK_URING_H
#define RDMABLK_URING_H

#include <errno.h>
#include <liburing.h>

/*
 * Completions that the kernel finishes as task work (ublk's requests, io-wq's
 * reads) run when the reactor next enters the kernel, which it does every
 * round (epoll_wait, doorbells), instead of an IPI interrupting it while it
 * works; a sleeping reactor is still woken.  TASKRUN_FLAG tells liburing when
 * such work waits, so its CQE helpers enter the kernel to run it.  Kernels
 * before 5.19 refuse both flags: set up without them there.
 */
static inline int rb_uring_init(unsigned int entries, struct io_uring *ring)
{
	int ret = io_uring_queue_init(entries, ring,
				      IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG);

	if (ret == -EINVAL)
		ret = io_uring_queue_init(entries, ring, 0);
	return ret;
}

#endif
