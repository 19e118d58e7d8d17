/* SPDX-License-Identifier: MIT */
/*
 * "tcp" transport receive side: headers read through an adaptive staging
 * buffer, payload readv'd straight into the posted receive or the
 * registered region a WRITE / READ_RESP names (after the key and bounds
 * check), acks owed and sent, and the per-event service of a connection.
 * The frame format is described in transport_tcp.c.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "checked.h"
#include "log.h"
#include "log_limit.h"
#include "transport_tcp_priv.h"

#define TCP_RX_BUDGET 16 /* read syscalls per connection per event */

/* ---- receive side ------------------------------------------------------- */

static void rx_iov_set(struct tcp_rx *rx, const struct iovec *src, int n, uint64_t len)
{
	rx->iovcnt = 0;
	rx->iovidx = 0;
	for (int i = 0; i < n && len; i++) {
		size_t l = src[i].iov_len < len ? src[i].iov_len : (size_t)len;

		rx->iov[rx->iovcnt].iov_base = src[i].iov_base;
		rx->iov[rx->iovcnt++].iov_len = l;
		len -= l;
	}
}

static void rx_iov_advance(struct tcp_rx *rx, const uint8_t *src, size_t n)
{
	while (n) {
		struct iovec *v = &rx->iov[rx->iovidx];
		size_t l = v->iov_len < n ? v->iov_len : n;

		if (src) {
			memcpy(v->iov_base, src, l);
			src += l;
		}
		v->iov_base = (char *)v->iov_base + l;
		v->iov_len -= l;
		n -= l;
		if (!v->iov_len)
			rx->iovidx++;
	}
}

static void rx_data_done(struct tcp_conn *c)
{
	struct tcp_rx *rx = &c->rx;
	struct tcp_wr *w = rx->wr;

	rx->in_data = false;
	rx->wr = NULL;
	switch (rx->type) {
	case F_SEND:
		w->byte_len = rx->total;
		tcp_wr_complete(c, w, RB_WC_SUCCESS);
		/* fall through */
	case F_WRITE:
		c->rx_count++;
		if (!rx->lazy)
			c->ack_urgent = true;
		tcp_conn_kick(c);
		break;
	case F_READ_RESP:
		tcp_wr_complete(c, w, RB_WC_SUCCESS);
		break;
	}
}

static void rx_data_begin(struct tcp_conn *c, uint8_t type, struct tcp_wr *w,
			  const struct iovec *iov, int n, uint32_t len)
{
	struct tcp_rx *rx = &c->rx;

	rx->type = type;
	rx->wr = w;
	rx->total = len;
	rx->left = len;
	rx->in_data = true;
	rx_iov_set(rx, iov, n, len);
	if (!len)
		rx_data_done(c);
}

/* Each of these ends the connection, but a peer can reconnect and repeat at
 * will: rate-limited. */
static struct rb_log_limit proto_err = RB_LOG_LIMIT_INIT("tcp: protocol errors", RB_LOG_WARN);
static struct rb_log_limit refusals = RB_LOG_LIMIT_INIT("tcp: refused frames", RB_LOG_WARN);
static struct rb_log_limit conn_lost = RB_LOG_LIMIT_INIT("tcp: connections lost", RB_LOG_INFO);

/* Peer acknowledged SEND/WRITE frames up to `ack`: complete them in order. */
static int rx_ack(struct tcp_conn *c, uint32_t ack)
{
	uint32_t delta = ack - c->acked;

	if (delta > c->unacked.n) {
		rb_log_limited(&proto_err, c->peer, RB_LOG_WARN,
			       "tcp %s: protocol error: ack %u beyond %u unacked", c->peer, delta,
			       c->unacked.n);
		tcp_conn_fail(c);
		return -EPROTO;
	}
	c->acked = ack;
	while (delta--)
		tcp_wr_complete(c, q_pop(&c->unacked), RB_WC_SUCCESS);
	return 0;
}

