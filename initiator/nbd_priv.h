/* SPDX-License-Identifier: MIT */
/* NBD frontend internals shared by nbd_server.c, nbd_client.c and nbd_request.c. */
#ifndef RB_NBD_PRIV_H
#define RB_NBD_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fifo.h"
#include "nbd_proto.h"
#include "nbd_server.h"
#include "session.h"

#define NBD_MAX_PAYLOAD (32u << 20)

enum cstate {
	CS_HS_FLAGS, /* reading the client flags */
	CS_HS_OPT_HDR, /* reading an option header */
	CS_HS_OPT_DATA, /* reading option data */
	CS_HS_OPT_SKIP, /* discarding option data too long to buffer */
	CS_HS_CLOSING, /* sending the last handshake reply, then close */
	CS_TX_HDR, /* reading a request header */
	CS_TX_WAIT_SLOTS, /* header parsed; waiting for free slots */
	CS_TX_PAYLOAD, /* reading a WRITE payload into slot buffers */
	CS_TX_DISCARD, /* discarding the payload of a refused WRITE */
	CS_TX_DISC, /* NBD_CMD_DISC seen: finish in-flight work, then close */
};

struct nbd_client;

struct nbd_req {
	struct rb_io io;
	struct rb_slot_waiter w;
	struct nbd_client *c;
	struct nbd_simple_reply reply; /* wire header, filled at completion */
	uint16_t type; /* NBD_CMD_* */
	uint16_t flags;
	uint64_t offset;
	uint32_t length;
	unsigned int nr_slots;
	bool has_slots;
	bool data_reply; /* successful READ: the payload follows the header */
	bool evicted; /* its slot wait already closed stuck clients once */
	uint64_t wait_ms; /* when it began to wait for slots */
	size_t sent; /* reply bytes written */
	struct nbd_req *next; /* reply queue or free list */
	struct rb_slot *slots[]; /* srv->max_slots */
};

RB_FIFO_DECLARE(nbd_req_fifo, struct nbd_req);

struct nbd_rctx {
	struct nbd_server *srv;
	struct ini_reactor *r;
	struct nbd_client *clients; /* owned by r's thread */
	struct rb_task drain_task, force_task;
	struct rb_task hs_task; /* nbd_server_tick: handshake limit */
	atomic_bool hs_posted; /* hs_task queued, not yet run */
	uint64_t hs_grace_ms; /* hs_task: pending input is ours until then (recovery) */
	struct rb_task evict_task; /* closes the clients marked c->evict */
	atomic_bool evict_posted; /* evict_task queued, not yet run */
};

/* A client must finish the handshake within this (qemu-nbd's default
 * handshake limit): one that connects and stalls would hold its place,
 * under nbd-max-clients, for ever. */
#define NBD_HANDSHAKE_LIMIT_MS 10000u

/* At nbd-max-clients, a client with no request for this long after the
 * handshake gives its place to a new one (it can reconnect), so idle
 * connections cannot lock everyone else out. */
#define NBD_IDLE_EVICT_MS 5000u

#define NBD_STAGE (32u << 10)

struct nbd_client {
	struct nbd_server *srv;
	struct nbd_rctx *rc;
	struct ini_queue *q;
	struct ini_reactor *r;
	int fd;
	uint64_t id;
	char desc[128];
	struct rb_poll poll;
	uint32_t events; /* registered with epoll */
	struct rb_task start_task, flush_task, free_task;
	enum cstate st;
	bool handshake;
	bool registered; /* fd is in the reactor's epoll set */
	bool closed; /* fd gone; waiting for in-flight I/O before free */
	bool out_blocked; /* last send hit EAGAIN: wait for EPOLLOUT */
	bool in_drained; /* client_input: a short read emptied the socket */
	bool draining;
	uint64_t sent_ms, read_ms; /* last time bytes went out, came in */
	uint64_t start_ms; /* connected (handshake limit) */
	/* Since when it has had no request (transmission phase); 0: busy or
	 * still in the handshake.  Written by r, read by the accepting thread. */
	atomic_uint_fast64_t idle_since_ms;
	/* Since when its output has been blocked (it does not read what we
	 * send); 0: it goes out.  As good as idle at the cap. */
	atomic_uint_fast64_t stall_since_ms;
	atomic_bool evict; /* chosen to make room at the cap: r closes it */
	bool evicting; /* evict set and counted in nr_evicting; under srv->lock */
	struct nbd_client *anext, *aprev; /* srv->accepted; under srv->lock */

