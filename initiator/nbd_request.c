/* SPDX-License-Identifier: MIT */
/*
 * NBD requests of one client: a parsed request header becomes an rb_io on
 * the client's queue once it holds enough command slots (waiting for them,
 * and closing other clients of the queue that sit on slots without moving
 * data, see close_stuck_clients), then a reply queued for the client's
 * socket.  The socket side, the handshake and the client's life cycle are
 * in nbd_client.c.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "log.h"
#include "nbd_priv.h"

static struct nbd_req *req_alloc(struct nbd_client *c)
{
	struct nbd_req *req = c->free_reqs;

	if (req) {
		c->free_reqs = req->next;
	} else {
		req = malloc(sizeof(*req) + c->srv->max_slots * sizeof(req->slots[0]));
		if (!req)
			return NULL;
	}
	memset(req, 0, sizeof(*req));
	req->c = c;
	c->nr_reqs++;
	return req;
}

static void req_put_slots(struct nbd_req *req)
{
	if (req->has_slots) {
		rb_queue_slots_put(req->c->q, req->nr_slots, req->slots);
		req->has_slots = false;
	}
}

void nbd_req_release(struct nbd_req *req)
{
	struct nbd_client *c = req->c;

	req_put_slots(req);
	req->next = c->free_reqs;
	c->free_reqs = req;
	c->nr_reqs--;
}

/* Queue the reply; written after the current batch of completions. */
void nbd_req_queue_reply(struct nbd_client *c, struct nbd_req *req, uint32_t nbd_err)
{
	req->reply.magic = htobe32(NBD_SIMPLE_REPLY_MAGIC);
	req->reply.error = htobe32(nbd_err);
	req->sent = 0;
	req->next = NULL;
	if (c->rq_tail)
		c->rq_tail->next = req;
	else
		c->rq_head = req;
	c->rq_tail = req;
	rb_reactor_defer(c->r, &c->flush_task);
}

static void req_done(struct rb_io *io, int err)
{
	struct nbd_req *req = io->priv;
	struct nbd_client *c = req->c;

	c->nr_io--;
	if (c->closed) {
		nbd_req_release(req);
		rb_reactor_defer(c->r, &c->free_task);
		return;
	}
	if (!err && req->type == NBD_CMD_READ)
		req->data_reply = true; /* slots stay until the data went out */
	else
		req_put_slots(req);
	nbd_req_queue_reply(c, req, nbd_errno_to_nbd(err));
}

static uint8_t rb_opcode_for(uint16_t type)
{
	switch (type) {
	case NBD_CMD_READ: return RB_OP_READ;
	case NBD_CMD_WRITE: return RB_OP_WRITE;
	case NBD_CMD_FLUSH: return RB_OP_FLUSH;
	case NBD_CMD_TRIM: return RB_OP_DISCARD;
	default: return RB_OP_WRITE_ZEROES;
	}
}

void nbd_req_submit(struct nbd_client *c, struct nbd_req *req)
{
	struct rb_io *io = &req->io;
	int ret;

	memset(io, 0, sizeof(*io));
	io->opcode = rb_opcode_for(req->type);
	/* FUA matters only where data is written; the target refuses it on
	 * the others, and NBD allows ignoring it there. */
	if ((req->flags & NBD_CMD_FLAG_FUA) &&
	    (io->opcode == RB_OP_WRITE || io->opcode == RB_OP_WRITE_ZEROES))
		io->flags = RB_CMD_F_FUA;
	/* Validated against what was advertised, which the target's flags gate. */
	if (io->opcode == RB_OP_WRITE_ZEROES) {
		if (req->flags & NBD_CMD_FLAG_NO_HOLE)
			io->flags |= RB_CMD_F_NO_HOLE;
		if (req->flags & NBD_CMD_FLAG_FAST_ZERO)
			io->flags |= RB_CMD_F_FAST_ZERO;
	}
	if (io->opcode != RB_OP_FLUSH) {
		io->offset = req->offset;
		io->length = req->length;
	}
	io->nr_slots = req->nr_slots;
	io->slots = req->slots;
	io->done = req_done;
	io->priv = req;
	ret = rb_queue_submit(c->q, io);
	if (ret) {
		req_put_slots(req);
		nbd_req_queue_reply(c, req, nbd_errno_to_nbd(ret));
		return;
	}
	c->nr_io++;
}

/* A request that will not reach the target: consume any payload, reply. */
static void refuse_req(struct nbd_client *c, struct nbd_req *req, uint32_t nbd_err)
{
	req_put_slots(req);
	if (req->type == NBD_CMD_WRITE && req->length) {
		req->reply.error = htobe32(nbd_err);
		c->req = req;
		c->skip = req->length;
		c->st = CS_TX_DISCARD;
		return;
	}
	c->req = NULL;
	c->st = CS_TX_HDR;
	nbd_req_queue_reply(c, req, nbd_err);
}

