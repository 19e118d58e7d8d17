/* SPDX-License-Identifier: MIT */
/*
 * LD_PRELOAD shim for the ublk guest tests: the UBLK_COMMIT_FAIL_AT-th
 * COMMIT_AND_FETCH_REQ that goes through io_uring_submit() gets an
 * impossible queue id, so the driver refuses it (-EINVAL) and the request
 * it should have completed stays with the server; so do the next
 * UBLK_COMMIT_FAIL_COUNT - 1 commits of the same tag (default count 1).
 * Says on stderr each time it fires.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <liburing.h>
#include <linux/ublk_cmd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);

	return v && *v ? atol(v) : def;
}

static void corrupt_commits(struct io_uring *ring)
{
	/* The reactors submit concurrently, one ring each. */
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static long seen, left = -1;
	static unsigned int q_id, tag;
	long at = env_long("UBLK_COMMIT_FAIL_AT", 0);
	unsigned int shift = ring->flags & IORING_SETUP_SQE128 ? 1 : 0;

	if (at <= 0)
		return;
	pthread_mutex_lock(&lock);
	for (unsigned int i = ring->sq.sqe_head; i != ring->sq.sqe_tail; i++) {
		struct io_uring_sqe *sqe = &ring->sq.sqes[(i & ring->sq.ring_mask) << shift];
		struct ublksrv_io_cmd cmd;

		if (sqe->opcode != IORING_OP_URING_CMD ||
		    _IOC_NR(sqe->cmd_op) != UBLK_IO_COMMIT_AND_FETCH_REQ)
			continue;
		memcpy(&cmd, sqe->cmd, sizeof(cmd));
		if (++seen == at) {
			q_id = cmd.q_id;
			tag = cmd.tag;
			left = env_long("UBLK_COMMIT_FAIL_COUNT", 1);
		}
		if (left <= 0 || cmd.q_id != q_id || cmd.tag != tag)
			continue;
		left--;
		fprintf(stderr, "ublk-commit-fail: COMMIT_AND_FETCH of queue %u tag %u sent as "
				"queue 65535\n",
			cmd.q_id, cmd.tag);
		cmd.q_id = 0xffff;
		memcpy(sqe->cmd, &cmd, sizeof(cmd));
	}
	pthread_mutex_unlock(&lock);
}

int io_uring_submit(struct io_uring *ring)
{
	static int (*real)(struct io_uring *);

	if (!real)
		real = (int (*)(struct io_uring *))dlsym(RTLD_NEXT, "io_uring_submit");
	corrupt_commits(ring);
	return real(ring);
}
