/* SPDX-License-Identifier: MIT */
/*
 * Hybrid polling for reactors: after a round that did work, keep polling
 * without sleeping for a budget of microseconds before blocking again.  A
 * request/response that comes back within the budget then costs no thread
 * wakeup, which is most of a QD1 round trip; an idle reactor still sleeps,
 * so peers on the same CPUs are not starved.  busy-poll spins forever.
 *
 * Polling pays only where the reactor is waiting on a round trip (low
 * depth).  At depth a reactor that sleeps wakes to a batch and answers it in
 * one go; one that polls takes each request as it comes, and its peer then
 * works in smaller batches too (bench/README: a target polling at QD32 lost
 * a third).  So the reactor reports its arrivals, and polling starts only
 * after RB_SPIN_SAMPLES wake-ups from sleep in a row found at most
 * RB_SPIN_BATCH new requests; any round that finds more stops it.  Polling
 * shrinks the batches it sees, so after RB_SPIN_STREAK_NS of polling the
 * reactor sleeps once to take a fresh sample.
 */
#ifndef RDMABLK_SPIN_H
#define RDMABLK_SPIN_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <sched.h>

#include "clock.h"
#include "transport.h"

#define RB_SPIN_BATCH 2
#define RB_SPIN_SAMPLES 4
#define RB_SPIN_STREAK_NS 2000000ull

struct rb_spin {
	bool always;	    /* busy-poll: never sleep */
	bool polled;	    /* the last wait was a poll, not a sleep */
	uint8_t small;	    /* wake-ups in a row with a small batch (saturates) */
	uint64_t budget_ns; /* poll-us; 0 = sleep as soon as idle */
	uint64_t until_ns;  /* keep polling until this time */
	uint64_t since_ns;  /* start of the current polling streak */
};

static inline void rb_spin_init(struct rb_spin *s, const struct rb_transport_opts *o)
{
	s->always = o->busy_poll != 0;
	s->budget_ns = (uint64_t)o->poll_us * 1000u;
	s->until_ns = 0;
	s->since_ns = 0;
	s->polled = false;
	s->small = 0;
}

/* True when the next wait should be a non-blocking poll. */
static inline bool rb_spin_polling(const struct rb_spin *s)
{
	return s->always || (s->until_ns && rb_clock_ns() < s->until_ns);
}

/* The reactor's wait: poll (true) or sleep; remembered for rb_spin_note. */
static inline bool rb_spin_wait_polls(struct rb_spin *s)
{
	s->polled = rb_spin_polling(s);
	return s->polled;
}

/*
 * Record whether the round that just ran found anything to do, and how many
 * new requests (commands, responses) arrived in it.
 */
static inline void rb_spin_note(struct rb_spin *s, bool worked, unsigned int arrivals)
{
	uint64_t now;

	if (!worked || !s->budget_ns) {
		if (!worked && rb_spin_polling(s))
			sched_yield(); /* an idle spin gives the CPU to whoever is runnable */
		return;
	}
	now = rb_clock_ns();
	if (arrivals > RB_SPIN_BATCH) {
		s->small = 0; /* a batch, even while polling: depth */
	} else if (!s->polled) {
		/* Woke from a sleep with a small batch. */
		if (s->small < RB_SPIN_SAMPLES)
			s->small++;
		s->since_ns = now;
	} else if (now - s->since_ns > RB_SPIN_STREAK_NS) {
		s->until_ns = 0; /* sleep once: the next wake-up is a fresh sample */
		return;
	}
	s->until_ns = s->small >= RB_SPIN_SAMPLES ? now + s->budget_ns : 0;
}
#endif