static const char *rkey_why(enum rkey_res r)
{
	switch (r) {
	case RK_NOKEY: return "unknown rkey";
	case RK_ACCESS: return "region lacks remote access";
	case RK_BOUNDS: return "out of region bounds";
	default: return "ok";
	}
}

static void rx_refuse(struct tcp_conn *c, const char *op, enum rkey_res r, uint64_t tag,
		      uint32_t rkey, uint64_t addr, uint32_t len)
{
	rb_log_limited(&refusals, c->peer, RB_LOG_WARN,
		       "tcp %s: refused %s rkey 0x%08x addr 0x%llx len %u: %s", c->peer, op, rkey,
		       (unsigned long long)addr, len, rkey_why(r));
	tcp_send_nak(c, tag, RB_WC_REM_ACCESS_ERR);
	tcp_conn_fail(c);
}

static void rx_send(struct tcp_conn *c, uint64_t tag, uint32_t len)
{
	struct tcp_wr *w = c->recvq.head;

	if (!w) {
		rb_log_limited(&refusals, c->peer, RB_LOG_WARN,
			       "tcp %s: SEND of %u bytes with no receive posted", c->peer, len);
		tcp_send_nak(c, tag, RB_WC_RNR_RETRY_EXC_ERR);
		tcp_conn_fail(c);
		return;
	}
	q_pop(&c->recvq);
	if (len > w->len) {
		rb_log_limited(&refusals, c->peer, RB_LOG_WARN,
			       "tcp %s: SEND of %u bytes, receive posted has %llu", c->peer, len,
			       (unsigned long long)w->len);
		tcp_wr_complete(c, w, RB_WC_LOC_LEN_ERR);
		tcp_send_nak(c, tag, RB_WC_REM_OP_ERR);
		tcp_conn_fail(c);
		return;
	}
	rx_data_begin(c, F_SEND, w, w->iov, w->nsge, len);
}

static void rx_write(struct tcp_conn *c, uint64_t tag, uint64_t addr, uint32_t rkey, uint32_t len)
{
	enum rkey_res r = tcp_rkey_check(c->dom, rkey, RB_ACCESS_REMOTE_WRITE, addr, len);
	struct iovec v = { .iov_base = (void *)(uintptr_t)addr, .iov_len = len };

	if (r != RK_OK) {
		rx_refuse(c, "WRITE", r, tag, rkey, addr, len);
		return;
	}
	rx_data_begin(c, F_WRITE, NULL, &v, 1, len);
}

static void rx_read_req(struct tcp_conn *c, uint64_t tag, uint64_t addr, uint32_t rkey,
			uint32_t len)
{
	enum rkey_res r = tcp_rkey_check(c->dom, rkey, RB_ACCESS_REMOTE_READ, addr, len);
	struct tcp_wr *w;

	if (r != RK_OK) {
		rx_refuse(c, "READ", r, tag, rkey, addr, len);
		return;
	}
	w = tcp_wr_get(c);
	if (!w) {
		rb_err("tcp %s: out of memory for READ response", c->peer);
		tcp_conn_fail(c);
		return;
	}
	w->kind = W_RESP;
	w->tag = tag;
	w->len = len;
	w->nsge = len ? 1 : 0;
	w->iov[0].iov_base = (void *)(uintptr_t)addr;
	w->iov[0].iov_len = len;
	w->hdr.type = F_READ_RESP;
	w->hdr.length = htole32(len);
	w->hdr.tag = htole64(tag);
	q_push(&c->txq, w);
	/* Backpressure: a peer that floods READs and never reads its socket
	 * must not make us queue responses without bound. */
	if (++c->nresp >= TCP_RESP_PAUSE)
		c->paused = true;
}

