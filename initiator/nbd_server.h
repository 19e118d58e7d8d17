/* SPDX-License-Identifier: MIT */
/*
 * NBD frontend: serves the attached export to NBD clients (fixed newstyle
 * handshake, simple replies) on top of the session API (session.h).
 *
 * Each client connection is bound to one I/O queue and served by that
 * queue's reactor thread.  Write payloads are read from the socket
 * straight into the queue's registered slot buffers and read replies are
 * written (header + buffers, one sendmsg) straight out of them.  When the
 * queue has no free slot the client is not read until one frees.
 *
 * The same client code serves sockets that skip the handshake (the kernel
 * NBD driver speaks only the transmission phase on the sockets it is
 * given): nbd_server_add_client(..., handshake = false).
 */
#ifndef RB_NBD_SERVER_H
#define RB_NBD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "nbd_proto.h"
#include "session.h"

struct nbd_server;

/* After rb_session_open; derives block sizes and flags from the export.
 * max_clients caps the connections from the listeners served at once;
 * sockets added without the handshake (the kernel device's) never count. */
int nbd_server_create(struct ini_session *s, unsigned int max_clients, struct nbd_server **out);
const struct nbd_export_desc *nbd_server_export(const struct nbd_server *srv);

/* Serve fd (connected, any blocking mode) on queue q.  Any thread; the
 * reactors must be running.  desc names the peer in logs.  The server
 * owns fd afterwards, also on error. */
int nbd_server_add_client(struct nbd_server *srv, int fd, struct ini_queue *q, bool handshake,
			  const char *desc);
/* Accept every pending connection on a listening socket and hand each to
 * an I/O queue (round robin over the live ones).  Over max_clients, a
 * connection is closed at once: the client sees EOF.  0, or -errno when
 * out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): the
 * connection stays in the backlog and the socket readable, so the caller
 * should stop watching it for a while; not logged here. */
int nbd_server_accept(struct nbd_server *srv, int listen_fd);

/*
 * Shutdown, main thread, reactors running: refuse new clients, stop
 * reading new requests, let in-flight requests finish and their replies
 * go out for up to ms, then close what is left.
 */
void nbd_server_shutdown(struct nbd_server *srv, uint32_t ms);
/* About once a second, from the main loop: closes clients that have not
 * finished the handshake within NBD_HANDSHAKE_LIMIT_MS, and logs the
 * refusals at the cap not logged yet. */
void nbd_server_tick(struct nbd_server *srv);
/* After rb_session_close (which completes anything still in flight). */
void nbd_server_free(struct nbd_server *srv);

/* ---- the NBD frontend's run (nbd_serve.c) ------------------------------ */

/* Where to serve; at least one of socket, listen, device. */
struct nbd_serve_cfg {
	const char *socket; /* Unix socket path */
	const char *listen; /* "HOST:PORT" */
	bool listen_any; /* a non-loopback listen address is allowed */
	const char *device; /* "/dev/nbdN" or "auto" */
	uint32_t max_clients; /* from the listeners at once */
};

/*
 * The whole NBD run: listeners and the kernel device first (a bad address
 * or busy device fails before the target is touched), the session, then
 * serve until SIGTERM/SIGINT arrive on sig_fd (a signalfd) or the kernel
 * device is disconnected by someone else, then shut down.  Prints
 * "attached /dev/nbdN" with a kernel device.  Returns 0 or -errno.
 */
int nbd_serve(const struct rb_session_params *p, const struct nbd_serve_cfg *cfg, int sig_fd);

/* ---- listening sockets (nbd_listen.c) ---------------------------------- */

#define NBD_MAX_LISTEN 8

struct nbd_listeners {
	int fds[NBD_MAX_LISTEN];
	int nr;
	char unix_path[108]; /* unlinked at close if we created it */
};

void nbd_listeners_init(struct nbd_listeners *ls);
/* Unix socket at path (a stale socket file is replaced; one in use is an
 * error).  Access is controlled by the file mode (umask) and directory. */
int nbd_listen_unix(struct nbd_listeners *ls, const char *path);
/* "HOST:PORT"; every address HOST resolves to must be loopback unless
 * allow_any (NBD has neither authentication nor encryption). */
int nbd_listen_tcp(struct nbd_listeners *ls, const char *hostport, bool allow_any);
void nbd_listeners_close(struct nbd_listeners *ls);
bool nbd_addr_is_loopback(const struct sockaddr *sa);
/* "1.2.3.4:5" / "[::1]:5" for logs. */
void nbd_format_addr(const struct sockaddr *sa, char *buf, size_t len);
/* A listening socket's address for logs: "unix:PATH" or as above. */
void nbd_listener_name(int fd, char *buf, size_t len);

#endif
