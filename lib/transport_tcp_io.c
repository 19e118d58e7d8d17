/* SPDX-License-Identifier: MIT */
/*
 * "tcp" transport data path: framing out (gathered sendmsg), framing in
 * (staged headers, payload readv'd into place), acks, NAKs, teardown and
 * posting.  The frame format is described in transport_tcp.c.
 */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "checked.h"
#include "log.h"
#include "transport_tcp_priv.h"

#define TCP_IOV_MAX (IOV_MAX < 1024 ? IOV_MAX : 1024)
#define TCP_RX_BUDGET 16 /* read syscalls per connection per event */
#define TCP_DEFAULT_WR 128

/* ---- send side -------------------------------------------------------- */

static void set_events(struct tcp_conn *c)
{
	struct epoll_event ev;
	uint32_t want;

	if (c->state != ST_CONNECTED)
		return;
	want = (c->paused || c->rnr_wait ? 0 : EPOLLIN) | (c->want_out ? EPOLLOUT : 0);
	if (want == c->epev)
		return;
	ev.events = want;
	ev.data.ptr = c;
	if (epoll_ctl(c->cq->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
		rb_err("tcp %s: epoll_ctl: %s", c->peer, strerror(errno));
		tcp_conn_fail(c);
		return;
	}
	c->epev = want;
}

static uint64_t wire_payload(const struct tcp_wr *w)
{
	return w->kind == W_READ ? 0 : w->len;
}

static void frame_sent(struct tcp_conn *c, struct tcp_wr *w)
{
	switch (w->kind) {
	case W_SEND:
	case W_WRITE:
		q_push(&c->unacked, w);
		break;
	case W_READ:
		q_push(&c->reads, w);
		break;
	case W_RESP:
		if (--c->nresp <= TCP_RESP_PAUSE / 2 && c->paused) {
			c->paused = false;
			c->rx_kick = true;
		}
		tcp_wr_put(c, w);
		break;
	default:
		tcp_wr_put(c, w);
		break;
	}
}

static bool has_unstarted(const struct tcp_conn *c)
{
	return c->txq.n > 1 || (c->txq.n == 1 && c->tx_off == 0);
}

/* Add the not yet written part of a frame to iov[]; returns entries used. */
static int frame_iov(struct tcp_wr *w, size_t skip, struct iovec *iov)
{
	int cnt = 0;

	if (skip < TCP_HDR_SIZE) {
		iov[cnt].iov_base = (char *)&w->hdr + skip;
		iov[cnt++].iov_len = TCP_HDR_SIZE - skip;
		skip = 0;
	} else {
		skip -= TCP_HDR_SIZE;
	}
	if (!wire_payload(w))
		return cnt;
	for (int i = 0; i < w->nsge; i++) {
		if (skip >= w->iov[i].iov_len) {
			skip -= w->iov[i].iov_len;
			continue;
		}
		iov[cnt].iov_base = (char *)w->iov[i].iov_base + skip;
		iov[cnt++].iov_len = w->iov[i].iov_len - skip;
		skip = 0;
	}
	return cnt;
}

static void tx_advance(struct tcp_conn *c, size_t n)
{
	while (n && c->txq.head) {
		struct tcp_wr *w = c->txq.head;
		size_t rem = TCP_HDR_SIZE + wire_payload(w) - c->tx_off;

		if (n < rem) {
			c->tx_off += n;
			return;
		}
		n -= rem;
		c->tx_off = 0;
		q_pop(&c->txq);
		frame_sent(c, w);
	}
}

void tcp_tx_progress(struct tcp_conn *c)
{
	struct iovec iov[TCP_IOV_MAX];
	struct msghdr msg = { .msg_iov = iov };
	ssize_t n;

	while (c->txq.head && c->state == ST_CONNECTED) {
		size_t skip = c->tx_off;
		int cnt = 0;

		for (struct tcp_wr *w = c->txq.head; w; w = w->next) {
			if (cnt + 1 + w->nsge > TCP_IOV_MAX)
				break;
			if (skip == 0 && w->hdr.type >= F_SEND) {
				/* Not started: carry the freshest ack. */
				w->hdr.ack = htole32(c->rx_count);
				c->ack_sent = c->rx_count;
				c->ack_urgent = false;
			}
			cnt += frame_iov(w, skip, iov + cnt);
			skip = 0;
		}
		msg.msg_iovlen = (size_t)cnt;
		n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				c->want_out = true;
				break;
			}
			rb_info("tcp %s: send: %s", c->peer, strerror(errno));
			tcp_conn_fail(c);
			return;
		}
		tx_advance(c, (size_t)n);
	}
	if (!c->txq.head)
		c->want_out = false;
	set_events(c);
}