static void rx_read_resp(struct tcp_conn *c, uint64_t tag, uint32_t len)
{
	struct tcp_wr *w = c->reads.head;

	if (!w || w->tag != tag || w->len != len) {
		rb_log_limited(&proto_err, c->peer, RB_LOG_WARN,
			       "tcp %s: protocol error: unexpected READ_RESP tag %llu len %u",
			       c->peer, (unsigned long long)tag, len);
		tcp_conn_fail(c);
		return;
	}
	q_pop(&c->reads);
	rx_data_begin(c, F_READ_RESP, w, w->iov, w->nsge, len);
}

static void rx_nak(struct tcp_conn *c, uint64_t tag, unsigned int status)
{
	static const char *const names[] = {
		[RB_WC_LOC_LEN_ERR] = "LOC_LEN_ERR",
		[RB_WC_REM_ACCESS_ERR] = "REM_ACCESS_ERR",
		[RB_WC_REM_OP_ERR] = "REM_OP_ERR",
		[RB_WC_RETRY_EXC_ERR] = "RETRY_EXC_ERR",
		[RB_WC_RNR_RETRY_EXC_ERR] = "RNR_RETRY_EXC_ERR",
		[RB_WC_GENERAL_ERR] = "GENERAL_ERR",
	};
	static const char *const ops[] = { [W_SEND] = "SEND", [W_WRITE] = "WRITE",
					   [W_READ] = "READ" };
	struct tcp_wr *w;

	if (status <= RB_WC_FLUSH_ERR || status > RB_WC_GENERAL_ERR)
		status = RB_WC_GENERAL_ERR;
	w = q_take_tag(&c->unacked, tag);
	if (!w)
		w = q_take_tag(&c->reads, tag);
	/* Refused on its header while we were still writing its payload. */
	if (!w && c->txq.head && c->txq.head->tag == tag && c->tx_off &&
	    c->txq.head->kind != W_RESP && c->txq.head->kind != W_CTRL) {
		w = q_pop(&c->txq);
		c->tx_off = 0;
	}
	rb_log_limited(&refusals, c->peer, RB_LOG_WARN, "tcp %s: peer refused %s #%llu: %s",
		       c->peer, w ? ops[w->kind] : "unknown WR", (unsigned long long)tag,
		       names[status]);
	if (w)
		tcp_wr_complete(c, w, (enum rb_wc_status)status);
	tcp_conn_fail(c);
}

static void rx_stage_adapt(struct tcp_rx *rx, uint32_t payload)
{
	if (payload > TCP_RX_SMALL) {
		rx->small_run = 0;
		rx->stage = TCP_RX_STAGE_MIN;
	} else if (rx->small_run < TCP_RX_SMALL_RUN && ++rx->small_run == TCP_RX_SMALL_RUN) {
		rx->stage = TCP_RX_STAGE_MAX;
	}
}

static void rx_header(struct tcp_conn *c, const struct tcp_hdr *h)
{
	uint32_t len = le32toh(h->length), rkey = le32toh(h->rkey);
	uint64_t tag = le64toh(h->tag), addr = le64toh(h->addr);
	uint16_t flags = le16toh(h->flags);

	if (h->type < F_SEND || h->type > F_ACK_REQ) {
		rb_log_limited(&proto_err, c->peer, RB_LOG_WARN,
			       "tcp %s: protocol error: frame type %u", c->peer, h->type);
		tcp_conn_fail(c);
		return;
	}
	if ((flags & ~TCP_F_KNOWN) ||
	    ((flags & TCP_F_LAZY) && h->type != F_SEND && h->type != F_WRITE)) {
		rb_log_limited(&proto_err, c->peer, RB_LOG_WARN,
			       "tcp %s: protocol error: flags %#x on frame type %u", c->peer, flags,
			       h->type);
		tcp_conn_fail(c);
		return;
	}
	if (rx_ack(c, le32toh(h->ack)))
		return;
	if ((h->type == F_NAK || h->type == F_ACK || h->type == F_ACK_REQ) && len) {
		rb_log_limited(&proto_err, c->peer, RB_LOG_WARN,
			       "tcp %s: protocol error: control frame with payload", c->peer);
		tcp_conn_fail(c);
		return;
	}
	c->rx.lazy = flags & TCP_F_LAZY;
	rx_stage_adapt(&c->rx, h->type == F_READ_REQ ? 0 : len);
	switch (h->type) {
	case F_SEND: rx_send(c, tag, len); break;
	case F_WRITE: rx_write(c, tag, addr, rkey, len); break;
	case F_READ_REQ: rx_read_req(c, tag, addr, rkey, len); break;
	case F_READ_RESP: rx_read_resp(c, tag, len); break;
	case F_NAK: rx_nak(c, tag, h->status); break;
	case F_ACK_REQ:
		if (c->rx_count != c->ack_sent) {
			c->ack_urgent = true;
			tcp_conn_kick(c);
		}
		break;
	default: break;
	}
}

