/* SPDX-License-Identifier: MIT */
/*
 * Pausing a listener that cannot accept.  Out of descriptors or memory
 * (EMFILE, ENFILE, ENOBUFS, ENOMEM) the connection stays in the backlog and
 * the listening fd readable: left in a level-triggered epoll set it would
 * wake the loop at once, forever.  Taken off the set for a while instead,
 * it is put back by rb_listen_resume once the time is up.  Milliseconds
 * throughout (rb_clock_ms).  The caller logs: these return -errno.
 */
#ifndef RB_LISTEN_PAUSE_H
#define RB_LISTEN_PAUSE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#define RB_LISTEN_PAUSE_MS 1000u

struct rb_listen_pause {
	int epfd;
	int fd;
	struct epoll_event ev; /* how fd is watched: put back as it was */
	uint64_t until_ms;     /* 0: watched */
};

/* Record how fd is watched in epfd; it must be in the set already. */
void rb_listen_pause_init(struct rb_listen_pause *p, int epfd, int fd,
			  const struct epoll_event *ev);

static inline bool rb_listen_paused(const struct rb_listen_pause *p)
{
	return p->until_ms != 0;
}

/* Off the set until now_ms + ms.  -errno: still watched (nothing changed). */
int rb_listen_pause(struct rb_listen_pause *p, uint64_t now_ms, uint32_t ms);

/*
 * Back on the set if the pause is over.  *wait_ms is lowered to the time
 * left when it is still paused (a negative *wait_ms, "no limit", too), so
 * the caller's epoll_wait wakes in time.
 * -errno: epoll_ctl failed and the listener stays paused for ms more.
 */
int rb_listen_resume(struct rb_listen_pause *p, uint64_t now_ms, uint32_t ms, int *wait_ms);

#endif
