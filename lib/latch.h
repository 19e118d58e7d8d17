/* SPDX-License-Identifier: MIT */
/*
 * An eventfd that is readable exactly while the latch is set: a wakeup for
 * an epoll set that stays level (work waits) without a write per event.
 * Set and clear cost a system call only when the state changes.  Owned by
 * one thread, like the CQ or reactor it wakes.
 */
#ifndef RB_LATCH_H
#define RB_LATCH_H

#include <stdbool.h>

struct rb_latch {
	int fd; /* -1: not open */
	bool set;
};

/* 0 or -errno; the latch starts clear. */
int rb_latch_open(struct rb_latch *l);
void rb_latch_close(struct rb_latch *l);
/* 0 or -errno (the latch stays clear, the caller logs). */
int rb_latch_set(struct rb_latch *l);
/* 0 or -errno (the latch counts as clear either way). */
int rb_latch_clear(struct rb_latch *l);

#endif
