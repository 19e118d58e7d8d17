/* SPDX-License-Identifier: MIT */
/* lib/spin.h: when a reactor polls instead of sleeping. */
#include "config.h"

#include "spin.h"
#include "tap.h"

/* A budget long enough that it cannot run out while the test runs. */
#define LONG_US (10 * 1000 * 1000)

static struct rb_spin spin_with(int poll_us, int busy_poll)
{
	struct rb_transport_opts o = {.poll_us = poll_us, .busy_poll = busy_poll};
	struct rb_spin s;

	rb_spin_init(&s, &o);
	return s;
}

/* One reactor round: its wait (returns whether it polled), then what it found. */
static bool round_trip(struct rb_spin *s, bool worked, unsigned int arrivals)
{
	bool polled = rb_spin_wait_polls(s);

	rb_spin_note(s, worked, arrivals);
	return polled;
}

/* Enough wake-ups with one request each to start polling. */
static struct rb_spin spin_low_depth(int poll_us)
{
	struct rb_spin s = spin_with(poll_us, 0);

	for (int i = 0; i < RB_SPIN_SAMPLES; i++)
		round_trip(&s, true, 1);
	return s;
}

static void budget_cases(void)
{
	struct rb_spin s = spin_with(LONG_US, 0);

	ok(!rb_spin_polling(&s), "poll-us: sleeps before any work");
	s = spin_low_depth(LONG_US);
	ok(rb_spin_polling(&s), "poll-us: polls after work at low depth");
	ok(round_trip(&s, false, 0) && rb_spin_polling(&s),
	   "poll-us: an idle round keeps the budget");

	s = spin_with(LONG_US, 0);
	round_trip(&s, false, 0);
	ok(!rb_spin_polling(&s), "poll-us: an idle round does not start polling");

	s = spin_low_depth(1);
	for (int i = 0; i < 1000 && rb_spin_polling(&s); i++)
		sched_yield();
	ok(!rb_spin_polling(&s), "poll-us: the budget runs out");
	round_trip(&s, false, 0);
	ok(!rb_spin_polling(&s), "poll-us: and an idle round then sleeps");

	s = spin_low_depth(0);
	ok(!rb_spin_polling(&s), "poll-us 0: never polls");

	s = spin_with(0, 1);
	ok(rb_spin_polling(&s), "busy-poll: polls from the start");
	round_trip(&s, false, 0);
	ok(rb_spin_polling(&s), "busy-poll: polls when idle");
	round_trip(&s, true, RB_SPIN_BATCH + 1);
	ok(rb_spin_polling(&s), "busy-poll: polls whatever the batches");
}

static void depth_cases(void)
{
	struct rb_spin s = spin_with(LONG_US, 0);
	struct timespec streak = {0, (long)(RB_SPIN_STREAK_NS + 1000000)};
	int i;

	for (i = 0; i < RB_SPIN_SAMPLES - 1; i++)
		round_trip(&s, true, 1);
	ok(!rb_spin_polling(&s), "depth: %d small wake-ups are not enough", i);
	round_trip(&s, true, RB_SPIN_BATCH);
	ok(rb_spin_polling(&s), "depth: polls after %d small wake-ups in a row", RB_SPIN_SAMPLES);
	ok(round_trip(&s, true, 1) && rb_spin_polling(&s), "depth: a small polled round polls on");
	round_trip(&s, true, RB_SPIN_BATCH + 1);
	ok(!rb_spin_polling(&s), "depth: a batch while polling stops it");
	ok(!round_trip(&s, true, 1) && !rb_spin_polling(&s),
	   "depth: and polling starts again only after fresh samples");

	s = spin_with(LONG_US, 0);
	for (i = 0; i < RB_SPIN_SAMPLES - 1; i++)
		round_trip(&s, true, 0);
	round_trip(&s, true, RB_SPIN_BATCH + 1);
	round_trip(&s, true, 1);
	ok(!rb_spin_polling(&s), "depth: a batch from sleep resets the count");

	/* After a streak of polling, one sleep to sample; a small sample resumes. */
	s = spin_low_depth(LONG_US);
	nanosleep(&streak, NULL);
	ok(round_trip(&s, true, 1) && !rb_spin_polling(&s),
	   "depth: sleeps once after a polling streak");
	ok(!round_trip(&s, true, 1) && rb_spin_polling(&s),
	   "depth: a small sample after it polls again at once");
}

int main(void)
{
	budget_cases();
	depth_cases();
	return tap_done();
}