void tcp_tx_queue(struct tcp_conn *c, struct tcp_wr *w)
{
	q_push(&c->txq, w);
}

/* F_ACK or F_ACK_REQ (payload-free control frames). */
static void queue_ctrl(struct tcp_conn *c, uint8_t type)
{
	struct tcp_wr *w = tcp_wr_get(c);

	if (!w) {
		rb_err("tcp %s: out of memory for a control frame", c->peer);
		tcp_conn_fail(c);
		return;
	}
	w->kind = W_CTRL;
	w->hdr.type = type;
	q_push(&c->txq, w);
}

/* Best effort: the peer learns which WR was refused.  Only at a frame
 * boundary; frames still queued are flushed, never sent. */
static void send_nak(struct tcp_conn *c, uint64_t tag, enum rb_wc_status st)
{
	struct tcp_hdr h = {
		.type = F_NAK,
		.status = (uint8_t)st,
		.ack = htole32(c->rx_count),
		.tag = htole64(tag),
	};

	if (c->tx_off) {
		rb_dbg("tcp %s: NAK not sent, frame half written", c->peer);
		return;
	}
	if (send(c->fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(h))
		rb_dbg("tcp %s: NAK not sent", c->peer);
}

/* ---- teardown ----------------------------------------------------------- */

static void flush_q(struct tcp_conn *c, struct tcp_q *q)
{
	struct tcp_wr *w;

	while ((w = q_pop(q))) {
		if (w->kind == W_RESP || w->kind == W_CTRL)
			tcp_wr_put(c, w);
		else
			tcp_wr_complete(c, w, RB_WC_FLUSH_ERR);
	}
}

/* Connection is dead: every outstanding WR completes with FLUSH_ERR, send
 * queue in posting order (the unacked and read lists merged by tag). */
void tcp_conn_fail(struct tcp_conn *c)
{
	struct tcp_wr *w;

	if (c->state != ST_CONNECTED)
		return;
	c->state = ST_DEAD;
	shutdown(c->fd, SHUT_RDWR);
	if (epoll_ctl(c->cq->epfd, EPOLL_CTL_DEL, c->fd, NULL) < 0)
		rb_err("tcp %s: epoll_ctl del: %s", c->peer, strerror(errno));
	c->in_epoll = false;
	c->epev = 0;
	if (c->rx.in_data && c->rx.wr)
		tcp_wr_complete(c, c->rx.wr, RB_WC_FLUSH_ERR);
	c->rx.in_data = false;
	c->rx.wr = NULL;
	flush_q(c, &c->recvq);
	while (c->unacked.head || c->reads.head) {
		if (!c->reads.head ||
		    (c->unacked.head && c->unacked.head->tag < c->reads.head->tag))
			w = q_pop(&c->unacked);
		else
			w = q_pop(&c->reads);
		tcp_wr_complete(c, w, RB_WC_FLUSH_ERR);
	}
	flush_q(c, &c->txq);
	c->tx_off = 0;
	c->nresp = 0;
	c->want_out = false;
}

void tcp_disconnect(struct rb_conn *rc)
{
	struct tcp_conn *c = to_conn(rc);

	if (c->state == ST_CONNECTED) {
		rb_dbg("tcp %s: disconnect", c->peer);
		tcp_conn_fail(c);
	}
}

int tcp_conn_attach(struct tcp_conn *c, struct tcp_cq *cq, const struct rb_conn_caps *caps)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	uint32_t sge;
	int ret;

	c->max_send_wr = caps && caps->max_send_wr ? caps->max_send_wr : TCP_DEFAULT_WR;
	c->max_recv_wr = caps && caps->max_recv_wr ? caps->max_recv_wr : TCP_DEFAULT_WR;
	sge = caps && caps->max_sge ? caps->max_sge : RB_MAX_SGE;
	if (sge > RB_MAX_SGE)
		return -EINVAL;
	c->max_sge = sge;
	if (c->rq_used > c->max_recv_wr)
		return -EINVAL; /* more early receives than the caps allow */
	ret = tcp_pool_grow(c, c->max_send_wr + c->max_recv_wr + TCP_CHUNK);
	if (ret)
		return ret;
	tcp_sock_opts(c->fd, &c->opts);
	c->rx.stage = TCP_RX_STAGE_MIN;
	if (epoll_ctl(cq->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		return -errno;
	c->in_epoll = true;
	c->epev = EPOLLIN;
	c->cq = cq;
	cq->nconns++;
	return 0;
}

void tcp_conn_detach(struct tcp_conn *c)
{
	struct tcp_cq *cq = c->cq;
	struct tcp_conn **pp;
	struct tcp_wr *w, *prev = NULL, *next;

	if (!cq)
		return;
	if (c->in_epoll && epoll_ctl(cq->epfd, EPOLL_CTL_DEL, c->fd, NULL) < 0)
		rb_err("tcp %s: epoll_ctl del: %s", c->peer, strerror(errno));
	for (pp = &cq->dirty; *pp; pp = &(*pp)->dirty_next) {
		if (*pp == c) {
			*pp = c->dirty_next;
			break;
		}
	}
	for (pp = &cq->ackq; c->ack_held && *pp; pp = &(*pp)->ack_next) {
		if (*pp == c) {
			*pp = c->ack_next;
			c->ack_held = false;
			break;
		}
	}
	for (pp = &cq->lazyq; c->lazy_listed && *pp; pp = &(*pp)->lazy_next) {
		if (*pp == c) {
			*pp = c->lazy_next;
			c->lazy_listed = false;
			break;
		}
	}
	if (c->ndone)
		rb_warn("tcp %s: destroyed with %u completions not polled", c->peer, c->ndone);
	for (w = cq->done.head; c->ndone && w; w = next) {
		next = w->next;
		if (w->conn != c) {
			prev = w;
			continue;
		}
		if (prev)
			prev->next = next;
		else
			cq->done.head = next;
		if (cq->done.tail == w)
			cq->done.tail = prev;
		cq->done.n--;
		c->ndone--;
	}
	cq->nconns--;
	c->cq = NULL;
}

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

/* Peer acknowledged SEND/WRITE frames up to `ack`: complete them in order. */
static int rx_ack(struct tcp_conn *c, uint32_t ack)
{
	uint32_t delta = ack - c->acked;

	if (delta > c->unacked.n) {
		rb_warn("tcp %s: protocol error: ack %u beyond %u unacked", c->peer, delta,
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
	rb_warn("tcp %s: refused %s rkey 0x%08x addr 0x%llx len %u: %s", c->peer, op, rkey,
		(unsigned long long)addr, len, rkey_why(r));
	send_nak(c, tag, RB_WC_REM_ACCESS_ERR);
	tcp_conn_fail(c);
}

static void rx_send(struct tcp_conn *c, uint64_t tag, uint32_t len)
{
	struct tcp_wr *w = c->recvq.head;

	if (!w) {
		rb_warn("tcp %s: SEND of %u bytes with no receive posted", c->peer, len);
		send_nak(c, tag, RB_WC_RNR_RETRY_EXC_ERR);
		tcp_conn_fail(c);
		return;
	}
	q_pop(&c->recvq);
	if (len > w->len) {
		rb_warn("tcp %s: SEND of %u bytes, receive posted has %llu", c->peer, len,
			(unsigned long long)w->len);
		tcp_wr_complete(c, w, RB_WC_LOC_LEN_ERR);
		send_nak(c, tag, RB_WC_REM_OP_ERR);
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
		rb_warn("tcp %s: protocol error: unexpected READ_RESP tag %llu len %u", c->peer,
			(unsigned long long)tag, len);
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
	rb_warn("tcp %s: peer refused %s #%llu: %s", c->peer, w ? ops[w->kind] : "unknown WR",
		(unsigned long long)tag, names[status]);
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
		rb_warn("tcp %s: protocol error: frame type %u", c->peer, h->type);
		tcp_conn_fail(c);
		return;
	}
	if ((flags & ~TCP_F_KNOWN) ||
	    ((flags & TCP_F_LAZY) && h->type != F_SEND && h->type != F_WRITE)) {
		rb_warn("tcp %s: protocol error: flags %#x on frame type %u", c->peer, flags,
			h->type);
		tcp_conn_fail(c);
		return;
	}
	if (rx_ack(c, le32toh(h->ack)))
		return;
	if ((h->type == F_NAK || h->type == F_ACK || h->type == F_ACK_REQ) && len) {
		rb_warn("tcp %s: protocol error: control frame with payload", c->peer);
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
		rb_info("tcp %s: receive: %s", c->peer, strerror(errno));
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
	set_events(c);
}

/* An epoll event for c from its cq. */
void tcp_conn_event(struct tcp_conn *c, uint32_t events)
{
	if (c->state != ST_CONNECTED)
		return;
	if ((events & (EPOLLERR | EPOLLHUP)) && (c->paused || c->rnr_wait)) {
		/* Not reading, so the error would be reported forever. */
		rb_info("tcp %s: connection lost", c->peer);
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
		queue_ctrl(c, F_ACK);
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
		    !has_unstarted(c)) {
			queue_ctrl(c, F_ACK);
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
		queue_ctrl(c, F_ACK_REQ);
		if (!c->want_out)
			tcp_tx_progress(c);
	}
}

void tcp_conn_service(struct tcp_conn *c)
{
	if (c->state != ST_CONNECTED)
		return;
	if (c->ack_urgent && c->rx_count != c->ack_sent && !has_unstarted(c))
		ack_owed(c);
	if (c->txq.head && !c->want_out)
		tcp_tx_progress(c);
	if (c->rx_kick)
		conn_rx(c);
}

/* ---- posting ------------------------------------------------------------ */

static int post(struct tcp_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
		uint8_t kind, uint64_t raddr, uint32_t rkey)
{
	static const uint8_t ftype[] = { [W_SEND] = F_SEND, [W_WRITE] = F_WRITE,
					 [W_READ] = F_READ_REQ };
	struct tcp_wr *w;
	uint64_t total;

	/* A passive-side request may take receives before accept, so every
	 * credit is covered before the peer can send (transport.h); limits
	 * are checked against the caps at accept. */
	bool early = !c->cq && kind == W_RECV && c->state == ST_REQUEST;

	if (!c->cq && !early)
		return -ENOTCONN;
	if (!cqe || nsge < 0 || (uint32_t)nsge > (early ? RB_MAX_SGE : c->max_sge) ||
	    (nsge && !sg))
		return -EINVAL;
	if (!early &&
	    (kind == W_RECV ? c->rq_used >= c->max_recv_wr : c->sq_used >= c->max_send_wr))
		return -ENOMEM;
	if (!tcp_sges_ok(c->dom, sg, nsge, &total)) {
		rb_dbg("tcp %s: post with sge outside registered memory", c->peer);
		return -EINVAL;
	}
	if (total > TCP_MAX_MSG)
		return -EINVAL;
	w = tcp_wr_get(c);
	if (!w)
		return -ENOMEM;
	w->kind = kind;
	w->cqe = cqe;
	w->len = total;
	for (int i = 0; i < nsge; i++) {
		if (!sg[i].length)
			continue;
		w->iov[w->nsge].iov_base = sg[i].addr;
		w->iov[w->nsge++].iov_len = sg[i].length;
	}
	if (kind == W_RECV)
		c->rq_used++;
	else
		c->sq_used++;
	if (early) {
		q_push(&c->recvq, w);
		return 0;
	}
	if (c->state != ST_CONNECTED) {
		/* Like a QP in error state: accepted, then flushed. */
		tcp_wr_complete(c, w, RB_WC_FLUSH_ERR);
		return 0;
	}
	if (kind == W_RECV) {
		q_push(&c->recvq, w);
		if (c->rnr_wait) {
			c->rnr_wait = false;
			c->rx_kick = true;
			tcp_conn_kick(c);
		}
		return 0;
	}
	w->tag = c->next_tag++;
	w->hdr.type = ftype[kind];
	w->hdr.length = htole32((uint32_t)total);
	w->hdr.tag = htole64(w->tag);
	w->hdr.addr = htole64(raddr);
	w->hdr.rkey = htole32(rkey);
	/* Lazy while the owner sleeps quietly and the send queue has room to
	 * spare: a peer's reply carries the ack anyway. */
	if (kind != W_READ && c->cq->quiet && c->sq_used <= c->max_send_wr / 2) {
		w->hdr.flags = htole16(TCP_F_LAZY);
		if (!c->lazy_listed) {
			c->lazy_listed = true;
			c->lazy_next = c->cq->lazyq;
			c->cq->lazyq = c;
		}
	}
	q_push(&c->txq, w);
	if (c->want_out)
		return 0;
	if (c->cq->batch || c->cq->corked)
		tcp_conn_kick(c); /* written by the next cq_poll or the uncork */
	else
		tcp_tx_progress(c);
	if (c->rx_kick && c->state == ST_CONNECTED)
		tcp_conn_kick(c);
	return 0;
}

int tcp_post_recv(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge)
{
	return post(to_conn(c), cqe, sg, nsge, W_RECV, 0, 0);
}

int tcp_post_send(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge)
{
	return post(to_conn(c), cqe, sg, nsge, W_SEND, 0, 0);
}

int tcp_post_read(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
		  uint64_t raddr, uint32_t rkey)
{
	return post(to_conn(c), cqe, sg, nsge, W_READ, raddr, rkey);
}

int tcp_post_write(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
		   uint64_t raddr, uint32_t rkey)
{
	return post(to_conn(c), cqe, sg, nsge, W_WRITE, raddr, rkey);
}

