/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "latch.h"

int rb_latch_open(struct rb_latch *l)
{
	l->set = false;
	l->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return l->fd < 0 ? -errno : 0;
}

void rb_latch_close(struct rb_latch *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	l->set = false;
}

int rb_latch_set(struct rb_latch *l)
{
	uint64_t one = 1;

	if (l->set)
		return 0;
	if (write(l->fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		return -errno;
	l->set = true;
	return 0;
}

int rb_latch_clear(struct rb_latch *l)
{
	uint64_t v;
	int ret = 0;

	/* EAGAIN: someone else drained it; clear is what we wanted. */
	if (l->set && read(l->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		ret = -errno;
	l->set = false;
	return ret;
}