/* 1 = progress, 0 = would block, -1 = connection gone */
static int rx_result(struct tcp_conn *c, ssize_t n)
{
	if (n > 0)
		return 1;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	if (n == 0)
		rb_dbg("tcp %s: connection closed by peer", c->peer);
	else
		rb_log_limited(&conn_lost, c->peer, RB_LOG_INFO, "tcp %s: receive: %s", c->peer,
			       strerror(errno));
	tcp_conn_fail(c);
	return -1;
}

/* Payload straight into its destination; the staging buffer rides along
 * as the last iovec to pick up the next headers in the same syscall. */
static int rx_read_data(struct tcp_conn *c, bool *drained)
{
	struct tcp_rx *rx = &c->rx;
	struct iovec v[RB_MAX_SGE + 1];
	int cnt = 0, r;
	ssize_t n;
	size_t used, want = rx->stage;

	for (int i = rx->iovidx; i < rx->iovcnt; i++) {
		v[cnt] = rx->iov[i];
		want += v[cnt++].iov_len;
	}
	v[cnt].iov_base = rx->buf;
	v[cnt++].iov_len = rx->stage;
	n = readv(c->fd, v, cnt);
	r = rx_result(c, n);
	if (r <= 0)
		return r;
	*drained = (size_t)n < want;
	used = (uint64_t)n < rx->left ? (size_t)n : (size_t)rx->left;
	rx_iov_advance(rx, NULL, used);
	rx->left -= used;
	rx->head = 0;
	rx->tail = (uint32_t)((size_t)n - used);
	if (!rx->left)
		rx_data_done(c);
	return 1;
}

static void rx_progress(struct tcp_conn *c)
{
	struct tcp_rx *rx = &c->rx;
	int budget = TCP_RX_BUDGET;
	/* A short read emptied the socket: do not ask again just to hear
	 * EAGAIN; the level-triggered cq_fd reports what comes later. */
	bool drained = false;
	struct tcp_hdr h;
	ssize_t n;

	while (c->state == ST_CONNECTED) {
		uint32_t avail = rx->tail - rx->head;

		if (rx->in_data && avail) {
			size_t l = avail < rx->left ? avail : (size_t)rx->left;

			rx_iov_advance(rx, rx->buf + rx->head, l);
			rx->head += (uint32_t)l;
			rx->left -= l;
			if (!rx->left)
				rx_data_done(c);
		} else if (rx->in_data) {
			rx->head = rx->tail = 0;
			if (drained || !budget-- || rx_read_data(c, &drained) <= 0)
				return;
		} else if (avail >= TCP_HDR_SIZE) {
			if (c->paused)
				return;
			memcpy(&h, rx->buf + rx->head, TCP_HDR_SIZE);
			if (h.type == F_SEND && !c->recvq.head && c->opts.rnr_retry == 7) {
				/* rnr_retry 7 = retry forever: wait for a receive. */
				c->rnr_wait = true;
				return;
			}
			rx->head += TCP_HDR_SIZE;
			rx_header(c, &h);
		} else {
			if (rx->head) {
				memmove(rx->buf, rx->buf + rx->head, avail);
				rx->head = 0;
				rx->tail = avail;
			}
			if (drained || !budget--)
				return;
			assert(rx->tail < rx->stage);
			n = read(c->fd, rx->buf + rx->tail, rx->stage - rx->tail);
			if (rx_result(c, n) <= 0)
				return;
			drained = (size_t)n < rx->stage - rx->tail;
			rx->tail += (uint32_t)n;
		}
	}
}

