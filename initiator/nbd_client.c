/* SPDX-License-Identifier: MIT */
/*
 * NBD client connections: one state machine per connection, run by the
 * reactor that owns the client's I/O queue.  Sockets are non-blocking and
 * level-triggered; reading stops (EPOLLIN off) whenever the next step
 * cannot proceed: no free slot, too many replies not yet written, output
 * still pending in the handshake, or the server is draining.  Only this
 * file moves c->st: a request header becomes an nbd_req holding command
 * slots here (waiting for them, and closing clients that sit on slots
 * without moving data, see close_stuck_clients); nbd_request.c turns it
 * into I/O on the queue and its completion into a queued reply, which
 * client_flush writes.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "checked.h"
#include "log.h"
#include "nbd_priv.h"

#define IOV_BATCH 64
#define READ_BUDGET 64 /* requests parsed per readiness event, for fairness */
#define SCRATCH_SIZE 16384

static _Thread_local uint8_t scratch[SCRATCH_SIZE];

static void client_flush(struct nbd_client *c);
static void client_close(struct nbd_client *c, const char *why);

/* ---- socket I/O ------------------------------------------------------------ */

/* >0 bytes, 0 would block, <0 the client is gone (closed here, with eof_msg
 * when it hung up). */
static ssize_t c_read_iov(struct nbd_client *c, struct iovec *iov, int n, const char *eof_msg)
{
	size_t want = 0;

	/* A short read emptied the socket: asking again would only hear
	 * EAGAIN; the level-triggered epoll reports what comes later. */
	if (c->in_drained)
		return 0;
	for (int i = 0; i < n; i++)
		want += iov[i].iov_len;
	for (;;) {
		ssize_t r = readv(c->fd, iov, n);

		if (r > 0) {
			c->in_drained = (size_t)r < want;
			c->read_ms = rb_now_ms();
			return r;
		}
		if (r == 0) {
			client_close(c, eof_msg);
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		client_close(c, strerror(errno));
		return -1;
	}
}

static ssize_t c_read(struct nbd_client *c, void *buf, size_t len)
{
	struct iovec v = { .iov_base = buf, .iov_len = len };

	return c_read_iov(c, &v, 1,
			  c->st == CS_TX_HDR && c->hdr_got == 0 ?
				  "client closed the connection" :
				  "client closed the connection mid-message");
}

static ssize_t c_readv(struct nbd_client *c, struct iovec *iov, int n)
{
	return c_read_iov(c, iov, n, "client closed the connection mid-write");
}

/* Take up to len staged bytes into buf; returns how many. */
static uint32_t stage_take(struct nbd_client *c, void *buf, uint32_t len)
{
	uint32_t avail = c->st_tail - c->st_head;

	if (len > avail)
		len = avail;
	memcpy(buf, c->stage + c->st_head, len);
	c->st_head += len;
	if (c->st_head == c->st_tail)
		c->st_head = c->st_tail = 0;
	return len;
}

/* Read until c->hdr holds want bytes; true when complete.  In the
 * transmission phase headers come through the stage, so pipelined
 * requests cost one recv for many. */
static bool read_hdr(struct nbd_client *c, uint32_t want, bool *stop)
{
	ssize_t n;

	if (c->st == CS_TX_HDR) {
		if (c->st_head == c->st_tail) {
			n = c_read(c, c->stage, sizeof(c->stage));
			if (n <= 0) {
				*stop = true;
				return false;
			}
			c->st_head = 0;
			c->st_tail = (uint32_t)n;
		}
		c->hdr_got += stage_take(c, c->hdr + c->hdr_got, want - c->hdr_got);
		return c->hdr_got == want;
	}
	n = c_read(c, c->hdr + c->hdr_got, want - c->hdr_got);
	if (n <= 0) {
		*stop = true;
		return false;
	}
	c->hdr_got += (uint32_t)n;
	return c->hdr_got == want;
}

static bool want_read(const struct nbd_client *c)
{
	if (c->closed)
		return false;
	switch (c->st) {
	case CS_HS_FLAGS:
	case CS_HS_OPT_HDR:
	case CS_HS_OPT_DATA:
	case CS_HS_OPT_SKIP:
		/* A client must wait for our reply before its next option. */
		return c->out.len == 0 && !c->draining;
	case CS_TX_HDR:
		return c->out.len == 0 && !c->draining && c->nr_reqs < c->srv->max_reqs;
	case CS_TX_PAYLOAD:
	case CS_TX_DISCARD:
		return true;
	default:
		return false;
	}
}

static void update_events(struct nbd_client *c)
{
	uint32_t ev = 0;
	int ret;

	if (c->closed)
		return;
	if (want_read(c)) {
		ev |= EPOLLIN;
		/* Staged requests raise no readiness event: come back for them. */
		if (c->st_head != c->st_tail)
			rb_reactor_defer(c->r, &c->input_task);
	}
	if (c->out_blocked)
		ev |= EPOLLOUT;
	if (ev == c->events)
		return;
	ret = rb_reactor_mod(c->r, c->fd, ev, &c->poll);
	if (ret) {
		client_close(c, strerror(-ret));
		return;
	}
	c->events = ev;
}

/* Done with everything after DISC or while draining: close. */
static void maybe_finish(struct nbd_client *c)
{
	if (c->closed || c->nr_reqs || !rb_fifo_empty(&c->replies) || c->out.len)
		return;
	if (c->st == CS_TX_DISC)
		client_close(c, "client disconnected (NBD_CMD_DISC)");
	else if (c->draining && c->st == CS_TX_HDR)
		client_close(c, "server shutting down");
}

/* ---- handshake ------------------------------------------------------------- */

static void handle_option(struct nbd_client *c, const uint8_t *data)
{
	const char *why;
	enum nbd_opt_result res;

	res = nbd_handle_option(&c->srv->exp, &c->hs, c->opt, data, c->opt_len, &c->out, &why);
	rb_dbg("nbd client %" PRIu64 ": option %s (%u bytes)%s%s", c->id, nbd_opt_name(c->opt),
	       c->opt_len, *why ? ": " : "", why);
	if (c->out.oom) {
		client_close(c, "out of memory");
		return;
	}
	c->hdr_got = 0;
	switch (res) {
	case NBD_OPT_R_CONTINUE:
		c->st = CS_HS_OPT_HDR;
		break;
	case NBD_OPT_R_TRANSMISSION:
		free(c->opt_data);
		c->opt_data = NULL;
		c->st = CS_TX_HDR;
		nbd_client_busy(c, false);
		rb_info("nbd client %" PRIu64 " (%s): serving export '%s' on queue %u", c->id,
			c->desc, c->srv->exp.name, rb_queue_id(c->q));
		break;
	case NBD_OPT_R_CLOSE:
		rb_info("nbd client %" PRIu64 " (%s): handshake ended: %s", c->id, c->desc, why);
		c->st = CS_HS_CLOSING;
		break;
	}
	client_flush(c);
}

static void handshake_step(struct nbd_client *c, bool *stop)
{
	struct nbd_opt_hdr oh;
	ssize_t n;

	switch (c->st) {
	case CS_HS_FLAGS: {
		uint32_t flags;

		if (!read_hdr(c, 4, stop))
			return;
		memcpy(&flags, c->hdr, 4);
		c->hdr_got = 0;
		if (!nbd_client_flags_ok(be32toh(flags), &c->hs)) {
			client_close(c, "unknown client flags");
			*stop = true;
			return;
		}
		c->st = CS_HS_OPT_HDR;
		return;
	}
	case CS_HS_OPT_HDR:
		if (!read_hdr(c, sizeof(oh), stop))
			return;
		memcpy(&oh, c->hdr, sizeof(oh));
		c->hdr_got = 0;
		if (be64toh(oh.magic) != NBD_IHAVEOPT) {
			client_close(c, "bad option magic");
			*stop = true;
			return;
		}
		c->opt = be32toh(oh.option);
		c->opt_len = be32toh(oh.length);
		c->opt_got = 0;
		if (c->opt_len > NBD_MAX_OPT_DATA) {
			c->skip = c->opt_len;
			c->st = CS_HS_OPT_SKIP;
			return;
		}
		if (!c->opt_data) {
			c->opt_data = malloc(NBD_MAX_OPT_DATA);
			if (!c->opt_data) {
				client_close(c, "out of memory");
				*stop = true;
				return;
			}
		}
		if (c->opt_len == 0) {
			handle_option(c, c->opt_data);
			return;
		}
		c->st = CS_HS_OPT_DATA;
		return;
	case CS_HS_OPT_DATA:
		n = c_read(c, c->opt_data + c->opt_got, c->opt_len - c->opt_got);
		if (n <= 0) {
			*stop = true;
			return;
		}
		c->opt_got += (uint32_t)n;
		if (c->opt_got == c->opt_len)
			handle_option(c, c->opt_data);
		return;
	case CS_HS_OPT_SKIP:
		n = c_read(c, scratch, c->skip < SCRATCH_SIZE ? (size_t)c->skip : SCRATCH_SIZE);
		if (n <= 0) {
			*stop = true;
			return;
		}
		c->skip -= (uint64_t)n;
		if (!c->skip)
			handle_option(c, NULL);
		return;
	default:
		*stop = true;
		return;
	}
}

/* ---- requests: header to slots -------------------------------------------- */

/* A request that will not reach the target: consume any payload, reply. */
static void refuse_req(struct nbd_client *c, struct nbd_req *req, uint32_t nbd_err)
{
	nbd_req_put_slots(req);
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
	for (const struct nbd_req *req = c->replies.head; req; req = req->next)
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
		client_close(o, "stuck while holding command slots");
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
	struct nbd_req *req = nbd_req_alloc(c);
	int ret;

	if (!req) {
		client_close(c, "out of memory");
		return;
	}
	req->reply.handle = h->handle;
	req->type = h->type;
	req->flags = h->flags;
	req->offset = h->offset;
	req->length = h->length;
	req->nr_slots = rb_queue_slots_for(c->q, nbd_req_opcode(h->type), h->length);
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

/* A complete request header is in c->hdr: validate it, then start it or
 * refuse it. */
static void handle_request(struct nbd_client *c)
{
	struct nbd_req_hdr h;
	struct nbd_req *req;
	uint32_t err;

	c->hdr_got = 0;
	if (!nbd_decode_request(c->hdr, &h)) {
		client_close(c, "bad request magic (stream out of sync)");
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
		req = nbd_req_alloc(c);
		if (!req) {
			client_close(c, "out of memory");
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

/* ---- transmission input ------------------------------------------------------ */

static void read_payload(struct nbd_client *c, bool *stop)
{
	struct nbd_req *req = c->req;
	struct iovec iov[IOV_BATCH];
	uint32_t got = c->payload_got, chunk = c->srv->chunk;
	int n = 0;
	ssize_t r;

	/* Payload bytes that arrived with the header: a bounded copy. */
	while (c->st_head != c->st_tail && got < req->length) {
		uint32_t k = got / chunk, off = got % chunk;
		uint32_t len = chunk - off < req->length - got ? chunk - off : req->length - got;

		got += stage_take(c, (uint8_t *)req->slots[k]->buf + off, len);
	}
	c->payload_got = got;
	if (got == req->length)
		goto out_complete;
	while (got < req->length && n < IOV_BATCH) {
		uint32_t k = got / chunk, off = got % chunk;
		uint32_t len = chunk - off < req->length - got ? chunk - off : req->length - got;

		iov[n].iov_base = (uint8_t *)req->slots[k]->buf + off;
		iov[n].iov_len = len;
		n++;
		got += len;
	}
	r = c_readv(c, iov, n);
	if (r <= 0) {
		*stop = true;
		return;
	}
	c->payload_got += (uint32_t)r;
out_complete:
	if (c->payload_got == req->length) {
		c->req = NULL;
		c->st = CS_TX_HDR;
		nbd_req_submit(c, req);
	}
}

static void discard_payload(struct nbd_client *c, bool *stop)
{
	size_t want = c->skip < SCRATCH_SIZE ? (size_t)c->skip : SCRATCH_SIZE;
	ssize_t n = c->st_head != c->st_tail ? (ssize_t)stage_take(c, scratch, (uint32_t)want) :
					       c_read(c, scratch, want);
	struct nbd_req *req;

	if (n <= 0) {
		*stop = true;
		return;
	}
	c->skip -= (uint64_t)n;
	if (c->skip)
		return;
	req = c->req;
	c->req = NULL;
	c->st = CS_TX_HDR;
	nbd_req_queue_reply(c, req, be32toh(req->reply.error));
}

void nbd_client_input(struct nbd_client *c)
{
	bool stop = false;

	c->in_drained = false;
	for (int budget = READ_BUDGET; budget > 0 && !stop && want_read(c);) {
		switch (c->st) {
		case CS_TX_HDR:
			if (read_hdr(c, sizeof(struct nbd_request), &stop)) {
				handle_request(c);
				budget--;
			}
			break;
		case CS_TX_PAYLOAD:
			read_payload(c, &stop);
			break;
		case CS_TX_DISCARD:
			discard_payload(c, &stop);
			break;
		default:
			handshake_step(c, &stop);
			break;
		}
	}
	maybe_finish(c);
	update_events(c);
}

/* ---- output ------------------------------------------------------------------ */

/* iovecs for what is left of req's reply; returns how many were filled. */
static int reply_iov(const struct nbd_client *c, const struct nbd_req *req, struct iovec *iov,
		     int max)
{
	size_t pos = req->sent, hl = sizeof(req->reply);
	uint32_t chunk = c->srv->chunk;
	int n = 0;

	if (pos < hl) {
		iov[n].iov_base = (uint8_t *)&req->reply + pos;
		iov[n++].iov_len = hl - pos;
		pos = hl;
	}
	if (!req->data_reply)
		return n;
	for (size_t d = pos - hl; d < req->length && n < max;) {
		size_t k = d / chunk, off = d % chunk;
		size_t len = chunk - off < req->length - d ? chunk - off : req->length - d;

		iov[n].iov_base = (uint8_t *)req->slots[k]->buf + off;
		iov[n++].iov_len = len;
		d += len;
	}
	return n;
}

/* Account n written bytes against the reply queue. */
static void replies_sent(struct nbd_client *c, size_t n)
{
	while (n && !rb_fifo_empty(&c->replies)) {
		struct nbd_req *req = c->replies.head;
		size_t left = nbd_reply_len(req) - req->sent;

		if (n < left) {
			req->sent += n;
			return;
		}
		n -= left;
		nbd_req_release(rb_fifo_pop(&c->replies));
	}
}

/* false: would block or the client was closed. */
static bool send_out(struct nbd_client *c, struct iovec *iov, int n, size_t *sent)
{
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)n };

	for (;;) {
		ssize_t r = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (r >= 0) {
			*sent = (size_t)r;
			c->sent_ms = rb_now_ms();
			atomic_store(&c->stall_since_ms, 0);
			return true;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			c->out_blocked = true;
			if (!atomic_load(&c->stall_since_ms))
				atomic_store(&c->stall_since_ms, rb_now_ms());
			return false;
		}
		client_close(c, strerror(errno));
		return false;
	}
}

static void client_flush(struct nbd_client *c)
{
	struct iovec iov[IOV_BATCH];
	size_t sent;

	if (c->closed)
		return;
	c->out_blocked = false;
	while (c->out.len) {
		iov[0] = (struct iovec){ .iov_base = c->out.data, .iov_len = c->out.len };
		if (!send_out(c, iov, 1, &sent))
			goto out;
		nbd_buf_consume(&c->out, sent);
	}
	if (c->st == CS_HS_CLOSING) {
		client_close(c, "handshake finished without an export");
		return;
	}
	while (!rb_fifo_empty(&c->replies)) {
		int n = 0;

		for (struct nbd_req *req = c->replies.head; req && n < IOV_BATCH; req = req->next)
			n += reply_iov(c, req, iov + n, IOV_BATCH - n);
		if (!send_out(c, iov, n, &sent))
			goto out;
		replies_sent(c, sent);
	}
out:
	if (c->closed)
		return;
	maybe_finish(c);
	update_events(c);
}

static void input_task(struct rb_task *t)
{
	nbd_client_input(rb_container_of(t, struct nbd_client, input_task));
}

static void flush_task(struct rb_task *t)
{
	client_flush(rb_container_of(t, struct nbd_client, flush_task));
}

/* ---- client life cycle --------------------------------------------------------- */

static void client_gone(struct nbd_client *c)
{
	struct nbd_server *srv = c->srv;

	pthread_mutex_lock(&srv->lock);
	srv->nr_clients--;
	if (c->handshake) {
		srv->nr_accepted--;
		if (c->aprev)
			c->aprev->anext = c->anext;
		else
			srv->accepted = c->anext;
		if (c->anext)
			c->anext->aprev = c->aprev;
	}
	if (c->evicting)
		srv->nr_evicting--;
	pthread_cond_broadcast(&srv->cond);
	pthread_mutex_unlock(&srv->lock);
}

void nbd_client_busy(struct nbd_client *c, bool busy)
{
	/* The kernel's sockets never count against the cap. */
	if (!c->handshake)
		return;
	atomic_store(&c->idle_since_ms, busy || c->st < CS_TX_HDR ? 0 : rb_now_ms());
}

static void client_close(struct nbd_client *c, const char *why)
{
	struct nbd_req *req;

	if (c->closed)
		return;
	c->closed = true;
	rb_info("nbd client %" PRIu64 " (%s): closed: %s", c->id, c->desc, why);
	if (c->registered)
		rb_reactor_del(c->r, c->fd);
	close(c->fd);
	c->fd = -1;
	if (c->req) {
		if (c->st == CS_TX_WAIT_SLOTS)
			rb_queue_slots_cancel(c->q, &c->req->w);
		nbd_req_release(c->req);
		c->req = NULL;
	}
	while ((req = rb_fifo_pop(&c->replies)))
		nbd_req_release(req);
	client_gone(c);
	rb_reactor_defer(c->r, &c->free_task);
}

static void free_task(struct rb_task *t)
{
	struct nbd_client *c = rb_container_of(t, struct nbd_client, free_task);

	if (c->nr_io)
		return; /* the last req_done defers us again */
	if (c->flush_task.queued || c->input_task.queued) {
		rb_reactor_defer(c->r, &c->free_task); /* after they ran */
		return;
	}
	if (c->prev)
		c->prev->next = c->next;
	else if (c->rc->clients == c)
		c->rc->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	while (c->free_reqs) {
		struct nbd_req *req = c->free_reqs;

		c->free_reqs = req->next;
		free(req);
	}
	free(c->opt_data);
	nbd_buf_free(&c->out);
	free(c);
}

static void on_client_event(struct rb_poll *p, uint32_t events)
{
	struct nbd_client *c = rb_container_of(p, struct nbd_client, poll);

	if (events & EPOLLOUT)
		client_flush(c);
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		nbd_client_input(c);
	/* Hung up while we were not reading (e.g. waiting for slots). */
	if (!c->closed && (events & (EPOLLHUP | EPOLLERR)))
		client_close(c, events & EPOLLERR ? "socket error" : "connection hung up");
}

static void client_start(struct rb_task *t)
{
	struct nbd_client *c = rb_container_of(t, struct nbd_client, start_task);
	int ret;

	c->next = c->rc->clients;
	if (c->next)
		c->next->prev = c;
	c->rc->clients = c;
	if (atomic_load(&c->srv->draining)) {
		client_close(c, "server shutting down");
		return;
	}
	ret = rb_reactor_add(c->r, c->fd, EPOLLIN, &c->poll);
	if (ret) {
		client_close(c, strerror(-ret));
		return;
	}
	c->registered = true;
	c->events = EPOLLIN;
	c->start_ms = rb_now_ms();
	rb_info("nbd client %" PRIu64 " (%s): connected, queue %u", c->id, c->desc,
		rb_queue_id(c->q));
	if (c->handshake) {
		nbd_put_greeting(&c->out);
		c->st = CS_HS_FLAGS;
		client_flush(c);
	} else {
		c->st = CS_TX_HDR;
		update_events(c);
	}
}

int nbd_server_add_client(struct nbd_server *srv, int fd, struct ini_queue *q, bool handshake,
			  const char *desc)
{
	struct nbd_client *c = calloc(1, sizeof(*c));

	if (!c) {
		rb_err("nbd: out of memory for client %s", desc);
		close(fd);
		return -ENOMEM;
	}
	c->handshake = handshake;
	pthread_mutex_lock(&srv->lock);
	if (atomic_load(&srv->draining)) {
		pthread_mutex_unlock(&srv->lock);
		close(fd);
		free(c);
		return -ESHUTDOWN;
	}
	srv->nr_clients++;
	if (handshake) {
		srv->nr_accepted++;
		c->anext = srv->accepted;
		if (c->anext)
			c->anext->aprev = c;
		srv->accepted = c;
	}
	pthread_mutex_unlock(&srv->lock);
	c->srv = srv;
	c->q = q;
	c->r = rb_queue_reactor(q);
	c->rc = &srv->rctx[rb_reactor_id(c->r)];
	c->fd = fd;
	c->id = atomic_fetch_add(&srv->next_id, 1);
	snprintf(c->desc, sizeof(c->desc), "%s", desc);
	nbd_buf_init(&c->out);
	c->poll.fn = on_client_event;
	c->start_task.fn = client_start;
	c->flush_task.fn = flush_task;
	c->input_task.fn = input_task;
	c->free_task.fn = free_task;
	c->st = handshake ? CS_HS_FLAGS : CS_TX_HDR;
	rb_reactor_post(c->r, &c->start_task);
	return 0;
}

void nbd_client_drain(struct nbd_client *c)
{
	if (c->closed)
		return;
	c->draining = true;
	if (c->st < CS_TX_HDR) {
		client_close(c, "server shutting down");
		return;
	}
	maybe_finish(c);
	update_events(c);
}

void nbd_client_close(struct nbd_client *c, const char *why)
{
	client_close(c, why);
}
