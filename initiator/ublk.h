/* SPDX-License-Identifier: MIT */
/*
 * ublk frontend: serves the attached export as a kernel block device
 * /dev/ublkbN through the ublk driver (/dev/ublk-control, io_uring
 * URING_CMD), on top of the session API (session.h).
 *
 * One ublk hardware queue per rdmablk I/O queue, driven by the reactor
 * that owns that queue: its own io_uring, whose ring fd the reactor
 * watches.  Every tag owns one slot of its queue; the slot buffer (queue
 * registered memory) is the tag's I/O buffer, so the kernel copies bio
 * data straight to and from the memory the target RDMA-reads and writes.
 * The tags take all of a queue's slots: the device cannot share the
 * session with another frontend.
 */
#ifndef RB_UBLK_H
#define RB_UBLK_H

#include <stdint.h>

#include "session.h"

struct ublk_dev;

/*
 * Main thread, after rb_session_open, before rb_session_start: ADD_DEV
 * (device id dev_id, or any free one when dev_id < 0) and SET_PARAMS from
 * the export, open /dev/ublkcN, map the queues' descriptor
 * arrays.  Returns 0 or -errno (logged; nothing left behind).
 */
int ublk_dev_create(struct ini_session *s, int dev_id, struct ublk_dev **out);
/* Reactors running: FETCH every tag on its reactor, then START_DEV. */
int ublk_dev_start(struct ublk_dev *d);
/* "/dev/ublkbN". */
const char *ublk_dev_path(const struct ublk_dev *d);
/* Readable (eventfd) once every queue has ended without ublk_dev_stop,
 * i.e. the device was removed behind our back. */
int ublk_dev_event_fd(const struct ublk_dev *d);
/*
 * Reactors running: STOP_DEV (the kernel drains in-flight I/O, which
 * completes or fails through the session), tear the queues down on their
 * reactors, DEL_DEV.  Safe after a failed or partial ublk_dev_start.
 */
void ublk_dev_stop(struct ublk_dev *d);
/* After rb_session_close (late completions may still touch the tags). */
void ublk_dev_free(struct ublk_dev *d);

/*
 * The whole --ublk run: open the session, create and start the device
 * (/dev/ublkb<dev_id>, or the first free id when dev_id < 0),
 * print "attached /dev/ublkbN", notify READY, serve until SIGTERM/SIGINT
 * arrive on sig_fd (a signalfd) or the device disappears, then detach.
 * Returns 0 or -errno.
 */
int ublk_serve(const struct rb_session_params *p, int dev_id, int sig_fd);

#endif
