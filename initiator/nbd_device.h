/* SPDX-License-Identifier: MIT */
/*
 * Kernel block device frontend: attach the export as /dev/nbdN through the
 * NBD netlink interface (nbd_netlink.h), one AF_UNIX socket pair per I/O
 * queue.  The kernel gets one end of each pair; the NBD server
 * (nbd_server.h) serves the other in transmission phase only (the kernel
 * never negotiates), on the matching queue: kernel hardware queue i ->
 * socket i -> rdmablk I/O queue i and its reactor.
 *
 * Life cycle (main thread):
 *   nbd_kdev_open                      before the target is contacted
 *   rb_session_open, nbd_server_create, rb_session_start,
 *   nbd_kdev_attach                    the device is live when it returns
 *   ...
 *   nbd_kdev_disconnect                flush, NBD_CMD_DISCONNECT
 *   nbd_server_shutdown                the kernel closed its sockets
 *   nbd_kdev_wait_gone                 the kernel dropped the device
 *   rb_session_stop, rb_session_close, nbd_server_free, nbd_kdev_free
 */
#ifndef RB_NBD_DEVICE_H
#define RB_NBD_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "nbd_server.h"
#include "session.h"

struct nbd_kdev;

/* Is s a valid --nbd-device value?  For early checks of the command line. */
bool nbd_kdev_name_ok(const char *s);

/*
 * device: "/dev/nbdN" or "auto" (the first free one).  Opens the netlink
 * control socket, so that a missing nbd module or permission fails early,
 * and refuses a /dev/nbdN that is already connected.  Logged.
 */
int nbd_kdev_open(const char *device, struct nbd_kdev **out);
/*
 * Reactors running.  Creates the socket pairs, hands our ends to srv,
 * NBD_CMD_CONNECT with the export's size, block size and flags, confirms
 * with NBD_CMD_STATUS, and caps the kernel's request size at what one NBD
 * request may carry here.  timeout_ms: the session's command timeout;
 * hold_ms: how much longer a request may be held while the session
 * reconnects (its ctrl-loss-tmo).  The kernel's timeout covers both.
 * On failure everything done here is undone (logged); free d after.
 */
int nbd_kdev_attach(struct nbd_kdev *d, struct nbd_server *srv, struct ini_session *s,
		    uint32_t timeout_ms, uint32_t hold_ms);
/* "/dev/nbdN" once attached. */
const char *nbd_kdev_name(const struct nbd_kdev *d);
/* Did the kernel drop the device (someone else disconnected it)?  true
 * only when the kernel answered so; a failed query is false (logged). */
bool nbd_kdev_gone(struct nbd_kdev *d);

/* Attached: flush what the kernel caches for the device (bounded by the
 * command timeouts), then NBD_CMD_DISCONNECT.  Else nothing. */
void nbd_kdev_disconnect(struct nbd_kdev *d);
/* Wait up to ms for the kernel to drop the device's configuration; false
 * (logged) if it is still held, e.g. by a mount. */
bool nbd_kdev_wait_gone(struct nbd_kdev *d, uint32_t ms);
void nbd_kdev_free(struct nbd_kdev *d);

#endif