	struct nbd_hs_state hs;
	struct nbd_buf out; /* handshake replies */
	uint8_t hdr[sizeof(struct nbd_request)];
	uint32_t hdr_got;
	/* Transmission phase: one recv picks up many requests, small writes
	 * with their data (copied from here: a 4 KiB memcpy costs less than
	 * the recv it saves); a bigger payload's rest is read in place. */
	uint8_t stage[NBD_STAGE];
	uint32_t st_head, st_tail;
	struct rb_task input_task;
	uint32_t opt, opt_len, opt_got;
	uint8_t *opt_data;
	uint64_t skip; /* bytes still to discard */

	struct nbd_req *req; /* waiting for slots, payload, or discard */
	uint32_t payload_got;
	struct nbd_req_fifo replies; /* ready to write */
	struct nbd_req *free_reqs;
	unsigned int nr_reqs; /* requests not yet fully replied */
	unsigned int nr_io; /* submitted to the session, done() not yet run */
	struct nbd_client *next, *prev;
};

struct nbd_server {
	struct ini_session *s;
	struct nbd_export_desc exp;
	char name[RB_EXPORT_NAME_MAX];
	uint32_t chunk; /* slot buffer size */
	uint32_t max_slots; /* per request */
	uint32_t max_reqs; /* per client */
	struct nbd_rctx *rctx;
	unsigned int nr_rctx;
	atomic_uint rr;
	atomic_uint_fast64_t next_id;
	atomic_bool draining;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int nr_clients; /* open sockets; under lock */
	unsigned int nr_accepted; /* of those, from the listeners (handshake); under lock */
	unsigned int max_clients; /* cap on nr_accepted */
	/* Clients from the listeners, for the accepting thread to pick an
	 * idle one at the cap; a client leaves it (client_gone) before it is
	 * freed.  nr_evicting of them are being closed to make room. */
	struct nbd_client *accepted;
	unsigned int nr_evicting;
	/* Connections refused at the cap (main thread), logged once a second. */
	unsigned int refused;
	uint64_t refused_log_ms;
};

/* nbd_client.c */
/* Whether c has requests (nr_reqs) or not: the idle time for the cap. */
void nbd_client_busy(struct nbd_client *c, bool busy);
/* Drain: stop reading new requests; close once in-flight work is done. */
void nbd_client_drain(struct nbd_client *c);
void nbd_client_close(struct nbd_client *c, const char *why);
/* Read and act on what the client sent, as far as slots and buffers allow. */
void nbd_client_input(struct nbd_client *c);

/* nbd_request.c */
/* A request object for c (from its free list), zeroed, counted in nr_reqs. */
struct nbd_req *nbd_req_alloc(struct nbd_client *c);
/* The rb_io opcode for an NBD command type. */
uint8_t nbd_req_opcode(uint16_t type);
/* The request holds its slots (a WRITE's payload is in them): send the
 * command(s); a refused submit queues the error reply at once. */
void nbd_req_submit(struct nbd_client *c, struct nbd_req *req);
/* Queue req's reply (error nbd_err) for the client's socket. */
void nbd_req_queue_reply(struct nbd_client *c, struct nbd_req *req, uint32_t nbd_err);
/* Give back its slots, if it holds them. */
void nbd_req_put_slots(struct nbd_req *req);
/* Give back its slots and the request itself. */
void nbd_req_release(struct nbd_req *req);

/* Bytes of req's reply on the wire: header, then a READ's data. */
static inline size_t nbd_reply_len(const struct nbd_req *req)
{
	return sizeof(req->reply) + (req->data_reply ? req->length : 0);
}

#endif