/* Read what is there, write what was produced, repeat if writing
 * lifted a receive pause. */
static void conn_rx(struct tcp_conn *c)
{
	do {
		c->rx_kick = false;
		rx_progress(c);
		if (c->state != ST_CONNECTED)
			return;
		if (c->txq.head && !c->want_out)
			tcp_tx_progress(c);
	} while (c->rx_kick && c->state == ST_CONNECTED);
	tcp_set_events(c);
}

/* An epoll event for c from its cq. */
void tcp_conn_event(struct tcp_conn *c, uint32_t events)
{
	if (c->state != ST_CONNECTED)
		return;
	if ((events & (EPOLLERR | EPOLLHUP)) && (c->paused || c->rnr_wait)) {
		/* Not reading, so the error would be reported forever. */
		rb_log_limited(&conn_lost, c->peer, RB_LOG_INFO, "tcp %s: connection lost",
			       c->peer);
		tcp_conn_fail(c);
		return;
	}
	if (events & EPOLLOUT)
		tcp_tx_progress(c);
	if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) || c->rx_kick)
		conn_rx(c);
}

/*
 * Every SEND/WRITE frame carries the freshest ack, so a stand-alone ACK is
 * needed only when nothing goes the other way.  A corked owner (handling
 * one round of events) often answers within the round: its frames carry
 * the ack at uncork, which then sends ACKs only for what is still owed.
 * Without corking the ACK goes out at once.  Frames the sender marked lazy
 * get no ACK of their own at all: their ack rides on whatever goes back
 * next, or answers the F_ACK_REQ the sender sends once it needs it
 * (tcp_cq_request_acks).
 */
static void ack_owed(struct tcp_conn *c)
{
	struct tcp_cq *cq = c->cq;

	if (!cq->corked) {
		tcp_queue_ctrl(c, F_ACK);
		return;
	}
	if (!c->ack_held) {
		c->ack_held = true;
		c->ack_next = cq->ackq;
		cq->ackq = c;
	}
}

/* Uncork: queue the ACKs no frame of the round carried. */
void tcp_cq_release_acks(struct tcp_cq *cq)
{
	struct tcp_conn *c;

	while ((c = cq->ackq)) {
		cq->ackq = c->ack_next;
		c->ack_held = false;
		if (c->state == ST_CONNECTED && c->ack_urgent && c->rx_count != c->ack_sent &&
		    !tcp_has_unstarted(c)) {
			tcp_queue_ctrl(c, F_ACK);
			tcp_conn_kick(c);
		}
	}
}

/*
 * The owner is about to sleep waiting for something: ask every peer that
 * holds lazy frames of ours for its ack now.  The ACK makes cq_fd readable.
 */
void tcp_cq_request_acks(struct tcp_cq *cq)
{
	struct tcp_conn *c;

	while ((c = cq->lazyq)) {
		cq->lazyq = c->lazy_next;
		c->lazy_listed = false;
		if (c->state != ST_CONNECTED || (!c->unacked.n && !c->txq.n))
			continue;
		tcp_queue_ctrl(c, F_ACK_REQ);
		if (!c->want_out)
			tcp_tx_progress(c);
	}
}

void tcp_conn_service(struct tcp_conn *c)
{
	if (c->state != ST_CONNECTED)
		return;
	if (c->ack_urgent && c->rx_count != c->ack_sent && !tcp_has_unstarted(c))
		ack_owed(c);
	if (c->txq.head && !c->want_out)
		tcp_tx_progress(c);
	if (c->rx_kick)
		conn_rx(c);
}
