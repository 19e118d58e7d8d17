/* SPDX-License-Identifier: MIT */
/*
 * The monotonic clock, in the two units the tree uses: nanoseconds for
 * the data path (poll budgets, handshake deadlines) and milliseconds for
 * everything a person configures or reads in a log (timeouts, pauses).
 */
#ifndef RB_CLOCK_H
#define RB_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t rb_clock_ns(void)
{
	struct timespec ts;

	/* Cannot fail for CLOCK_MONOTONIC on Linux. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t rb_clock_ms(void)
{
	return rb_clock_ns() / 1000000ull;
}

#endif
