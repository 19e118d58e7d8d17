/* SPDX-License-Identifier: MIT */
/*
 * Hybrid polling for reactors: after a round that did work, keep polling
 * without sleeping for a budget of microseconds before blocking again.  A
 * request/response that comes back within the budget then costs no thread
 * wakeup, which is most of a QD1 round trip; an idle reactor still sleeps,
 * so peers on the same CPUs are not starved.  busy-poll spins forever.
 */
#ifndef RDMABLK_SPIN_H
#define RDMABLK_SPIN_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <sched.h>

#include "transport.h"

struct rb_spin {
	bool always; /* busy-poll: never sleep */
	uint64_t budget_ns; /* poll-us; 0 = sleep as soon as idle */
	uint64_t until_ns; /* keep polling until this time */
};

static inline uint64_t rb_spin_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void rb_spin_init(struct rb_spin *s, const struct rb_transport_opts *o)
{
	s->always = o->busy_poll != 0;
	s->budget_ns = (uint64_t)o->poll_us * 1000u;
	s->until_ns = 0;
}

/* True when the next wait should be a non-blocking poll. */
static inline bool rb_spin_polling(const struct rb_spin *s)
{
	return s->always || (s->until_ns && rb_spin_clock_ns() < s->until_ns);
}

/* Record whether the round that just ran found anything to do. */
static inline void rb_spin_note(struct rb_spin *s, bool worked)
{
	if (worked && s->budget_ns)
		s->until_ns = rb_spin_clock_ns() + s->budget_ns;
	else if (!worked && rb_spin_polling(s))
		sched_yield(); /* an idle spin gives the CPU to whoever is runnable */
}
#endif
