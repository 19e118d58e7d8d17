/* SPDX-License-Identifier: MIT */
/* Absolute deadlines for pthread_cond_timedwait and friends. */
#ifndef RB_DEADLINE_H
#define RB_DEADLINE_H

#include <stdint.h>
#include <time.h>

/* Now on clk plus ms, normalized. */
static inline struct timespec rb_deadline_ts(clockid_t clk, uint32_t ms)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

#endif
