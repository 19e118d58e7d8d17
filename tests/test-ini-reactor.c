/* SPDX-License-Identifier: MIT */
/*
 * Initiator reactor (initiator/reactor.c): tasks marked owner_only run on
 * the reactor's own thread, never on a thread that drives it meanwhile.
 * Session recovery parks the reactors and drives their CQs and deferred
 * work from its own thread; ublk refuses a queue's commands (EINVAL) from
 * any task but the one that fetched them, so the ublk submit must wait for
 * the owner.  Here a helper thread is the reactor's owner and the main
 * thread plays the recovery thread.  The reactor has no queues and no
 * tick hook here: it links on its own (reactor.c calls nothing above it).
 */
#include "config.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <string.h>

#include "checked.h"
#include "reactor.h"
#include "tap.h"

/* ---- tasks that say where and in which order they ran ---------------------- */

struct probe {
	struct rb_task task;
	const char *name;
	int runs;
	pthread_t ran_on;
};

static char order[64];

static void probe_fn(struct rb_task *t)
{
	struct probe *p = rb_container_of(t, struct probe, task);

	p->runs++;
	p->ran_on = pthread_self();
	strncat(order, p->name, sizeof(order) - strlen(order) - 1);
}

static struct ini_reactor R;
static sem_t owner_ready, owner_go, owner_done;
static pthread_t owner;

/* Stands in for reactor_main: claims the reactor, then runs it when told. */
static void *owner_main(void *arg)
{
	(void)arg;
	R.owner = pthread_self();
	atomic_store(&R.has_owner, true);
	sem_post(&owner_ready);
	sem_wait(&owner_go);
	ini_reactor_progress(&R);
	sem_post(&owner_done);
	return NULL;
}

int main(void)
{
	struct rb_transport_opts topts;
	struct probe own = { .task = { .fn = probe_fn, .owner_only = true }, .name = "O" };
	struct probe any = { .task = { .fn = probe_fn }, .name = "A" };
	struct probe posted = { .task = { .fn = probe_fn, .owner_only = true }, .name = "P" };
	pthread_t self = pthread_self();

	memset(&topts, 0, sizeof(topts));
	if (ini_reactor_init(&R, 0, &topts, 250)) {
		ok(0, "ini_reactor_init");
		return tap_done();
	}

	/* Before a reactor thread exists, setup runs everything where it is. */
	rb_reactor_defer(&R, &own.task);
	ini_reactor_progress(&R);
	is_int(own.runs, 1, "no owner yet: an owner_only task runs on the calling thread");

	sem_init(&owner_ready, 0, 0);
	sem_init(&owner_go, 0, 0);
	sem_init(&owner_done, 0, 0);
	if (pthread_create(&owner, NULL, owner_main, NULL)) {
		ok(0, "pthread_create");
		return tap_done();
	}
	sem_wait(&owner_ready);

	/* The owner is parked; this thread drives the reactor, as recovery does. */
	own.runs = 0;
	order[0] = '\0';
	rb_reactor_defer(&R, &own.task);
	rb_reactor_defer(&R, &any.task);
	ini_reactor_progress(&R);
	is_int(any.runs, 1, "another thread runs an ordinary task");
	ok(pthread_equal(any.ran_on, self), "... on itself");
	is_int(own.runs, 0, "an owner_only task waits for the owner");
	rb_reactor_defer(&R, &own.task);
	rb_reactor_post(&R, &posted.task);
	ini_reactor_progress(&R);
	ini_reactor_progress(&R);
	is_int(own.runs, 0, "still waiting after more rounds and a second defer");
	is_int(posted.runs, 0, "an owner_only task posted from outside waits too");

	/* Resumed: the owner runs each owed task once, in the order owed. */
	sem_post(&owner_go);
	sem_wait(&owner_done);
	pthread_join(owner, NULL);
	is_int(own.runs, 1, "the owner ran the deferred task once (deferred twice meanwhile)");
	ok(pthread_equal(own.ran_on, owner), "... on the owner's thread");
	is_int(posted.runs, 1, "the owner ran the posted task once");
	ok(pthread_equal(posted.ran_on, owner), "... on the owner's thread");
	is_str(order, "AOP", "in the order they were owed");

	/* Nothing left behind for a later round. */
	ini_reactor_progress(&R);
	is_int(own.runs + posted.runs + any.runs, 3, "no task runs a second time");

	ini_reactor_fini(&R);
	sem_destroy(&owner_ready);
	sem_destroy(&owner_go);
	sem_destroy(&owner_done);
	return tap_done();
}
