/* SPDX-License-Identifier: MIT */
/* lib/spin.h: when a reactor polls instead of sleeping. */
#include "config.h"

#include "spin.h"
#include "tap.h"

static struct rb_spin spin_with(int poll_us, int busy_poll)
{
	struct rb_transport_opts o = { .poll_us = poll_us, .busy_poll = busy_poll };
	struct rb_spin s;

	rb_spin_init(&s, &o);
	return s;
}

int main(void)
{
	/* A budget long enough that it cannot run out while the test runs. */
	struct rb_spin s = spin_with(10 * 1000 * 1000, 0);

	ok(!rb_spin_polling(&s), "poll-us: sleeps before any work");
	rb_spin_note(&s, true);
	ok(rb_spin_polling(&s), "poll-us: polls after a round with work");
	rb_spin_note(&s, false);
	ok(rb_spin_polling(&s), "poll-us: an idle round keeps the budget");

	s = spin_with(10 * 1000 * 1000, 0);
	rb_spin_note(&s, false);
	ok(!rb_spin_polling(&s), "poll-us: an idle round does not start polling");

	s = spin_with(1, 0);
	rb_spin_note(&s, true);
	for (int i = 0; i < 1000 && rb_spin_polling(&s); i++)
		sched_yield();
	ok(!rb_spin_polling(&s), "poll-us: the budget runs out");
	rb_spin_note(&s, false);
	ok(!rb_spin_polling(&s), "poll-us: and an idle round then sleeps");

	s = spin_with(0, 0);
	rb_spin_note(&s, true);
	ok(!rb_spin_polling(&s), "poll-us 0: never polls");

	s = spin_with(0, 1);
	ok(rb_spin_polling(&s), "busy-poll: polls from the start");
	rb_spin_note(&s, false);
	ok(rb_spin_polling(&s), "busy-poll: polls when idle");
	return tap_done();
}