static void got_slots(struct nbd_client *c, struct nbd_req *req)
{
	req->has_slots = true;
	if (req->type == NBD_CMD_WRITE) {
		c->req = req;
		c->payload_got = 0;
		c->st = CS_TX_PAYLOAD;
		return;
	}
	c->req = NULL;
	c->st = CS_TX_HDR;
	nbd_req_submit(c, req);
}

/* Holds command slots and has not moved since @since, though only it can:
 * its replies wait for it to read them, or we wait for the rest of its
 * payload.  (A reader that still sends requests is stuck all the same.) */
static bool client_stuck(const struct nbd_client *c, uint64_t since)
{
	if (c->closed)
		return false;
	if (c->st == CS_TX_PAYLOAD && c->req && c->req->has_slots && c->read_ms <= since)
		return true;
	if (!c->out_blocked || c->sent_ms > since)
		return false;
	for (const struct nbd_req *req = c->rq_head; req; req = req->next)
		if (req->has_slots)
			return true;
	return false;
}

/*
 * req waited a whole command timeout for slots of its queue.  Clients of
 * that queue which moved no data all that time while holding slots
 * (a reader that never reads its replies, a writer stopped in the middle
 * of a payload) are closed, so one stuck client cannot fail the others'
 * I/O.  Returns how many were closed.
 */
static unsigned int close_stuck_clients(struct nbd_client *c, const struct nbd_req *req)
{
	unsigned int n = 0;

	for (struct nbd_client *o = c->rc->clients; o; o = o->next) {
		if (o == c || o->q != c->q || !client_stuck(o, req->wait_ms))
			continue;
		rb_warn("nbd client %" PRIu64 " (%s): holds command slots and moved no data for "
			"%" PRIu64 " ms while client %" PRIu64 " waited for a slot; closing it",
			o->id, o->desc, rb_now_ms() - req->wait_ms, c->id);
		nbd_client_close(o, "stuck while holding command slots");
		n++;
	}
	return n;
}

static void on_slots(struct rb_slot_waiter *w, int err)
{
	struct nbd_req *req = rb_container_of(w, struct nbd_req, w);
	struct nbd_client *c = req->c;

	if (err == -ETIMEDOUT && !req->evicted && close_stuck_clients(c, req)) {
		/* Once: a queue that stays full after that is the target's doing. */
		req->evicted = true;
		err = rb_queue_slots_get(c->q, req->nr_slots, req->slots);
		if (err == -EAGAIN) {
			req->wait_ms = rb_now_ms();
			rb_queue_slots_wait(c->q, &req->w);
			return;
		}
	}
	if (err)
		refuse_req(c, req, nbd_errno_to_nbd(err == -ETIMEDOUT ? -EIO : err));
	else
		got_slots(c, req);
	nbd_client_input(c); /* reading was paused while we waited */
}

static void start_req(struct nbd_client *c, const struct nbd_req_hdr *h)
{
	struct nbd_req *req = req_alloc(c);
	int ret;

	if (!req) {
		nbd_client_close(c, "out of memory");
		return;
	}
	req->reply.handle = h->handle;
	req->type = h->type;
	req->flags = h->flags;
	req->offset = h->offset;
	req->length = h->length;
	req->nr_slots = rb_queue_slots_for(c->q, rb_opcode_for(h->type), h->length);
	ret = rb_queue_slots_get(c->q, req->nr_slots, req->slots);
	if (ret == -EAGAIN) {
		/* Backpressure: stop reading this client until slots free. */
		req->w.fn = on_slots;
		req->w.slots = req->slots;
		req->w.n = req->nr_slots;
		c->req = req;
		c->st = CS_TX_WAIT_SLOTS;
		req->wait_ms = rb_now_ms();
		rb_queue_slots_wait(c->q, &req->w);
		return;
	}
	if (ret) {
		refuse_req(c, req, nbd_errno_to_nbd(ret));
		return;
	}
	got_slots(c, req);
}

/* A complete request header is in c->hdr. */
void nbd_req_handle(struct nbd_client *c)
{
	struct nbd_req_hdr h;
	struct nbd_req *req;
	uint32_t err;

	c->hdr_got = 0;
	if (!nbd_decode_request(c->hdr, &h)) {
		nbd_client_close(c, "bad request magic (stream out of sync)");
		return;
	}
	switch (nbd_check_request(&c->srv->exp, &h, &err)) {
	case NBD_RC_DISCONNECT:
		rb_dbg("nbd client %" PRIu64 ": NBD_CMD_DISC", c->id);
		c->st = CS_TX_DISC;
		return;
	case NBD_RC_REPLY:
		if (err)
			rb_dbg("nbd client %" PRIu64 ": %s offset %" PRIu64 " length %u flags %#x "
			       "refused: NBD error %u",
			       c->id, nbd_cmd_name(h.type), h.offset, h.length, h.flags, err);
		req = req_alloc(c);
		if (!req) {
			nbd_client_close(c, "out of memory");
			return;
		}
		req->reply.handle = h.handle;
		req->type = h.type;
		req->length = h.length;
		refuse_req(c, req, err);
		return;
	case NBD_RC_EXECUTE:
		start_req(c, &h);
		return;
	}
}
