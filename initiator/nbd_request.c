/* SPDX-License-Identifier: MIT */
/*
 * NBD requests of one client, once they hold their command slots: an
 * rb_io on the client's queue, its completion a reply queued for the
 * client's socket.  Which request runs when (the client's state machine,
 * slot waits, refusals) is nbd_client.c's.
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

struct nbd_req *nbd_req_alloc(struct nbd_client *c)
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
	if (c->nr_reqs++ == 0)
		nbd_client_busy(c, true);
	return req;
}

void nbd_req_put_slots(struct nbd_req *req)
{
	if (req->has_slots) {
		rb_queue_slots_put(req->c->q, req->nr_slots, req->slots);
		req->has_slots = false;
	}
}

void nbd_req_release(struct nbd_req *req)
{
	struct nbd_client *c = req->c;

	nbd_req_put_slots(req);
	req->next = c->free_reqs;
	c->free_reqs = req;
	if (--c->nr_reqs == 0)
		nbd_client_busy(c, false);
}

/* Queue the reply; written after the current batch of completions. */
void nbd_req_queue_reply(struct nbd_client *c, struct nbd_req *req, uint32_t nbd_err)
{
	req->reply.magic = htobe32(NBD_SIMPLE_REPLY_MAGIC);
	req->reply.error = htobe32(nbd_err);
	req->sent = 0;
	rb_fifo_push(&c->replies, req);
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
		nbd_req_put_slots(req);
	nbd_req_queue_reply(c, req, nbd_errno_to_nbd(err));
}

uint8_t nbd_req_opcode(uint16_t type)
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
	io->opcode = nbd_req_opcode(req->type);
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
		nbd_req_put_slots(req);
		nbd_req_queue_reply(c, req, nbd_errno_to_nbd(ret));
		return;
	}
	c->nr_io++;
}
