/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stddef.h>

#include "listen_pause.h"

void rb_listen_pause_init(struct rb_listen_pause *p, int epfd, int fd, const struct epoll_event *ev)
{
	p->epfd = epfd;
	p->fd = fd;
	p->ev = *ev;
	p->until_ms = 0;
}

int rb_listen_pause(struct rb_listen_pause *p, uint64_t now_ms, uint32_t ms)
{
	if (rb_listen_paused(p))
		return 0;
	if (epoll_ctl(p->epfd, EPOLL_CTL_DEL, p->fd, NULL) < 0)
		return -errno;
	/* 0 means watched; a clock that reads 0 is one tick late. */
	p->until_ms = now_ms + ms ? now_ms + ms : 1;
	return 0;
}

int rb_listen_resume(struct rb_listen_pause *p, uint64_t now_ms, uint32_t ms, int *wait_ms)
{
	struct epoll_event ev = p->ev;

	if (!rb_listen_paused(p))
		return 0;
	if (now_ms < p->until_ms) {
		if (p->until_ms - now_ms < (uint64_t)*wait_ms)
			*wait_ms = (int)(p->until_ms - now_ms);
		return 0;
	}
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->fd, &ev) < 0) {
		int ret = -errno;

		p->until_ms = now_ms + ms;
		if (ms < (uint64_t)*wait_ms)
			*wait_ms = (int)ms;
		return ret;
	}
	p->until_ms = 0;
	return 0;
}
