/* SPDX-License-Identifier: MIT */
/* Thread helpers shared by both daemons. */
#ifndef RB_THREAD_H
#define RB_THREAD_H

#include <pthread.h>
#include <stdio.h>

/*
 * Name a thread "PREFIX-ID" (15 characters at most) for ps -L, top -H and
 * the tests that look at reactor threads.  A name is only a label: a failure
 * (a name too long is cut by snprintf first) changes nothing else.
 */
static inline void rb_name_thread(pthread_t t, const char *prefix, int id)
{
	char name[16];

	snprintf(name, sizeof(name), "%s-%d", prefix, id);
	(void)pthread_setname_np(t, name);
}

#endif
